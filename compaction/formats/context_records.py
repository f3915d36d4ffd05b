"""The records by which a real agent says it changed its own history, over every format we read.

A compaction record means the agent replaced its history by a summary: from there on the recorded numbers
describe a history a simulation does not have. A prune record means it cleared tool results: the drop is in
the recorded numbers, and what it cleared may not even be in the file (a log that starts mid-session can
record a microcompact of results written before its first line).
Each format module names its own record types; a new format adds one line to ``registry.FORMATS`` (a registered one
refreshes these sets in place).
"""

from __future__ import annotations

from compaction.formats.registry import FORMATS
from compaction.transcript import Message

COMPACTION_RECORD_TYPES: set[str] = set()
PRUNE_RECORD_TYPES: set[str] = set()
CONTEXT_RECORD_TYPES: set[str] = set()


def refresh() -> None:
    """Fill the sets from the registered formats (in place: importers hold the same objects)."""
    COMPACTION_RECORD_TYPES.clear()
    COMPACTION_RECORD_TYPES.update(*(f.COMPACTION_RECORD_TYPES for f in FORMATS))
    PRUNE_RECORD_TYPES.clear()
    PRUNE_RECORD_TYPES.update(*(f.PRUNE_RECORD_TYPES for f in FORMATS))
    CONTEXT_RECORD_TYPES.clear()
    CONTEXT_RECORD_TYPES.update(COMPACTION_RECORD_TYPES | PRUNE_RECORD_TYPES)


refresh()


def is_context_record(message: Message) -> bool:
    """A record of the real agent's own compaction or prune."""
    return message.kind == "compact_summary" or message.raw_type in CONTEXT_RECORD_TYPES


def is_compaction_record(message: Message) -> bool:
    """A record of the real agent's own compaction (its summary included)."""
    return message.kind == "compact_summary" or message.raw_type in COMPACTION_RECORD_TYPES


def conversation_keeps_bookkeeping(format_name: str) -> bool:
    """Whether the conversation view of a session in this format keeps its bookkeeping records."""
    return any(f.CONVERSATION_KEEPS_BOOKKEEPING for f in FORMATS if format_name == f.FORMAT)
