"""Generated klaude-code sessions for the 2.8.1 goldens: the same bytes from the same seed, under any Python >= 3.12.

Standard library only: ``regenerate.py`` imports this module under the klaude-code 2.8.1 virtualenv (Python 3.13)
to record what klaude decides, and ``test_klaude_goldens.py`` imports it under the project's Python to check the
project decides the same. Nothing here reads klaude's code; the sessions are only inputs.

A session is ``events.jsonl`` (one ``{"type": <class>, "data": {...}}`` per line, written as klaude's codec writes
it: ``json.dumps(..., ensure_ascii=False)``), ``meta.json`` and the model config's ``context_limit`` (klaude reads it
from its config, not from the session). Scenarios mix the cases the goldens must cover: tool calls and large
outputs crossing the threshold, raw U+2028 / U+2029 / U+0085 inside a line, empty and image-only
DeveloperMessages, image-only user messages, earlier CompactionEntries (several, and one with nothing new after
it), sub-agent sessions, and file-level oddities klaude's loader meets (CRLF, blank lines, a lone CR, unknown types).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from typing import Any

GENERATOR_VERSION = 5
SESSION_COUNT = 240
SCENARIOS = (
    "plain",
    "large-tool-output",
    "unicode-line-breaks",
    "developer-messages",
    "images",
    "previous-summary-nothing-new",
    "sub-agent",
    "several-compactions",
    "file-quirks",
    "split-task",
    "many-turns",
    "awkward-boundaries",
)
# The model configs' context_limit (None: a config without one); small so sessions cross the threshold quickly.
CONFIG_LIMITS = (None, 8000, 12000, 16000, 24000, 32000)
MODEL = "claude-sonnet-4-5"

_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "parser",
    "cache",
    "module",
    "request",
    "token",
    "window",
    "budget",
    "compact",
    "summary",
    "kept",
    "tail",
    "head",
    "index",
    "cursor",
    "session",
    "record",
    "import",
    "export",
    "review",
    "diff",
    "patch",
    "retry",
    "worker",
    "queue",
    "limit",
    "error",
    "branch",
    "merge",
    "config",
    "model",
    "client",
    "stream",
    "chunk",
    "reader",
    "writer",
    "buffer",
    "socket",
    "timeout",
    "handler",
    "router",
    "view",
    "template",
]  # noqa: SIM905 (a word list reads better as one string)
_PATHS = (
    "src/app.py",
    "src/models.py",
    "src/views/index.py",
    "tests/test_app.py",
    "README.md",
    "docs/notes.md",
    "pkg/util/strings.go",
    "/etc/hosts",
)
_BREAKS = ("\u2028", "\u2029", "\u0085")


@dataclass
class Session:
    seed: int
    scenario: str
    config_limit: int | None
    events: bytes
    meta: dict[str, Any] | None
    # Our model of klaude's loader, checked against klaude's own by regenerate.py: the number of history items
    # klaude decodes from each physical line (split on b"\n"), and the history item types.
    items_per_line: list[int] = field(default_factory=list)
    item_types: list[str] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        meta = json.dumps(self.meta, sort_keys=True).encode() if self.meta is not None else b"-"
        return hashlib.sha256(self.events + b"\0" + meta + b"\0" + str(self.config_limit).encode()).hexdigest()

    def checkpoints(self) -> list[int]:
        """History prefix lengths to decide at: before every prompt, response, compaction and failed call, and the end.

        These are where klaude checks its threshold (turn starts in core/task.py, prompts in tui/runner.py); the
        compaction itself is also run at each (as ``/compact`` would) to compare cuts and requests.
        """
        return checkpoints(self.item_types)


def checkpoints(item_types: list[str]) -> list[int]:
    """``Session.checkpoints`` for any history, given its item types."""
    found = [
        end
        for end in range(1, len(item_types))
        if item_types[end] in ("UserMessage", "AssistantMessage", "CompactionEntry", "StreamErrorItem")
    ]
    return [*found, len(item_types)]


# --- the summarizer stand-in and the request fingerprint (shared by both sides) -----------------------------------


def request_sha256(*, system: str, parts: list[str], max_tokens: int) -> str:
    """One summarizer request: the system prompt, one user message made of its text parts, the output budget."""
    payload = {"system": system, "messages": [{"role": "user", "content": parts}], "max_tokens": max_tokens}
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def body_sha256(body: dict[str, Any]) -> str:
    """A whole Messages API request body as JSON (key order aside): what klaude's provider sends."""
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


