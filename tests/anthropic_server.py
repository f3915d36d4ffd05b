"""A scripted stand-in for the Anthropic Messages API, for tests, browser tests and demos.

There is no network in the test environment, so the
real ``anthropic`` SDK is pointed at this server on 127.0.0.1. It speaks enough of the Messages API
for the SDK: ``POST /v1/messages`` as JSON or, with ``"stream": true``, as server-sent events
(message_start, content_block_start, content_block_delta text_delta..., content_block_stop,
message_delta with usage, message_stop). Streams use chunked transfer encoding like the real API,
so a dropped stream is seen by the client as an incomplete body, not as a clean end.

A test queues steps; each request consumes one. With the queue empty the server answers with a
deterministic summary. Every request body is recorded.

    server = start_server()
    server.script(status(529), prompt_too_long(tokens=137_500, maximum=135_000), ok("the summary"))
    ...  # Anthropic(base_url=server.url, ...)
    server.requests  # the JSON bodies received, oldest first
    server.close()

Standalone (browser tests, demos): ``python -m tests.anthropic_server --port 8765``. Another process
can then queue steps with ``POST /_script`` (a JSON list of step dicts, see ``Step.to_dict``) and read
the recorded bodies with ``GET /_requests``.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

StepKind = Literal["ok", "status", "prompt_too_long", "drop_stream", "slow", "stream_error"]

# Error `type` the API puts in the body for each status (Messages API "Errors" page).
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}

ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}

# How many text deltas a dropped stream sends before the socket is closed.
DROP_AFTER_CHUNKS = 2


@dataclass(slots=True)
class Step:
    """One scripted answer. Build steps with the module functions (ok, status, ...)."""

    kind: StepKind
    text: str | None = None  # None: the deterministic default summary
    delay: float = 0.0  # seconds before the response starts
    chunk_delay: float = 0.0  # seconds between text deltas
    status: int = 200
    retry_after: float | None = None
    message: str | None = None  # error message; default from ERROR_MESSAGES
    error_type: str | None = None  # error type; default from ERROR_TYPES
    input_tokens: int | None = None  # usage to report; default estimated from the request
    output_tokens: int | None = None
    after_chunks: int = DROP_AFTER_CHUNKS
    blocks: list[str] | None = None  # a streamed answer in several text blocks (``text``: their concatenation)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown step fields: {sorted(unknown)}")
        return cls(**data)


def ok(
    text: str | None = None, delay: float = 0.0, *, input_tokens: int | None = None, output_tokens: int | None = None
) -> Step:
    """A successful answer (streamed or JSON, as the request asks)."""
    return Step("ok", text=text, delay=delay, input_tokens=input_tokens, output_tokens=output_tokens)


def ok_blocks(*texts: str) -> Step:
    """A successful streamed answer made of several text blocks, one per text."""
    return Step("ok", text="".join(texts), blocks=list(texts))


def slow(text: str | None = None, chunk_delay: float = 0.05) -> Step:
    """A successful stream that pauses ``chunk_delay`` seconds between text deltas."""
    return Step("slow", text=text, chunk_delay=chunk_delay)


def status(
    code: int, retry_after: float | None = None, *, message: str | None = None, error_type: str | None = None
) -> Step:
    """An HTTP error with the API's error body; ``retry_after`` sets the ``retry-after`` header (seconds)."""
    return Step("status", status=code, retry_after=retry_after, message=message, error_type=error_type)


def prompt_too_long(tokens: int, maximum: int) -> Step:
    """The API's 400 for a prompt over the window (wording as quoted in docs/compaction/claude-code.md §2.8)."""
    return Step(
        "prompt_too_long",
        status=400,
        error_type="invalid_request_error",
        message=f"prompt is too long: {tokens} tokens > {maximum} maximum",
    )


def drop_stream(text: str | None = None, after_chunks: int = DROP_AFTER_CHUNKS) -> Step:
    """Start a stream (message_start and ``after_chunks`` deltas), then close the socket mid-body."""
    return Step("drop_stream", text=text, after_chunks=after_chunks)


def stream_error(error_type: str = "overloaded_error", message: str | None = None) -> Step:
    """A 200 stream that turns into an SSE ``error`` event after message_start (the API does this under load)."""
    return Step("stream_error", error_type=error_type, message=message)


