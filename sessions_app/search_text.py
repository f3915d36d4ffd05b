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


_CONTAINERS = (dict, list)  # a tuple: isinstance() is quicker with it than with `dict | list`


def _string_values(value: Any) -> list[str]:
    parts: list[str] = []
    _add_string_values(value, parts)
    return parts


def _add_string_values(value: Any, parts: list[str]) -> None:
    # Appends to one list rather than yielding through nested generators: this runs for every tool call of an
    # import, and a tool input is mostly a flat object of strings, read here without a generator per level.
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, _CONTAINERS):
                _add_string_values(item, parts)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, _CONTAINERS):
                _add_string_values(item, parts)


def blocks_search_text(blocks: Sequence[Block]) -> str:
    """search_text of a parsed record's blocks, reading tool inputs already parsed (the import's hot path)."""
    if len(blocks) == 1:
        # The usual record is one block: its text is the search text, without a list and a join.
        block = blocks[0]
        if block.kind != "tool_use":
            return _capped(block.text)
    parts: list[str] = []
    for block in blocks:
        if not block.text:
            continue
        if block.kind == "tool_use" and block.tool_input is not None:
            _add_string_values(block.tool_input, parts)
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
