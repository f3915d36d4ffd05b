"""The one JSONL line reader every agent's parser reads through, so every agent reports a bad line alike.

Rules, the same for Claude Code, klaude-code and KHAELOR files:
- lines are numbered as in the file (1-based, blank lines counted), from ``first_line``;
- a UTF-8 byte order mark at the start of the file is not part of the first record;
- blank lines (whitespace only) are skipped without a report;
- a line that is not valid JSON, or is JSON but not an object, is a ``LineError`` and reading goes on;
- an unterminated last line that does not parse is a write still in progress (agents append while
  they run): it is no error of the file, it is skipped and its number is kept in
  ``info.data["partial_last_line"]``. Only the last line qualifies: a caller that strips newlines
  must not hide a broken line in the middle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from compaction.transcript import LineError, SessionInfo

UTF8_BOM = b"\xef\xbb\xbf"

# Python's names for what orjson decodes, as JSON calls them.
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}

JsonLine = tuple[int, bytes, dict[str, Any]]  # (line number, raw line without a BOM, decoded object)


def strip_bom(line: bytes) -> bytes:
    return line[len(UTF8_BOM) :] if line.startswith(UTF8_BOM) else line


def json_kind(value: object) -> str:
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def json_objects(lines: Iterable[bytes], *, first_line: int, info: SessionInfo) -> Iterator[JsonLine | LineError]:
    """Yield ``(number, raw, object)`` for each JSON-object line and a ``LineError`` for each bad one.

    ``lines`` are raw lines as read from a binary file, newline included.
    """
    loads, decode_error = orjson.loads, orjson.JSONDecodeError  # locals: this loop runs once per line
    iterator = iter(lines)
    number = first_line
    raw = next(iterator, None)
    if raw is not None and first_line == 1:
        raw = strip_bom(raw)
    while raw is not None:
        peeked = False
        following: bytes | None = None
        try:
            value = loads(raw)
        except decode_error as exc:
            if raw.strip():
                if not raw.endswith(b"\n"):
                    # Peek only here, where it matters: is this unterminated line the last one?
                    following, peeked = next(iterator, None), True
                if peeked and following is None:
                    info.data["partial_last_line"] = number
                else:
                    yield LineError(number, f"not valid JSON: {exc}")
        else:
            if isinstance(value, dict):
                yield number, raw, value
            else:
                yield LineError(number, f"not a JSON object but {json_kind(value)}")
        number += 1
        raw = following if peeked else next(iterator, None)
