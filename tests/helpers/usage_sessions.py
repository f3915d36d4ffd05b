"""Small Claude Code sessions for the Usage tests: one call per timestamp, and a session whose subagent answered
only inline, in its parent's progress records."""

from __future__ import annotations

from pathlib import Path

from sessions_app import services
from tests.helpers.claude_code_lines import cc_line, write


def usage_session(tmp_path: Path, session_id: str, *stamps: str, model: str = "claude-opus-4-5-20251101") -> Path:
    """A Claude Code session of one call per timestamp (10 input, 1000 cache write, 5 output each)."""
    lines = []
    parent = None
    for n, ts in enumerate(stamps, 1):
        lines.append(_user(f"{session_id}-u{n}", parent, session_id, ts))
        lines.append(_reply(f"{session_id}-a{n}", f"{session_id}-u{n}", session_id, f"msg_{session_id}_{n}", ts, model))
        parent = f"{session_id}-a{n}"
    return write(tmp_path, f"{session_id}.jsonl", *lines)


def _user(uuid: str, parent: str | None, session_id: str, ts: str, cwd: str = "/home/me/proj") -> str:
    return cc_line(
        type="user",
        uuid=uuid,
        parentUuid=parent,
        sessionId=session_id,
        version="2.1.20",
        cwd=cwd,
        timestamp=ts,
        message={"role": "user", "content": "go on"},
    )


def _reply(uuid: str, parent: str, session_id: str, msg_id: str, ts: str, model: str) -> str:
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 1000, "cache_read_input_tokens": 0, "output_tokens": 5}
    return cc_line(
        type="assistant",
        uuid=uuid,
        parentUuid=parent,
        sessionId=session_id,
        version="2.1.20",
        timestamp=ts,
        requestId="req_" + msg_id,
        message={"id": msg_id, "type": "message", "role": "assistant", "model": model, "usage": usage,
                 "content": [{"type": "text", "text": "done"}]},
    )  # fmt: skip


def _progress(uuid: str, parent: str, session_id: str, ts: str, output: int) -> str:
    """An agent_progress line carrying an inline subagent's response (docs/formats/claude-code.md §6.4)."""
    usage = {"input_tokens": 7, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0}
    usage["output_tokens"] = output
    response = {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_inline_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "found it"}],
        "usage": usage,
    }
    return cc_line(
        type="progress", uuid=uuid, parentUuid=parent, sessionId=session_id, version="2.1.32", timestamp=ts,
        data={"type": "agent_progress", "agentId": "a1b2c3", "prompt": "look",
              "message": {"type": "assistant", "timestamp": ts, "message": response, "requestId": "req_inline_1"}},
    )  # fmt: skip


def inline_session(tmp_path: Path, session_id: str, ts: str) -> Path:
    return write(
        tmp_path,
        f"{session_id}.jsonl",
        _user(f"{session_id}-u1", None, session_id, ts),
        _progress(f"{session_id}-p1", f"{session_id}-u1", session_id, ts, output=12),
        _progress(f"{session_id}-p2", f"{session_id}-p1", session_id, ts, output=40),
        _reply(f"{session_id}-a1", f"{session_id}-p2", session_id, f"msg_{session_id}", ts, "claude-opus-4-5-20251101"),
    )


def import_usage(folder: Path, session_id: str, *stamps: str, model: str = "claude-opus-4-5-20251101") -> None:
    """Write and import ``usage_session``."""
    report = services.import_paths(paths=[usage_session(folder, session_id, *stamps, model=model)])
    assert report.rejected == []


def import_usage_inline(folder: Path, session_id: str, ts: str) -> None:
    """Write and import ``inline_session``."""
    report = services.import_paths(paths=[inline_session(folder, session_id, ts)])
    assert report.rejected == []
