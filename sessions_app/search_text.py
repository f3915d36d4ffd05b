"""The text people read in a record, for full-text search: never JSON keys, never bookkeeping.

Prompts, replies, thinking, tool results and summaries are their text; a tool call is the string values
of its input (a command, a path, a prompt), so searching for a key name such as "file_path" finds
nothing while the path itself is found.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from compaction.transcript import Block

# PostgreSQL refuses a tsvector over 1 MB: the searchable text of one record is capped well below it.
SEARCH_TEXT_CHARS = 200_000
# SQLite's FTS5 index of Message.search_text (migration 0015): the import (or, after a large one, the task
# worker) adds its rows, triggers follow updates and deletes of indexed rows (0017). FTS5 keeps one row per
# indexed record in its docsize table: what is not there is not indexed yet.
FTS_TABLE = "sessions_app_message_fts"
FTS_DOCSIZE_TABLE = f"{FTS_TABLE}_docsize"
# PostgreSQL's index (migration 0016): one tsvector per record, 'simple' (no stemming: a phrase matches as
# written, in any language).
TSV_TABLE = "sessions_app_message_tsv"


def _string_values(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_values(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_values(item)


def blocks_search_text(blocks: Sequence[Block]) -> str:
    """search_text of a parsed record's blocks, reading tool inputs already parsed (the import's hot path)."""
    parts: list[str] = []
    for block in blocks:
        if not block.text:
            continue
        if block.kind == "tool_use" and block.tool_input is not None:
            parts.extend(_string_values(block.tool_input))
        elif block.kind == "tool_use":
            parts.extend(_tool_text(block.text))
        else:
            parts.append(block.text)
    return _capped("\n".join(parts))


def _tool_text(text: str) -> Iterator[str]:
    """A tool call stored as JSON text: its string values; text that is not JSON (a raw patch) as it is."""
    try:
        yield from _string_values(orjson.loads(text))
    except orjson.JSONDecodeError:
        yield text


def _capped(text: str) -> str:
    return text[:SEARCH_TEXT_CHARS].replace("\x00", "\ufffd")


def search_text(blocks: list[dict[str, Any]]) -> str:
    """The readable text of stored blocks (dicts with ``kind`` and ``text``), capped at SEARCH_TEXT_CHARS."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("kind", "")
        text = block.get("text") or ""
        if not text:
            continue
        if kind == "tool_use":
            parts.extend(_tool_text(text))
        else:
            parts.append(text)
    return _capped("\n".join(parts))
