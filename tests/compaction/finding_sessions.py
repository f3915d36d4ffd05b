"""Sessions shaped like the three the issue 36 reporter diagnosed, written as the agents write them and read by
the real parsers: a Claude Code session whose Read results fill a third of its peak with no single one oversized,
and a Codex session with two compactions and one 117,000-token command output."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from compaction.formats.claude_code import ClaudeCodeParser
from compaction.formats.codex import CodexParser
from compaction.transcript import ContextEvent, Message, SessionInfo

Parsed = tuple[list[Message], list[ContextEvent], SessionInfo]


def _at(second: int) -> str:
    return f"2026-01-01T{10 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}.000Z"


def code_text(chars: int, *, seed: str) -> str:
    """Source-like text of about ``chars`` characters (about 4 characters a token, as real code)."""
    lines = []
    size = 0
    n = 0
    while size < chars:
        line = f"{n:5d}  def {seed}_{n}(value):  return compute(value, {n}) + offset_{n % 7}\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines)[:chars]


# ----------------------------------------------------------------------------------------------- Claude Code

READ_FILES = 8  # Read results of about 7,900 tokens each: none alone is oversized (5% of a 200k window)
READ_CHARS = 31_400


def _cc(**fields: Any) -> bytes:
    base = {"sessionId": "s-read", "version": "2.1.30", "cwd": "/home/me/proj", "isSidechain": False}
    return (json.dumps({**base, **fields}) + "\n").encode()


@cache
def claude_code_read_heavy() -> Parsed:
    """8 Read results of 31,400 characters and 50 small Bash results in one turn, no compaction, peak ≈ 160k."""
    lines: list[bytes] = []
    parent = "u0"
    lines.append(
        _cc(
            type="user",
            uuid="u0",
            parentUuid=None,
            timestamp=_at(0),
            message={"role": "user", "content": "Refactor the billing module"},
        )
    )
    context = 20_000
    tools: list[tuple[str, dict[str, Any], str]] = []
    for i in range(READ_FILES):
        tools.append(("Read", {"file_path": f"/home/me/proj/billing/part_{i}.py"}, code_text(READ_CHARS, seed=f"f{i}")))
        for j in range(6):
            tools.append(
                ("Bash", {"command": f"pytest tests/test_part_{i}_{j}.py -q"}, code_text(4_000, seed=f"t{i}{j}"))
            )
    tools.append(("Read", {"file_path": "/home/me/proj/billing/part_0.py"}, code_text(READ_CHARS, seed="f0")))
    for n, (name, tool_input, text) in enumerate(tools, start=1):
        call_id = f"toolu_{n}"
        previous = context
        written = previous - 10 if n == 1 else 400  # the first call writes the whole prompt
        lines.append(
            _cc(
                type="assistant",
                uuid=f"a{n}",
                parentUuid=parent,
                timestamp=_at(n * 20),
                requestId=f"req_{n}",
                message={
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-opus-4-5-20251101",
                    "content": [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}],
                    "usage": {
                        "input_tokens": 10,
                        "cache_creation_input_tokens": written,
                        "cache_read_input_tokens": previous - 10 - written,
                        "output_tokens": 80,
                        "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
                    },
                },
            )
        )
        lines.append(
            _cc(
                type="user",
                uuid=f"r{n}",
                parentUuid=f"a{n}",
                timestamp=_at(n * 20 + 5),
                message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}]},
            )
        )
        parent = f"r{n}"
        context += len(text) // 4 + 400
    parser = ClaudeCodeParser()
    records = list(parser.parse(lines))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    return messages, [r for r in records if isinstance(r, ContextEvent)], parser.info


# ----------------------------------------------------------------------------------------------- Codex

BIG_OUTPUT_CHARS = 468_000  # 117,000 tokens at Codex's 4 bytes a token
BIG_COMMAND = "cat build/full-build.log"


@cache
def codex_two_compactions_one_huge_output() -> Parsed:
    lines: list[dict[str, Any]] = [
        {
            "timestamp": _at(0),
            "type": "session_meta",
            "payload": {"id": "c-1", "cli_version": "0.57.0", "cwd": "/w", "originator": "codex_cli_rs"},
        },
        {"timestamp": _at(0), "type": "turn_context", "payload": {"model": "gpt-5-codex", "cwd": "/w"}},
        {
            "timestamp": _at(0),
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix the build"}],
            },
        },
    ]
    state = {"n": 1, "total": 0, "context": 12_000}

    def call(command: str, chars: int) -> None:
        n, context = state["n"], state["context"]
        args = json.dumps({"cmd": command})
        lines.append(
            {
                "timestamp": _at(n * 15),
                "type": "response_item",
                "payload": {"type": "function_call", "name": "exec_command", "arguments": args, "call_id": f"c{n}"},
            }
        )
        state["total"] += context + 200
        last = {
            "input_tokens": context,
            "cached_input_tokens": int(context * 0.9),
            "output_tokens": 200,
            "reasoning_output_tokens": 0,
            "total_tokens": context + 200,
        }
        info = {
            "total_token_usage": {**last, "total_tokens": state["total"]},
            "last_token_usage": last,
            "model_context_window": 258_400,
        }
        lines.append({"timestamp": _at(n * 15), "type": "event_msg", "payload": {"type": "token_count", "info": info}})
        lines.append(
            {
                "timestamp": _at(n * 15 + 5),
                "type": "response_item",
                "payload": {
                    "type": "function_call_output",
                    "call_id": f"c{n}",
                    "output": code_text(chars, seed=f"o{n}"),
                },
            }
        )
        state["n"] = n + 1
        state["context"] = context + chars // 4 + 300

    def compact() -> None:
        n = state["n"]
        lines.append(
            {
                "timestamp": _at(n * 15),
                "type": "compacted",
                "payload": {"message": "summary of the work so far", "replacement_history": []},
            }
        )
        lines.append({"timestamp": _at(n * 15), "type": "event_msg", "payload": {"type": "context_compacted"}})
        state["context"] = 15_000

    for i in range(20):
        call(f"rg -n TODO src/part_{i}", 8_000)
    call(BIG_COMMAND, BIG_OUTPUT_CHARS)
    for i in range(12):
        call(f"sed -n 1,200p src/part_{i}.rs", 8_000)
    compact()
    for i in range(40):
        call(f"cargo test part_{i}", 18_000)
    compact()
    for i in range(10):
        call(f"ls src/{i}", 2_000)
    parser = CodexParser()
    records = list(parser.parse([(json.dumps(line) + "\n").encode() for line in lines]))
    return (
        [r for r in records if isinstance(r, Message)],
        [r for r in records if isinstance(r, ContextEvent)],
        parser.info,
    )
