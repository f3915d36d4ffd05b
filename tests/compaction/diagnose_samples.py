"""Samples the diagnosis tests read: a klaude-code session that overflowed, Claude Code samples parsed once."""

from __future__ import annotations

from functools import cache

from compaction.formats.claude_code import ClaudeCodeParser
from compaction.transcript import ContextEvent, Message, SessionInfo
from tests.conftest import CLAUDE_SAMPLES, KLAUDE_SAMPLES

KLAUDE_OVERFLOW = (
    KLAUDE_SAMPLES
    / "dot-klaude"
    / "projects"
    / "home-dev-projects-webapp"
    / "sessions"
    / "e403978267e543c9ae7335a01662e2ce"
)


@cache
def claude_sample(name: str) -> tuple[list[Message], list[ContextEvent], SessionInfo]:
    parser = ClaudeCodeParser()
    with open(CLAUDE_SAMPLES / name, "rb") as handle:
        records = list(parser.parse(handle))
    messages = [r for r in records if isinstance(r, Message) and r.kind not in ("bookkeeping", "unknown")]
    return messages, [r for r in records if isinstance(r, ContextEvent)], parser.info
