"""Hand-written Claude Code transcripts: one JSONL line per record, written to a test's folder
(``long_tool_session`` also imports its file)."""

from __future__ import annotations

import json
from pathlib import Path

from sessions_app import services


def cc_line(**fields) -> str:
    return json.dumps(fields) + "\n"


def user(uuid: str, parent: str | None, text: str, ts: str = "2026-01-01T00:00:00.000Z") -> str:
    return cc_line(
        type="user",
        uuid=uuid,
        parentUuid=parent,
        sessionId="s-1",
        version="2.1.20",
        cwd="/home/me/proj",
        timestamp=ts,
        message={"role": "user", "content": text},
    )


def assistant(uuid: str, parent: str, msg_id: str, text: str, *, ctx: int, out: int = 5) -> str:
    return cc_line(
        type="assistant",
        uuid=uuid,
        parentUuid=parent,
        sessionId="s-1",
        version="2.1.20",
        timestamp="2026-01-01T00:00:01.000Z",
        requestId="req_" + msg_id,
        message={
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-5-20251101",
            "content": [{"type": "text", "text": text}],
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": ctx - 10,
                "cache_read_input_tokens": 0,
                "output_tokens": out,
            },
        },
    )


def subagent_prompt(text: str, *, agent_id: str = "abc1234", session_id: str = "s-1") -> str:
    """The first line of a 2.1.x subagent file: a sidechain root carrying the parent's session id."""
    return cc_line(
        type="user",
        uuid="su1",
        parentUuid=None,
        isSidechain=True,
        agentId=agent_id,
        sessionId=session_id,
        message={"role": "user", "content": text},
    )


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


def small_session(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "s-1.jsonl",
        user("u1", None, "hello"),
        assistant("a1", "u1", "msg_1", "hi", ctx=1000),
        user("u2", "a1", "more"),
        assistant("a2", "u2", "msg_2", "sure", ctx=1500),
    )


SESSION_ID = "s-1"


def compact_boundary(uuid: str, *, trigger: str = "auto", pre_tokens: int = 900, session_id: str = "s-1") -> str:
    """Claude Code's ``compact_boundary`` record (a compaction's marker), with no parent."""
    return cc_line(
        type="system",
        subtype="compact_boundary",
        uuid=uuid,
        parentUuid=None,
        sessionId=session_id,
        content="Conversation compacted",
        compactMetadata={"trigger": trigger, "preTokens": pre_tokens},
    )


def tool_call(
    uuid: str, parent: str, msg_id: str, tool_id: str, *, ctx: int, name: str = "Read", tool_input: dict | None = None
) -> str:
    tool_input = {"file_path": "/src/app.py"} if tool_input is None else tool_input
    return cc_line(
        type="assistant",
        uuid=uuid,
        parentUuid=parent,
        sessionId=SESSION_ID,
        version="2.1.20",
        timestamp="2026-01-01T00:00:02.000Z",
        message={
            "id": msg_id,
            "role": "assistant",
            "model": "claude-opus-4-5-20251101",
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
            "usage": {
                "input_tokens": 10,
                "cache_creation_input_tokens": ctx - 10,
                "cache_read_input_tokens": 0,
                "output_tokens": 7,
            },
        },
    )


def tool_result(uuid: str, parent: str, tool_id: str, text: str) -> str:
    return cc_line(
        type="user",
        uuid=uuid,
        parentUuid=parent,
        sessionId=SESSION_ID,
        version="2.1.20",
        timestamp="2026-01-01T00:00:03.000Z",
        message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": text}]},
    )


def cc_session(tmp_path: Path, name: str = "s-1.jsonl", *, prompt: str = "please fix the bug in app.py") -> Path:
    """Positions: 0 u1, 1 a1, 2 a2 (tool call), 3 r1 (its result), 4 a3, 5 u2, 6 a4."""
    return write(
        tmp_path,
        name,
        user("u1", None, prompt),
        assistant("a1", "u1", "msg_1", "Let me look at the file first.", ctx=1000),
        tool_call("a2", "a1", "msg_2", "toolu_1", ctx=2000),
        tool_result("r1", "a2", "toolu_1", "def main():\n    return 1 / 0  # the bug\n"),
        assistant("a3", "r1", "msg_3", "Fixed the division by zero in app.py.", ctx=3000),
        user("u2", "a3", "now add tests"),
        assistant("a4", "u2", "msg_4", "Adding tests in tests/test_app.py.", ctx=4000),
    )


def long_tool_session(tmp_path, *, result_text: str = "R" * 5000, n: int = 1):
    lines = [user("u0", None, "start")]
    for i in range(n):
        lines.append(
            cc_line(
                type="assistant",
                uuid=f"a{i}",
                parentUuid="u0",
                sessionId="s-1",
                timestamp="2026-01-01T00:00:01.000Z",
                message={
                    "id": f"msg_{i}",
                    "role": "assistant",
                    "model": "claude-opus-4-5-20251101",
                    "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"file_path": "/x"}}],
                    "usage": {
                        "input_tokens": 5,
                        "cache_creation_input_tokens": 100 + i,
                        "cache_read_input_tokens": 0,
                        "output_tokens": 3,
                    },
                },
            )
        )
        lines.append(
            cc_line(
                type="user",
                uuid=f"r{i}",
                parentUuid=f"a{i}",
                sessionId="s-1",
                message={
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": result_text}],
                },
            )
        )
    path = write(tmp_path, f"tools-{n}.jsonl", *lines)
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return outcome.session
