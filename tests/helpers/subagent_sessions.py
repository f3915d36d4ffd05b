"""A small Claude Code session with every kind of subagent (docs/formats/claude-code.md, "Subagents"): one known
only from the agent_progress copies its parent carries (inline), one with its own ``subagents/agent-<id>.jsonl``
(file), and the compaction request's own transcript (``agent-acompact-<hex>.jsonl``) at a manual compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.claude_code_lines import cc_line, write

SESSION_ID = "5ub5e551-0000-4000-8000-000000000001"
MODEL = "claude-sonnet-4-5-20250929"
INLINE, FILE, COMPACT = "a1n11e0", "af11e00", "acompact-c0ffee"
INLINE_REPLY = "The inline helper found three callers."
FILE_REPLY = "The file helper read the config."
SUMMARY_REPLY = "<summary>The user split the work between two helpers.</summary>"


def _usage(ctx: int, out: int) -> dict[str, int]:
    return {"input_tokens": 10, "cache_creation_input_tokens": ctx - 10, "cache_read_input_tokens": 0,
            "output_tokens": out}  # fmt: skip


def _envelope(kind: str, uuid: str, parent: str | None, ts: str, **fields: Any) -> str:
    return cc_line(type=kind, uuid=uuid, parentUuid=parent, sessionId=SESSION_ID, version="2.1.39",
                   cwd="/home/me/proj", timestamp=ts, isSidechain=False, **fields)  # fmt: skip


def _reply(msg_id: str, content: list[dict[str, Any]], *, ctx: int, out: int = 20) -> dict[str, Any]:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": MODEL, "content": content,
            "usage": _usage(ctx, out)}  # fmt: skip


def _task(tool_id: str, description: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": tool_id, "name": "Task",
             "input": {"description": description, "prompt": f"Please {description}.",
                       "subagent_type": "general-purpose"}}]  # fmt: skip


def _result(uuid: str, parent: str, tool_id: str, agent: str, text: str, ts: str) -> str:
    return _envelope("user", uuid, parent, ts,
                     message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                           "content": text}]},
                     toolUseResult={"status": "completed", "agentId": agent})  # fmt: skip


def _progress(uuid: str, parent: str, ts: str, message: dict[str, Any]) -> str:
    return _envelope("progress", uuid, parent, ts, toolUseID="agent_msg_1", parentToolUseID="toolu_inline",
                     data={"type": "agent_progress", "agentId": INLINE, "prompt": "find the callers",
                           "normalizedMessages": [], "message": message})  # fmt: skip


def _sidechain(kind: str, agent: str, uuid: str, parent: str | None, ts: str, message: dict[str, Any]) -> str:
    return cc_line(type=kind, uuid=uuid, parentUuid=parent, sessionId=SESSION_ID, version="2.1.39",
                   isSidechain=True, agentId=agent, timestamp=ts, message=message)  # fmt: skip


def subagent_session(folder: Path) -> Path:
    """The session's folder: ``<id>.jsonl`` and ``<id>/subagents/`` (import the folder: mains first)."""
    t = "2026-02-12T14:0{}:00.000Z".format
    write(
        folder,
        f"{SESSION_ID}.jsonl",
        _envelope("user", "u1", None, t(0), message={"role": "user", "content": "Split the work between helpers"}),
        _envelope(
            "assistant",
            "a1",
            "u1",
            t(0),
            message=_reply("msg_main_1", _task("toolu_inline", "find the callers"), ctx=20_000),
        ),
        _progress(
            "p1",
            "a1",
            t(1),
            {
                "type": "user",
                "uuid": "i1",
                "timestamp": t(1),
                "message": {"role": "user", "content": "Please find the callers."},
            },
        ),
        _progress(
            "p2",
            "p1",
            t(1),
            {
                "type": "assistant",
                "uuid": "i2",
                "timestamp": t(1),
                "message": _reply("msg_inline_1", [{"type": "text", "text": INLINE_REPLY}], ctx=12_000),
            },
        ),
        _result("r1", "a1", "toolu_inline", INLINE, INLINE_REPLY, t(2)),
        _envelope(
            "assistant",
            "a2",
            "r1",
            t(2),
            message=_reply("msg_main_2", _task("toolu_file", "read the config"), ctx=21_000),
        ),
        _result("r2", "a2", "toolu_file", FILE, FILE_REPLY, t(3)),
        _envelope(
            "assistant",
            "a3",
            "r2",
            t(3),
            message=_reply("msg_main_3", [{"type": "text", "text": "Both done."}], ctx=22_000),
        ),
        _envelope(
            "system",
            "b1",
            None,
            t(5),
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid="a3",
            compactMetadata={"trigger": "manual", "preTokens": 22_100},
        ),
        _envelope(
            "user",
            "s1",
            "b1",
            t(5),
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={"role": "user", "content": "This session is being continued. Summary: two helpers."},
        ),
        _envelope(
            "assistant",
            "a4",
            "s1",
            t(6),
            message=_reply("msg_main_4", [{"type": "text", "text": "Carrying on."}], ctx=8_000),
        ),
    )
    subagents = folder / SESSION_ID / "subagents"
    subagents.mkdir(parents=True)
    write(
        subagents,
        f"agent-{FILE}.jsonl",
        _sidechain("user", FILE, "f1", None, t(2), {"role": "user", "content": "Please read the config."}),
        _sidechain(
            "assistant",
            FILE,
            "f2",
            "f1",
            t(2),
            _reply("msg_file_1", [{"type": "text", "text": FILE_REPLY}], ctx=11_000),
        ),
    )
    write(
        subagents,
        f"agent-{COMPACT}.jsonl",
        _sidechain(
            "user", COMPACT, "c1", "a3", t(4), {"role": "user", "content": "Your task is to create a detailed summary."}
        ),
        _sidechain(
            "assistant",
            COMPACT,
            "c2",
            "c1",
            t(4),
            _reply("msg_compact_1", [{"type": "text", "text": SUMMARY_REPLY}], ctx=22_050, out=300),
        ),
    )
    return folder