def default_summary(body: dict[str, Any]) -> str:
    """The deterministic answer given when the script is empty: it depends only on the request."""
    messages = body.get("messages") or []
    chars = sum(len(_content_text(m.get("content"))) for m in messages if isinstance(m, dict))
    return (
        "## Summary (scripted test server)\n\n"
        f"The conversation ({len(messages)} message(s), {chars} characters) was summarised by the scripted "
        f"Anthropic test server for model {body.get('model', '?')}. "
        "Primary request: continue the work described in the transcript. "
        "Pending tasks: none recorded by the test server."
    )


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _estimate_tokens(text: str) -> int:
    # chars/4, the rough estimate Claude Code uses (docs/compaction/claude-code.md §1.2).
    return max(1, round(len(text) / 4))


def _chunks(text: str) -> list[str]:
    """Text deltas of a few words each, whitespace kept, so the deltas join back to the text."""
    words = re.findall(r"\S+\s*|\s+", text)
    return ["".join(words[i : i + 3]) for i in range(0, len(words), 3)] or [""]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # tests and demos do not want one line per request on stderr

    # --- routing ------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/_requests":
            self._send_json(200, self.server.owner.requests)
        elif self.path == "/_health":
            self._send_json(200, {"ok": True, "pending": self.server.owner.pending()})
        else:
            self._send_error_body(404, "not_found_error", f"no route for GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        if path == "/_script":
            try:
                steps = [Step.from_dict(d) for d in json.loads(raw or b"[]")]
            except (ValueError, TypeError) as err:
                self._send_error_body(400, "invalid_request_error", f"bad script: {err}")
                return
            self.server.owner.script(*steps)
            self._send_json(200, {"queued": len(steps), "pending": self.server.owner.pending()})
            return
        if path != "/v1/messages":
            self._send_error_body(404, "not_found_error", f"no route for POST {path}")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_error_body(400, "invalid_request_error", "request body is not JSON")
            return
        if not isinstance(body, dict) or not all(k in body for k in ("model", "max_tokens", "messages")):
            self._send_error_body(400, "invalid_request_error", "model, max_tokens and messages are required")
            return
        owner = self.server.owner
        owner._record(body, {k.lower(): v for k, v in self.headers.items()})
        self._answer(owner._next_step(), body)

    # --- answers ------------------------------------------------------------------------------

    def _answer(self, step: Step, body: dict[str, Any]) -> None:
        if step.delay:
            time.sleep(step.delay)
        if step.kind in ("status", "prompt_too_long"):
            error_type = step.error_type or ERROR_TYPES.get(step.status, "api_error")
            message = step.message or ERROR_MESSAGES.get(error_type, "error")
            headers = {"retry-after": _format_seconds(step.retry_after)} if step.retry_after is not None else {}
            self._send_error_body(step.status, error_type, message, headers=headers)
            return
        text = step.text if step.text is not None else default_summary(body)
        prompt_chars = len(str(body.get("system") or "")) + sum(
            len(_content_text(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
        )
        estimated_input = max(1, round(prompt_chars / 4))  # chars/4, docs/compaction/claude-code.md §1.2
        usage = {
            "input_tokens": step.input_tokens if step.input_tokens is not None else estimated_input,
            "output_tokens": step.output_tokens if step.output_tokens is not None else _estimate_tokens(text),
        }
        message_id = f"msg_scripted_{self.server.owner._request_count():04d}"
        if not body.get("stream"):
            if step.kind == "drop_stream":
                self._drop_json()
                return
            self._send_json(200, _message(message_id, body["model"], text, usage))
            return
        self._stream(step, message_id, body["model"], text, usage)

    def _stream(self, step: Step, message_id: str, model: str, text: str, usage: dict[str, int]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_{message_id}")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        start = _message(message_id, model, "", {"input_tokens": usage["input_tokens"], "output_tokens": 1})
        start["content"] = []
        start["stop_reason"] = None
        self._event("message_start", {"type": "message_start", "message": start})
        if step.kind == "stream_error":
            error_type = step.error_type or "overloaded_error"
            error = {"type": error_type, "message": step.message or ERROR_MESSAGES.get(error_type, "error")}
            self._event("error", {"type": "error", "error": error})
            self._end_chunks()
            return
        if step.blocks is not None:
            self._blocks(step.blocks)
            self._stop(usage)
            return
        self._event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        self._event("ping", {"type": "ping"})
        for number, piece in enumerate(_chunks(text)):
            if step.kind == "drop_stream" and number >= step.after_chunks:
                self._drop_connection()
                return
            if step.chunk_delay and number:
                time.sleep(step.chunk_delay)
            delta = {"type": "text_delta", "text": piece}
            self._event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        if step.kind == "drop_stream":  # fewer chunks than after_chunks: drop before the block ends
            self._drop_connection()
            return
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._stop(usage)

    def _blocks(self, texts: list[str]) -> None:
        for index, text in enumerate(texts):
            block = {"type": "text", "text": ""}
            self._event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            delta = {"type": "text_delta", "text": text}
            self._event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            self._event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _stop(self, usage: dict[str, int]) -> None:
        self._event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        self._event("message_stop", {"type": "message_stop"})
        self._end_chunks()

    # --- wire helpers -------------------------------------------------------------------------

    def _event(self, name: str, data: dict[str, Any]) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop_connection(self) -> None:
        # FIN in the middle of a chunked body: the client has read the deltas sent so far and then
        # sees the body end early ("incomplete chunked read"), as when a proxy drops a stream.
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _drop_json(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "4096")
        self.end_headers()
        self.wfile.write(b'{"id": "msg_dropped", "type": "mess')
        self._drop_connection()

    def _send_json(self, code: int, data: Any, *, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", f"req_scripted_{self.server.owner._request_count():04d}")
        self.send_header("connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        self.wfile.write(payload)

    def _send_error_body(
        self, code: int, error_type: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        self._send_json(code, {"type": "error", "error": {"type": error_type, "message": message}}, headers=headers)


def _message(message_id: str, model: str, text: str, usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, **usage},
    }


def _format_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


@dataclass
class ScriptedServer:
    """A running scripted server; ``url`` is the SDK's ``base_url``."""

    host: str = "127.0.0.1"
    port: int = 0
    default_chunk_delay: float = 0.0  # pause between deltas of the default answer (demos show progress)
    _steps: deque[Step] = field(default_factory=deque, init=False, repr=False)
    _requests: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _headers: list[dict[str, str]] = field(default_factory=list, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _httpd: _Server | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def start(self) -> Self:
        httpd = _Server((self.host, self.port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        # A short poll interval so close() (which waits for the loop to notice) takes milliseconds, not 0.5 s.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="anthropic-scripted-server", daemon=True
        )
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def script(self, *steps: Step) -> None:
        """Queue answers; each request to /v1/messages consumes the oldest one."""
        with self._lock:
            self._steps.extend(steps)

    def pending(self) -> int:
        with self._lock:
            return len(self._steps)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies received on /v1/messages, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers of each request (lower-case names); credentials are masked."""
        with self._lock:
            return list(self._headers)

    def reset(self) -> None:
        with self._lock:
            self._steps.clear()
            self._requests.clear()
            self._headers.clear()

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by the handler ------------------------------------------------------------------

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        masked = {k: ("***" if k in ("x-api-key", "authorization") else v) for k, v in headers.items()}
        with self._lock:
            self._requests.append(body)
            self._headers.append(masked)

    def _next_step(self) -> Step:
        with self._lock:
            if self._steps:
                return self._steps.popleft()
        return Step("slow", chunk_delay=self.default_chunk_delay) if self.default_chunk_delay else Step("ok")

    def _request_count(self) -> int:
        with self._lock:
            return len(self._requests)


def start_server(*, host: str = "127.0.0.1", port: int = 0, default_chunk_delay: float = 0.0) -> ScriptedServer:
    """Start a scripted server on a free port (or ``port``) in a background thread."""
    return ScriptedServer(host=host, port=port, default_chunk_delay=default_chunk_delay).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted Anthropic Messages API server for tests and demos")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--chunk-delay", type=float, default=0.0, help="seconds between streamed deltas of default answers (demos)"
    )
    args = parser.parse_args(argv)
    server = start_server(host=args.host, port=args.port, default_chunk_delay=args.chunk_delay)
    print(f"scripted Anthropic API listening on {server.url}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