# The betas klaude 2.8.1's Anthropic provider asks for on every call (llm/anthropic/client.py build_payload,
# const.py ANTHROPIC_BETA_INTERLEAVED_THINKING); the SDK sends them as the ``anthropic-beta`` header.
ANTHROPIC_BETAS = ["interleaved-thinking-2025-05-14"]


def fake_reply(request_sha: str) -> str:
    """The summarizer's reply to a request, fixed by the request; the padding checks that klaude strips it."""
    return f"\n  ## Goal\nreply to {request_sha[:16]}\n\n## Next Steps\n1. continue\n\n"


def short(value: Any) -> str:
    """A 16-hex fingerprint of any JSON value (keeps the golden file small)."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


# --- the generator ---------------------------------------------------------------------------------------------------


class _Writer:
    """Builds events.jsonl line by line, tracking klaude's history indices."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[bytes] = []
        self.items_per_line: list[int] = []
        self.types: list[str] = []
        self.minute = 0

    def stamp(self) -> str:
        self.minute += 1
        return f"2026-01-{1 + self.minute // 1440:02d}T{(self.minute // 60) % 24:02d}:{self.minute % 60:02d}:00.000000"

    def item(self, kind: str, data: dict[str, Any], *, ascii_only: bool = False, quirk: str = "") -> int:
        """Write one item; returns its history index, or -1 when klaude's loader will not decode it."""
        data = {**data, "created_at": self.stamp()}
        text = json.dumps({"type": kind, "data": data}, ensure_ascii=ascii_only)
        decodes = not any(b in text for b in _BREAKS)
        if quirk == "crlf":
            line = text + "\r\n"
        elif quirk == "lone-cr":
            # A CR where JSON allows whitespace: JSON reads it, but splitlines() (and universal newlines) break there.
            line = text.replace(', "data": ', ',\r"data": ', 1) + "\n"
            decodes = False
        else:
            line = text + "\n"
        self.lines.append(line.encode())
        self.items_per_line.append(1 if decodes else 0)
        if not decodes:
            return -1
        self.types.append(kind)
        return len(self.types) - 1

    def raw(self, line: bytes, items: int = 0) -> None:
        self.lines.append(line)
        self.items_per_line.append(items)

    def joined(self, first: tuple[str, dict[str, Any]], second: tuple[str, dict[str, Any]], separator: str) -> None:
        """Two items on one physical line, parted by a line break only str.splitlines() sees: klaude reads both."""
        texts = [
            json.dumps({"type": kind, "data": {**data, "created_at": self.stamp()}}) for kind, data in (first, second)
        ]
        self.raw((texts[0] + separator + texts[1] + "\n").encode(), items=2)
        self.types.extend([first[0], second[0]])

    def trailing_break(self, kind: str, data: dict[str, Any], separator: str) -> None:
        """An item followed by a break JSON refuses but str.splitlines() takes: klaude reads the item."""
        text = json.dumps({"type": kind, "data": {**data, "created_at": self.stamp()}})
        self.raw((text + separator + "\n").encode(), items=1)
        self.types.append(kind)

    def words(self, low: int, high: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(low, high)))


