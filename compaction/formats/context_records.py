"""The records by which a real agent says it changed its own history, over every format we read.

A compaction record means the agent replaced its history by a summary: from there on the recorded numbers
describe a history a simulation does not have. A prune record means it cleared tool results: the drop is in
the recorded numbers, and what it cleared may not even be in the file (a log that starts mid-session can
record a microcompact of results written before its first line).
Each format module names its own record types; a new format adds one line to ``registry.FORMATS`` (the registry
keeps the sets, refreshed in place when an agent is registered).
"""

from __future__ import annotations

from compaction.formats.registry import (
    COMPACTION_RECORD_TYPES,
    CONTEXT_RECORD_TYPES,
    FORMATS,
    PRUNE_RECORD_TYPES,
)
from compaction.transcript import Message

__all__ = [
    "COMPACTION_RECORD_TYPES",
    "CONTEXT_RECORD_TYPES",
    "PRUNE_RECORD_TYPES",
    "conversation_keeps_bookkeeping",
    "is_compaction_record",
    "is_context_record",
]


def is_context_record(message: Message) -> bool:
    """A record of the real agent's own compaction or prune."""
    return message.kind == "compact_summary" or message.raw_type in CONTEXT_RECORD_TYPES


def is_compaction_record(message: Message) -> bool:
    """A record of the real agent's own compaction (its summary included)."""
    return message.kind == "compact_summary" or message.raw_type in COMPACTION_RECORD_TYPES


def conversation_keeps_bookkeeping(format_name: str) -> bool:
    """Whether the conversation view of a session in this format keeps its bookkeeping records."""
    return any(f.CONVERSATION_KEEPS_BOOKKEEPING for f in FORMATS if format_name == f.FORMAT)
