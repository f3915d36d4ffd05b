"""Hypothesis strategies of valid session files, one per agent format: a list of complete JSONL lines (bytes, each
ending in a newline) whose first line is a record the format is recognised by (so a file holding only it is a
session). Besides the agent's ordinary records they hold what an import must get right across appends: a response
split over several lines, usage that arrives before or after the items it counts, compactions, prunes, records of a
type the reader does not know, and a complete line that is not JSON (a line error).

``record_lines(fmt)`` is the strategy of a format's files, by its stored name (``KINDS`` and ``BUILDERS`` hold one entry
per format); a test reads the registry's formats and looks each up here, so a registered format without a generator
fails that test instead of being skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from hypothesis import strategies as st

from compaction.formats import claude_code, codex, khaelor, klaude_code
from tests.helpers.claude_code_lines import assistant, cc_line, tool_call, tool_result, user

Lines = list[bytes]
BAD_LINE = b'{"type": "user", "message": \n'  # complete (it has its newline) and not JSON: one line error
SIZES = st.integers(min_value=1, max_value=60_000)


def _steps(kinds: list[str], *, max_size: int = 14) -> st.SearchStrategy[list[tuple[str, int]]]:
    return st.lists(st.tuples(st.sampled_from(kinds), SIZES), min_size=0, max_size=max_size)


def _encode(records: list[dict[str, Any] | bytes]) -> Lines:
    return [r if isinstance(r, bytes) else (json.dumps(r) + "\n").encode() for r in records]


# ----------------------------------------------------------------------------------------------- Claude Code


def _claude_code(steps: list[tuple[str, int]]) -> Lines:
    lines = [user("u0", None, "first question")]
    parent, reply, context = "u0", "", 1000
    for n, (kind, size) in enumerate(steps, start=1):
        context += size
        if kind == "prompt":
            lines.append(user(f"u{n}", parent, f"question {n}"))
            parent = f"u{n}"
        elif kind == "reply" or (kind == "split" and not reply):
            reply = f"msg_{n}"
            lines.append(assistant(f"a{n}", parent, reply, f"answer {n}", ctx=context, out=size % 50))
            parent = f"a{n}"
        elif kind == "split":  # one more line of the last response: same message id, a larger output count
            lines.append(assistant(f"a{n}", parent, reply, f"more of it {n}", ctx=context, out=50 + size % 500))
            parent = f"a{n}"
        elif kind == "tool":
            lines.append(tool_call(f"a{n}", parent, f"msg_{n}", f"toolu_{n}", ctx=context))
            lines.append(tool_result(f"r{n}", f"a{n}", f"toolu_{n}", f"result {n}\n" * (size % 5)))
            parent, reply = f"r{n}", ""
        elif kind == "compact":
            boundary = {"trigger": "auto", "preTokens": context}
            lines.append(
                cc_line(
                    type="system",
                    subtype="compact_boundary",
                    uuid=f"cb{n}",
                    parentUuid=None,
                    logicalParentUuid=parent,
                    sessionId="s-1",
                    timestamp="2026-01-01T00:00:04.000Z",
                    compactMetadata=boundary,
                )
            )
            lines.append(
                cc_line(
                    type="user",
                    uuid=f"s{n}",
                    parentUuid=f"cb{n}",
                    sessionId="s-1",
                    isCompactSummary=True,
                    timestamp="2026-01-01T00:00:05.000Z",
                    message={"role": "user", "content": f"This session is being continued. Summary {n}."},
                )
            )
            parent, reply, context = f"s{n}", "", 1000
        elif kind == "unknown":
            lines.append(cc_line(type="something-new", uuid=f"x{n}", value=size))
        else:
            lines.append(BAD_LINE.decode())
    return [line.encode() for line in lines]


# ----------------------------------------------------------------------------------------------- Codex


def _codex_item(payload: dict[str, Any], n: int) -> dict[str, Any]:
    return {"timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z", "type": "response_item", "payload": payload}


def _token_count(total: int, last_input: int, output: int, n: int) -> dict[str, Any]:
    last = {"input_tokens": last_input, "cached_input_tokens": last_input // 2, "output_tokens": output}
    info = {
        "total_token_usage": {**last, "total_tokens": total},
        "last_token_usage": {**last, "total_tokens": last_input + output},
        "model_context_window": 258400,
    }
    return {
        "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.500Z",
        "type": "event_msg",
        "payload": {"type": "token_count", "info": info},
    }


def _codex(layout_first_usage: bool, steps: list[tuple[str, int]]) -> Lines:
    """``layout_first_usage``: the token count comes before the response items it counts (0.34-0.57), else after
    them (0.92 on), when the reader holds the items until it arrives."""
    version = "0.50.0" if layout_first_usage else "0.92.0"
    records: list[dict[str, Any] | bytes] = [
        {
            "timestamp": "2026-01-01T00:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": "c-1", "cli_version": version, "cwd": "/w"},
        }
    ]
    total, context = 0, 1000
    for n, (kind, size) in enumerate(steps, start=1):
        context += size
        if kind == "prompt":
            text = {"type": "input_text", "text": f"question {n}"}
            records.append(_codex_item({"type": "message", "role": "user", "content": [text]}, n))
        elif kind in ("reply", "tool"):
            if kind == "reply":
                text = {"type": "output_text", "text": f"answer {n}"}
                response = [_codex_item({"type": "message", "role": "assistant", "content": [text]}, n)]
            else:
                reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"plan {n}"}]}
                arguments = json.dumps({"command": ["ls", str(n)]})
                call = {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": f"c{n}"}
                response = [_codex_item(reasoning, n), _codex_item(call, n)]
            total += context + size % 90
            usage = _token_count(total, context, size % 90 + 1, n)
            records.extend([usage, *response] if layout_first_usage else [*response, usage])
            if kind == "tool":
                output = {"type": "function_call_output", "call_id": f"c{n}", "output": f"file{n}.py"}
                records.append(_codex_item(output, n))
        elif kind == "repeat":  # a token count written again unchanged: not a call
            if total:
                records.append(_token_count(total, context, 1, n))
        elif kind == "compact":
            payload = {"message": f"summary {n}", "replacement_history": []}
            records.append({"timestamp": "2026-01-01T01:00:00.000Z", "type": "compacted", "payload": payload})
            records.append({"type": "event_msg", "payload": {"type": "context_compacted"}})
            context = 1000
        elif kind == "mirror":
            records.append({"type": "event_msg", "payload": {"type": "user_message", "message": f"q {n}"}})
        elif kind == "unknown":
            records.append({"type": "world_state", "payload": {"x": size}})
        else:
            records.append(BAD_LINE)
    return _encode(records)


# ----------------------------------------------------------------------------------------------- KHAELOR


def _khaelor(steps: list[tuple[str, int]]) -> Lines:
    def event(seq: int, type_: str, **payload: Any) -> dict[str, Any]:
        return {
            "seq": seq,
            "type": type_,
            "ts": f"2026-10-02T09:{seq // 60 % 60:02d}:{seq % 60:02d}.000Z",
            "sessionId": "k-1",
            "payload": payload,
        }

    records: list[dict[str, Any] | bytes] = [
        event(1, khaelor.SESSION_STARTED, model="claude-sonnet-4-5", contextWindow=200_000, cwd="/w")
    ]
    seq, context = 1, 1000
    for n, (kind, size) in enumerate(steps, start=1):
        seq += 1
        context += size
        if kind == "prompt":
            records.append(event(seq, khaelor.USER_MESSAGE, text=f"question {n}"))
        elif kind == "reply":
            records.append(event(seq, khaelor.MODEL_THINKING_BLOCK, thinking=f"hmm {n}"))
            seq += 1
            records.append(event(seq, khaelor.MODEL_TEXT_BLOCK, text=f"answer {n}"))
        elif kind == "tool":
            records.append(event(seq, khaelor.TOOL_REQUESTED, toolUseId=f"t{n}", name="bash", input={"command": "ls"}))
            seq += 1
            result = khaelor.TOOL_FAILED if size % 3 == 0 else khaelor.TOOL_COMPLETED
            records.append(event(seq, result, toolUseId=f"t{n}", modelText=f"out {n}"))
        elif kind == "usage":
            usage = {
                "input_tokens": 10,
                "cache_creation_input_tokens": context - 10,
                "cache_read_input_tokens": 0,
                "output_tokens": size % 90,
            }
            records.append(
                event(seq, khaelor.MODEL_USAGE, requestId=f"req_{n}", model="claude-sonnet-4-5", usage=usage)
            )
        elif kind == "compact":
            trigger = "reactive-overflow" if size % 2 else "threshold"
            records.append(
                event(
                    seq, khaelor.CONTEXT_COMPACTED, trigger=trigger, tokensBefore=context, checkpointYaml=f"goal: {n}"
                )
            )
            context = 1000
        elif kind == "prune":
            records.append(
                event(
                    seq,
                    khaelor.CONTEXT_PRUNED,
                    toolUseIds=[f"t{n}"],
                    placeholder="[gone]",
                    tokensReclaimedEstimate=size,
                )
            )
        elif kind == "unknown":
            records.append(event(seq, "telemetry.sampled", value=size))
        else:
            records.append(BAD_LINE)
    return _encode(records)


# ----------------------------------------------------------------------------------------------- klaude-code


def _klaude(item_type: str, **data: Any) -> dict[str, Any]:
    data.setdefault("created_at", "2025-12-08T09:14:43.562000")
    return {"type": item_type, "data": data}


def _klaude_user(text: str) -> dict[str, Any]:
    return _klaude("UserMessage", id=None, response_id=None, role="user", parts=[{"type": "text", "text": text}])


def _klaude_code(steps: list[tuple[str, int]]) -> Lines:
    records: list[dict[str, Any] | bytes] = [_klaude_user("first question")]
    context, items = 1000, 1
    for n, (kind, size) in enumerate(steps, start=1):
        context += size
        usage = {
            "input_tokens": context - 10,
            "cached_tokens": context // 2,
            "output_tokens": 10,
            "context_size": context,
            "context_limit": 200_000,
            "max_tokens": None,
            "total_tokens": context,
            "model_name": "claude-opus-4-5-20251101",
        }
        if kind == "prompt":
            records.append(_klaude_user(f"question {n}"))
        elif kind == "reply":
            parts = [{"type": "text", "text": f"answer {n}"}]
            records.append(
                _klaude(
                    "AssistantMessage",
                    role="assistant",
                    response_id=f"r{n}",
                    parts=parts,
                    usage=usage,
                    stop_reason="stop",
                )
            )
        elif kind == "tool":
            call = {"type": "tool_call", "call_id": f"c{n}", "id": None, "tool_name": "Read", "arguments_json": "{}"}
            records.append(
                _klaude(
                    "AssistantMessage",
                    role="assistant",
                    response_id=f"r{n}",
                    parts=[call],
                    usage=usage,
                    stop_reason="tool_use",
                )
            )
            records.append(
                _klaude(
                    "ToolResultMessage",
                    role="tool",
                    call_id=f"c{n}",
                    tool_name="Read",
                    status="success",
                    output_text=f"out {n}",
                    parts=[],
                    ui_extra=None,
                )
            )
        elif kind == "developer":
            parts = [{"type": "text", "text": "<system-reminder>r</system-reminder>"}]
            records.append(_klaude("DeveloperMessage", role="developer", parts=parts, ui_extra=None))
        elif kind == "compact":
            records.append(
                _klaude(
                    "CompactionEntry",
                    summary=f"## Goal\n- {n}",
                    first_kept_index=max(items - 1, 0),
                    tokens_before=context,
                    details={"read_files": [], "modified_files": []},
                    kept_items_brief=[],
                )
            )
            context = 1000
        elif kind == "overflow":
            records.append(_klaude("StreamErrorItem", error="prompt is too long: 229651 tokens > 200000 maximum"))
        elif kind == "unknown":
            records.append(_klaude("HologramItem", value=size))
        else:
            records.append(BAD_LINE)
        items += 1
    return _encode(records)


Step = tuple[str, int]  # a kind of record (or of a few records) the builder writes, and a number that sizes it
# Each format's kinds of steps (a kind listed twice is drawn more often) and what makes lines of them.
KINDS: dict[str, list[str]] = {
    claude_code.FORMAT: ["prompt", "reply", "reply", "split", "tool", "compact", "unknown", "bad"],
    codex.FORMAT: ["prompt", "reply", "tool", "tool", "repeat", "compact", "mirror", "unknown", "bad"],
    khaelor.FORMAT: ["prompt", "reply", "tool", "usage", "usage", "compact", "prune", "unknown", "bad"],
    klaude_code.FORMAT: ["prompt", "reply", "tool", "developer", "compact", "overflow", "unknown", "bad"],
}
BUILDERS: dict[str, list[Callable[[list[Step]], Lines]]] = {
    claude_code.FORMAT: [_claude_code],
    # The layout where the reader holds a response's items until their token count comes first: the harder one.
    codex.FORMAT: [partial(_codex, False), partial(_codex, True)],
    khaelor.FORMAT: [_khaelor],
    klaude_code.FORMAT: [_klaude_code],
}


def record_lines(fmt: str) -> st.SearchStrategy[Lines]:
    """A session file of format ``fmt``, as its lines."""
    return st.one_of(*(_steps(KINDS[fmt]).map(build) for build in BUILDERS[fmt]))


def every_kind_once(fmt: str) -> Lines:
    """A session file of format ``fmt`` holding each kind of step once (in the builder's first layout)."""
    return BUILDERS[fmt][0]([(kind, 1000 + 37 * n) for n, kind in enumerate(KINDS[fmt])])