def _big_text(rng: random.Random, chars: int) -> str:
    lines = []
    total = 0
    number = 1
    while total < chars:
        line = f"{number:>5}\t" + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 14)))
        lines.append(line)
        total += len(line) + 1
        number += 1
    return "\n".join(lines)


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"klaude-goldens-{GENERATOR_VERSION}-{seed}")
        self.seed = seed
        self.scenario = SCENARIOS[seed % len(SCENARIOS)]
        self.w = _Writer(self.rng)
        self.config_limit = self.rng.choice(CONFIG_LIMITS) if seed % 7 else None
        self.usage_limit = self.config_limit
        if self.config_limit is None and self.rng.random() < 0.6:
            # a config without context_limit, but usage recorded by a model whose config had one
            self.usage_limit = self.rng.choice((12000, 24000))
        self.context = 1500 + self.rng.randint(0, 800)  # system prompt and tools
        self.calls = 0
        self.summaries = 0

    # -- items

    def user(self, text: str | None = None, *, images: int = 0, quirk: str = "") -> int:
        parts: list[dict[str, Any]] = []
        if text is None:
            text = self.w.words(3, 40)
        if text:
            parts.append({"type": "text", "text": text})
        for n in range(images):
            if self.rng.random() < 0.5:
                parts.append({"type": "image_url", "url": f"https://img.example/{self.seed}/{n}.png", "id": None})
            else:
                parts.append({"type": "image_file", "file_path": f"/tmp/klaude/img-{self.seed}-{n}.png"})
        self.context += len(text) // 4 + images * 300
        return self.w.item("UserMessage", {"role": "user", "parts": parts, "id": None, "response_id": None})

    def developer(self, mode: str = "text", *, words: tuple[int, int] = (5, 30)) -> int:
        parts: list[dict[str, Any]] = []
        if mode in ("text", "text+image"):
            parts.append({"type": "text", "text": "<system-reminder>" + self.w.words(*words) + "</system-reminder>"})
        if mode in ("image", "text+image"):
            parts.append({"type": "image_url", "url": f"data:image/png;base64,iVBOR{self.seed}", "id": None})
        extra = (
            {"items": [{"type": "todo_reminder", "reason": "not_used_recently"}]} if self.rng.random() < 0.3 else None
        )
        return self.w.item("DeveloperMessage", {"role": "developer", "parts": parts, "ui_extra": extra})

    def system(self) -> int:
        return self.w.item(
            "SystemMessage", {"role": "system", "parts": [{"type": "text", "text": self.w.words(5, 20)}]}
        )

    def usage(self, *, stop: str) -> dict[str, Any] | None:
        roll = self.rng.random()
        if roll < 0.05:
            return None
        output = self.rng.randint(20, 400)
        cached = self.rng.randint(0, max(0, self.context - 500))
        usage: dict[str, Any] = {
            "input_tokens": self.context - cached,
            "cached_tokens": cached,
            "reasoning_tokens": 0,
            "output_tokens": output,
            "context_size": self.context + output,
            "context_limit": self.usage_limit,
            "max_tokens": 8192,
            "model_name": MODEL,
            "provider": "anthropic",
            "currency": "USD",
        }
        usage["total_tokens"] = usage["input_tokens"] + output
        if roll < 0.15:
            # no context_size: klaude falls back to total_tokens, a computed field (input + output) that ignores the
            # stored value, which this line gets wrong on purpose
            usage["context_size"] = None
            usage["total_tokens"] = usage["input_tokens"] + output + self.rng.randint(1, 5000)
        return usage

    def assistant(self, *, calls: list[tuple[str, dict[str, Any]]] = (), text: bool = True, stop: str = "") -> int:  # type: ignore[assignment]
        parts: list[dict[str, Any]] = []
        if self.rng.random() < 0.4:
            parts.append({"type": "thinking_text", "id": None, "text": self.w.words(5, 60), "model_id": MODEL})
            parts.append(
                {"type": "thinking_signature", "id": None, "signature": "sig", "model_id": MODEL, "format": None}
            )
        if text:
            parts.append({"type": "text", "text": self.w.words(3, 80)})
        for name, args in calls:
            self.calls += 1
            parts.append(
                {
                    "type": "tool_call",
                    "call_id": f"call_{self.seed}_{self.calls}",
                    "id": None,
                    "tool_name": name,
                    "arguments_json": json.dumps(args),
                }
            )
        stop = stop or ("tool_use" if calls else "stop")
        chars = sum(len(str(p.get("text") or p.get("arguments_json") or "")) for p in parts)
        self.context += chars // 4
        return self.w.item(
            "AssistantMessage",
            {
                "role": "assistant",
                "parts": parts,
                "usage": self.usage(stop=stop),
                "stop_reason": stop,
                "response_id": f"r{self.w.minute}",
            },
        )

    def tool_call(self) -> tuple[str, dict[str, Any]]:
        path = self.rng.choice(_PATHS)
        kind = self.rng.randrange(7)
        if kind == 0:
            return "Read", {"file_path": path}
        if kind == 1:
            return "Edit", {"file_path": path, "old": self.w.words(1, 4), "new": self.w.words(1, 4)}
        if kind == 2:
            return "Write", {"file_path": path, "content": self.w.words(5, 60)}
        if kind == 3:
            return "apply_patch", {"patch": f"*** Begin Patch\n*** Update File: {path}\n*** End Patch"}
        if kind == 4:
            return "Bash", {"command": f"grep -rn {self.rng.choice(_WORDS)} src > /dev/null"}
        if kind == 5:
            return "MultiEdit", {"path": path, "edits": [{"old": "a", "new": "b"}]}
        return "Bash", {"command": "pytest -q " + self.w.words(0, 2), "description": "x" * self.rng.randint(0, 2500)}

    def tool_result(self, call: tuple[str, dict[str, Any]], index: int, *, size: int = 0, breaks: bool = False) -> int:
        name, args = call
        output = _big_text(self.rng, size) if size else self.w.words(2, 120)
        if breaks:
            at = self.rng.randrange(len(output) + 1)
            output = output[:at] + self.rng.choice(_BREAKS) + output[at:]
        status = "error" if self.rng.random() < 0.08 else "success"
        data: dict[str, Any] = {
            "role": "tool",
            "call_id": f"call_{self.seed}_{index}",
            "tool_name": name,
            "status": status,
            "output_text": output,
            "parts": [],
            "ui_extra": None,
        }
        if name in ("Edit", "Write") and status == "success" and self.rng.random() < 0.7:
            file_path = args.get("file_path", "x")
            data["ui_extra"] = {
                "type": "diff",
                "files": [
                    {
                        "file_path": file_path,
                        "lines": [{"kind": "add", "new_line_no": 1, "spans": [{"op": "insert", "text": "x"}]}],
                    }
                ],
            }
        elif name == "apply_patch" and self.rng.random() < 0.7:
            data["ui_extra"] = {
                "type": "multi",
                "items": [
                    {"type": "diff", "files": [{"file_path": "src/patched.py", "lines": []}]},
                    {"type": "markdown_doc", "file_path": "docs/plan.md", "content": "# plan"},
                ],
            }
        elif name == "Bash" and self.rng.random() < 0.1:
            data["parts"] = [{"type": "image_url", "url": f"https://img.example/shot-{self.seed}.png", "id": None}]
        self.context += len(output) // 4 + (300 if data["parts"] else 0)
        ascii_only = breaks and self.rng.random() < 0.25  # an escaped separator is an ordinary character
        return self.w.item("ToolResultMessage", data, ascii_only=ascii_only)

    def stream_error(self) -> int:
        error = self.rng.choice(
            (
                "prompt is too long: 210000 tokens > 200000 maximum",
                "APIConnectionError Connection reset by peer",
                "413 (no body)",
            )
        )
        return self.w.item("StreamErrorItem", {"error": error})

    def task_metadata(self) -> int:
        return self.w.item(
            "TaskMetadataItem",
            {
                "main_agent": {
                    "usage": None,
                    "model_name": MODEL,
                    "provider": "anthropic",
                    "task_duration_s": 3.5,
                    "turn_count": 2,
                },
                "sub_agent_task_metadata": [],
            },
        )

    def compaction(self, first_kept: int, *, details: bool = True) -> int:
        self.summaries += 1
        summary = f"## Goal\n{self.w.words(3, 20)}\n\n## Progress\n### Done\n- [x] {self.w.words(2, 8)}"
        if self.rng.random() < 0.3:
            summary = (
                "The conversation history before this point was compacted into the following summary:\n\n\n<summary>"
                + summary
                + "\n\n---\n\n**Task Context (current task):**\n\n## Original Request\n"
                + self.w.words(2, 9)
                + "\n\n</summary>"
            )
        data: dict[str, Any] = {"summary": summary, "first_kept_index": first_kept, "tokens_before": self.context}
        if details:
            data["details"] = {
                "read_files": sorted(self.rng.sample(_PATHS, self.rng.randint(0, 3))),
                "modified_files": sorted(self.rng.sample(_PATHS, self.rng.randint(0, 2))),
            }
        data["kept_items_brief"] = [{"item_type": "User", "count": 1, "preview": "p"}]
        # After a compaction the view is the summary and the kept tail.
        self.context = 1500 + len(summary) // 4 + self.rng.randint(200, 3000)
        return self.w.item("CompactionEntry", data)

    # -- turns

    def turn(
        self, *, tools: int, size: int = 0, breaks: float = 0.0, developer: float = 0.2, system: float = 0.0
    ) -> None:
        """A prompt then ``tools`` tool rounds and a closing answer."""
        self.user()
        if self.rng.random() < developer:
            self.developer(self.rng.choice(("text", "empty", "image", "text+image")))
        for _ in range(tools):
            n = 1 if self.rng.random() < 0.8 else 2
            calls = [self.tool_call() for _ in range(n)]
            first = self.calls + 1
            self.assistant(calls=calls, text=self.rng.random() < 0.5)
            for offset, call in enumerate(calls):
                big = size if self.rng.random() < 0.3 else 0
                self.tool_result(call, first + offset, size=big, breaks=self.rng.random() < breaks)
            if self.rng.random() < developer:
                self.developer(self.rng.choice(("text", "empty", "image", "text+image")))
            if self.rng.random() < system:
                self.system()
        self.assistant()
        if self.rng.random() < 0.5:
            self.task_metadata()

    def kept_index(self, lookback: int) -> int:
        """An index some items back, preferring a User or Assistant message (where klaude's own cuts land)."""
        types = self.w.types
        start = max(0, len(types) - lookback)
        for index in range(start, len(types)):
            if types[index] in ("UserMessage", "AssistantMessage"):
                return index
        return start

    def build(self) -> Session:
        rng, s = self.rng, self.scenario
        if s == "plain":
            for _ in range(rng.randint(2, 6)):
                self.turn(tools=rng.randint(0, 5))
        elif s == "large-tool-output":
            for _ in range(rng.randint(2, 4)):
                self.turn(tools=rng.randint(2, 6), size=rng.choice((3000, 6000, 20000)))
        elif s == "unicode-line-breaks":
            for _ in range(rng.randint(2, 4)):
                self.turn(tools=rng.randint(2, 6), size=rng.choice((0, 5000)), breaks=0.4)
            self.user("a prompt with a raw " + rng.choice(_BREAKS) + " inside")
            self.assistant()
        elif s == "developer-messages":
            for _ in range(rng.randint(2, 5)):
                self.turn(tools=rng.randint(1, 5), size=rng.choice((0, 4000)), developer=0.7)
            if rng.random() < 0.5:
                self.system()
        elif s == "images":
            for _ in range(rng.randint(2, 4)):
                self.user("", images=rng.randint(1, 3))
                self.assistant()
                self.turn(tools=rng.randint(1, 4), size=rng.choice((0, 3000)))
                self.user(images=rng.randint(0, 2))
                self.assistant(calls=[("Read", {"file_path": "shot.png"})])
                self.tool_result(("Read", {"file_path": "shot.png"}), self.calls)
                self.assistant()
        elif s == "previous-summary-nothing-new":
            self.turn(tools=rng.randint(1, 4))
            marker = rng.choice(("task", "system", "error"))
            if marker == "task":
                first_kept = self.task_metadata()
            elif marker == "system":
                first_kept = self.system()
            else:
                first_kept = self.stream_error()
            self.compaction(first_kept)
            limit = self.config_limit or 0
            keep = 20000 if not limit else min(20000, max(4096, int(limit * 0.35)))
            # one prompt larger than klaude's keep_recent_tokens, then a short reply: the cut lands on the prompt
            self.user("please read this:\n" + _big_text(rng, keep * 4 + 400))
            self.assistant(text=True)
        elif s == "sub-agent":
            for _ in range(rng.randint(2, 5)):
                self.turn(tools=rng.randint(1, 6), size=rng.choice((0, 4000, 12000)))
        elif s == "several-compactions":
            for _ in range(rng.randint(2, 4)):
                self.turn(tools=rng.randint(1, 5), size=rng.choice((0, 3000, 8000)))
                if rng.random() < 0.7:
                    self.compaction(self.kept_index(rng.randint(2, 12)), details=rng.random() < 0.8)
                    if rng.random() < 0.2:
                        self.compaction(self.kept_index(2))  # two in a row: the second keeps from later
            self.turn(tools=rng.randint(0, 3))
        elif s == "file-quirks":
            self.turn(tools=rng.randint(1, 3))
            self.w.raw(b"\n")
            self.w.raw(b'{"type": "FutureItem", "data": {"x": 1}}\n')
            self.w.raw(b"this is not json\n")
            self.w.raw(b'["a", "list"]\n')
            # no "data": klaude's codec reads {} (session/codec.py), which a TaskMetadataItem accepts
            self.w.raw(b'{"type": "TaskMetadataItem"}\n', items=1)
            self.w.types.append("TaskMetadataItem")
            self.w.joined(
                ("UserMessage", {"role": "user", "parts": [{"type": "text", "text": "first of two"}]}),
                ("DeveloperMessage", {"role": "developer", "parts": []}),
                rng.choice(("\u2028", "\u0085", "\x0c", "\x1e", "\r")),
            )
            self.assistant()
            self.w.trailing_break(
                "UserMessage",
                {"role": "user", "parts": [{"type": "text", "text": "then a break"}]},
                rng.choice(("\x0c", "\u2029", "\x0b")),
            )
            self.w.item("UserMessage", {"role": "user", "parts": [{"type": "text", "text": "crlf line"}]}, quirk="crlf")
            self.assistant()
            self.w.item(
                "UserMessage", {"role": "user", "parts": [{"type": "text", "text": "lone cr"}]}, quirk="lone-cr"
            )
            self.turn(tools=rng.randint(1, 4), size=rng.choice((0, 6000)))
            if rng.random() < 0.5:
                self.assistant(stop="aborted")
                self.stream_error()
            self.turn(tools=rng.randint(0, 3), size=rng.choice((0, 6000)))
        elif s == "split-task":
            self.turn(tools=rng.randint(0, 2))
            self.turn(tools=rng.randint(6, 14), size=rng.choice((2000, 5000)), developer=0.3, system=0.15)
        elif s == "many-turns":
            for _ in range(rng.randint(6, 14)):
                if rng.random() < 0.5:
                    self.user(self.w.words(200, 900))  # a long prompt answered without tools
                    self.assistant()
                else:
                    self.turn(tools=rng.randint(0, 2), size=rng.choice((0, 2500)), system=0.1)
        elif s == "awkward-boundaries":
            # Reminders long enough that klaude's cut often lands on one (then moves to the next User or
            # ToolResult message, or back when none follows), and earlier entries keeping from a tool result.
            for _ in range(rng.randint(3, 6)):
                self.user()
                for _ in range(rng.randint(1, 4)):
                    call = self.tool_call()
                    self.assistant(calls=[call], text=rng.random() < 0.5)
                    self.tool_result(call, self.calls, size=rng.choice((0, 2000)))
                    for _ in range(rng.randint(0, 2)):
                        self.developer(rng.choice(("text", "text+image", "empty")), words=(100, 700))
                self.assistant()
                if rng.random() < 0.3:
                    tool_results = [i for i, t in enumerate(self.w.types) if t == "ToolResultMessage"]
                    self.compaction(rng.choice(tool_results[-4:]))
            for _ in range(rng.randint(0, 3)):
                self.developer("text", words=(100, 900))
        # a few mixed in everywhere
        if s not in ("previous-summary-nothing-new",) and rng.random() < 0.25:
            self.compaction(self.kept_index(rng.randint(2, 10)))
            self.turn(tools=rng.randint(0, 4), size=rng.choice((0, 5000)))
        events = b"".join(self.w.lines)
        return Session(
            seed=self.seed,
            scenario=s,
            config_limit=self.config_limit,
            events=events,
            meta=self._meta(),
            items_per_line=self.w.items_per_line,
            item_types=self.w.types,
        )

    def _meta(self) -> dict[str, Any] | None:
        if self.rng.random() < 0.05:
            return None  # no meta.json: klaude loads the history with default metadata
        tracker: dict[str, Any] = {
            path: {"mtime": 1760000000.0 + n, "content_sha256": None, "is_memory": False}
            for n, path in enumerate(self.rng.sample(_PATHS, self.rng.randint(0, 3)))
        }
        if self.rng.random() < 0.15:
            tracker["bad/entry.txt"] = {"mtime": "not a time"}  # klaude skips an entry that does not validate
        if self.rng.random() < 0.1:
            tracker["bad/value.txt"] = "not an object"
        sub_agent = None
        if self.scenario == "sub-agent" or self.rng.random() < 0.05:
            sub_agent = {"sub_agent_type": "Task", "sub_agent_desc": "explore", "sub_agent_prompt": "find it"}
        return {
            "id": f"s{self.seed:04d}",
            "work_dir": "/home/dev/project",
            "sub_agent_state": sub_agent,
            "file_tracker": tracker,
            "todos": [],
            "user_messages": [],
            "created_at": 1760000000.0,
            "updated_at": 1760000100.0,
            "messages_count": len(self.w.types),
            "model_name": MODEL,
            "model_config_name": "sonnet",
            "model_thinking": None,
        }


def generate(seed: int) -> Session:
    return _Builder(seed).build()


def all_sessions() -> list[Session]:
    return [generate(seed) for seed in range(SESSION_COUNT)]
