"""The fifth agent's session format: one JSON object per line, told apart by its ``"fifth"`` key.

{"fifth": "session", "id": "s1", "model": "claude-sonnet-4-5", "cwd": "/w", "version": "0.1"}
{"fifth": "user", "text": "...", "at": "2026-01-01T10:00:00Z"}
{"fifth": "assistant", "id": "r1", "text": "...", "tool": {"id": "t1", "name": "peek", "input": {...}},
 "usage": {"input": 1200, "cache_read": 0, "cache_write": 0, "output": 40}, "at": ...}
{"fifth": "tool", "id": "t1", "name": "peek", "output": "...", "error": false, "at": ...}
{"fifth": "compacted", "summary": "...", "before": 9000, "at": ...}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from compaction.agents import AgentProfile, ToolRoles
from compaction.formats.jsonl import json_objects
from compaction.transcript import (
    MAIN,
    Block,
    ContextEvent,
    LineError,
    Message,
    ParentLink,
    Record,
    SessionInfo,
    Usage,
)

FORMAT = "fifth-agent"
LABEL = "Fifth Agent"
SESSION_FOLDERS = (".fifth/sessions",)
PROFILE = AgentProfile(
    colour="#123456",
    dark_colour="#abcdef",
    replay_colour="#654321",
    tools=ToolRoles(
        read=frozenset({"peek"}),
        edit=frozenset({"scribble"}),
        shell=frozenset({"hum"}),
        spawn=frozenset({"summon"}),
        path_keys=("file",),
        command_keys=("tune",),
    ),
    upload_hint="logs (*.fifth.jsonl)",
)
COMPACTION_RECORD_TYPES = frozenset({"compacted"})
PRUNE_RECORD_TYPES: frozenset[str] = frozenset()
CONVERSATION_KEEPS_BOOKKEEPING = False


class FifthParser:
    def __init__(self, *, agent: str) -> None:
        self.agent = agent
        self.info = SessionInfo(format=FORMAT)

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]:
        for item in json_objects(lines, first_line=1, info=self.info):
            if isinstance(item, LineError):
                yield item
            else:
                number, _, obj = item
                yield from self._records(number, obj)

    def _records(self, number: int, obj: dict[str, Any]) -> Iterator[Record]:
        kind, at = obj.get("fifth"), obj.get("at")
        self.info.started_at = self.info.started_at or at
        self.info.ended_at = at or self.info.ended_at
        if kind == "session":
            self.info.session_id, self.info.model = obj.get("id"), obj.get("model")
            self.info.cwd, self.info.agent_version = obj.get("cwd"), obj.get("version")
            yield Message(number, "meta", "bookkeeping", agent=self.agent, raw_type="session", timestamp=at)
        elif kind == "user":
            self.info.title = self.info.title or obj["text"][:80]
            yield Message(
                number,
                "user",
                "prompt",
                agent=self.agent,
                blocks=[Block("text", obj["text"])],
                raw_type="user",
                timestamp=at,
            )
        elif kind == "assistant":
            blocks = [Block("text", obj["text"])] if obj.get("text") else []
            tool = obj.get("tool")
            if isinstance(tool, dict):
                blocks.append(
                    Block(
                        "tool_use",
                        text=json.dumps(tool["input"]),
                        tool_id=tool["id"],
                        tool_name=tool["name"],
                        tool_input=tool["input"],
                    )
                )
            used = obj.get("usage") or {}
            usage = Usage(
                used.get("input", 0), used.get("cache_write", 0), used.get("cache_read", 0), used.get("output", 0)
            )
            yield Message(
                number,
                "assistant",
                "assistant",
                agent=self.agent,
                blocks=blocks,
                raw_type="assistant",
                model=self.info.model,
                call_key=obj.get("id"),
                usage=usage if used else None,
                timestamp=at,
            )
        elif kind == "tool":
            block = Block(
                "tool_result",
                text=obj["output"],
                tool_id=obj["id"],
                tool_name=obj["name"],
                is_error=bool(obj.get("error")),
            )
            yield Message(
                number, "user", "tool_result", agent=self.agent, blocks=[block], raw_type="tool", timestamp=at
            )
        elif kind == "compacted":
            yield ContextEvent(
                "compaction",
                number,
                agent=self.agent,
                timestamp=at,
                trigger="auto",
                pre_tokens=obj.get("before"),
                message=obj["summary"][:300],
            )
            yield Message(
                number,
                "user",
                "compact_summary",
                agent=self.agent,
                blocks=[Block("text", obj["summary"])],
                raw_type="compacted",
                timestamp=at,
            )
        else:
            yield LineError(number, f"unknown record {kind!r}")


def make_parser(*, agent: str = MAIN, path: Path) -> FifthParser:
    return FifthParser(agent=agent)


def parent_link(head: list[bytes], path: Path) -> ParentLink | None:
    return None


def vote(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("fifth"), str)
