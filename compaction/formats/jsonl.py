"""The one JSONL line reader every agent's parser reads through, so every agent reports a bad line alike.

Rules, the same for Claude Code, klaude-code and KHAELOR files:
- lines are numbered as in the file (1-based, blank lines counted), from ``first_line``;
- a UTF-8 byte order mark at the start of the file is not part of the first record;
- blank lines (whitespace only) are skipped without a report;
- a line that is not valid JSON, or is JSON but not an object, is a ``LineError`` and reading goes on;
- an unterminated last line that does not parse is a write still in progress (agents append while
  they run): it is no error of the file, it is skipped and its number is kept in
  ``info.data["partial_last_line"]``. Only the last line qualifies: a caller that strips newlines
  must not hide a broken line in the middle;
- a line longer than the reader's limit (``read_lines``) is streamed past, never held in memory, and
  becomes a ``LineError`` giving its length and the limit;
- a record the parser understands but cannot turn into records (any exception of the parser on that
  line, ``records_of_line``) is a ``LineError`` too: one odd value never rejects a whole file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import UTC
from typing import Any, BinaryIO

import orjson

from compaction.transcript import LineError, Message, Record, SessionInfo, Usage, parse_timestamp

UTF8_BOM = b"\xef\xbb\xbf"

# Python's names for what orjson decodes, as JSON calls them.
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}

JsonLine = tuple[int, bytes, dict[str, Any]]  # (line number, raw line without a BOM, decoded object)


# A line longer than this is not parsed (a JSON value needs several times its size in memory); the
# Django side passes its setting, this is the default for the command-line tools and tests.
MAX_LINE_BYTES = 32 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024  # bytes read at a time while streaming past an over-long line
READ_BLOCK_BYTES = 8 * 1024 * 1024  # bytes read at a time by ``read_settled_lines``


class OverlongLine(bytes):
    """Stands for a line longer than the reader's limit: its bytes were streamed past, never held.

    It is empty bytes (so code that only looks at content sees nothing) carrying the line's length.
    """

    size: int
    limit: int

    def __new__(cls, *, size: int, limit: int) -> OverlongLine:
        line = super().__new__(cls, b"")
        line.size = size
        line.limit = limit
        return line

    def message(self) -> str:
        return f"line of {self.size:,} bytes, longer than the limit of {self.limit:,} bytes; not read"


def read_lines(
    f: BinaryIO, *, max_line_bytes: int = MAX_LINE_BYTES, on_skipped: Callable[[bytes], None] | None = None
) -> Iterator[bytes]:
    """The lines of a binary file, newline included, none longer than ``max_line_bytes``.

    A longer line is read in chunks that go to ``on_skipped`` (to hash or store the original bytes) and
    is yielded as one ``OverlongLine``; memory stays bounded whatever the file holds.
    """
    while True:
        raw = f.readline(max_line_bytes + 1)
        if not raw:
            return
        if len(raw) <= max_line_bytes or raw.endswith(b"\n"):
            yield raw
            continue
        size = len(raw)
        if on_skipped is not None:
            on_skipped(raw)
        del raw
        while True:
            chunk = f.readline(_SKIP_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if on_skipped is not None:
                on_skipped(chunk)
            if chunk.endswith(b"\n"):
                break
        yield OverlongLine(size=size, limit=max_line_bytes)


def read_settled_lines(
    f: BinaryIO,
    *,
    settle: Callable[[bytes | memoryview], None],
    max_line_bytes: int = MAX_LINE_BYTES,
    block_bytes: int = READ_BLOCK_BYTES,
) -> Iterator[bytes]:
    """``read_lines``' lines, read a block at a time, for a caller that also keeps the file's bytes (an import
    hashes and stores them).

    Every byte goes to ``settle``, in order and in pieces of up to a block, before the lines it holds are yielded:
    the caller gets a few large pieces, not one per line, and copies none of them. The exception is an unterminated
    last line that is not over-long: an agent may still be writing it, so its bytes are left for the caller to settle
    once it knows whether the line is kept. Memory stays bounded by the block and the line limit.
    """
    start: list[bytes] = []  # the start of a line that began in an earlier block (not settled yet)
    started = 0
    skipped: int | None = None  # the bytes so far of an over-long line being streamed past
    while block := f.read(block_bytes):
        view = memoryview(block)
        pos, size = 0, len(block)
        if skipped is not None or start:
            newline = block.find(b"\n")
            end = size if newline < 0 else newline + 1
            if skipped is None and started + end - (newline >= 0) > max_line_bytes:
                for part in start:  # the line turns out over-long: stream past it from here
                    settle(part)
                skipped, start, started = started, [], 0
            if skipped is not None:
                settle(view[:end])
                skipped += end
                if newline < 0:
                    continue
                yield OverlongLine(size=skipped, limit=max_line_bytes)
                skipped = None
            elif newline < 0:
                start.append(block)
                started += size
                continue
            else:
                line = b"".join([*start, view[:end]])
                start, started = [], 0
                settle(line)
                yield line
            pos = end
        last = block.rfind(b"\n", pos) + 1  # the end of the block's last whole line
        if last > pos:
            settle(view[pos:last])
            find = block.find
            while pos < last:
                end = find(b"\n", pos, last) + 1
                if end - pos - 1 > max_line_bytes:
                    yield OverlongLine(size=end - pos, limit=max_line_bytes)
                else:
                    yield block[pos:end]
                pos = end
        if pos < size:  # a line that goes on in the next block, or the file's unterminated last line
            if size - pos > max_line_bytes:
                settle(view[pos:])
                skipped = size - pos
            else:
                start, started = [block[pos:]], size - pos
    if skipped is not None:
        yield OverlongLine(size=skipped, limit=max_line_bytes)
    elif start:
        yield b"".join(start)


def records_of_line(number: int, produce: Callable[[], Iterable[Record]]) -> list[Record]:
    """The records a parser makes of one line, or one ``LineError`` if making them fails.

    Parsers call their per-line code through this, so a value of a shape nobody foresaw (an object
    where a string belongs, nesting deeper than a serializer allows) costs that line, not the file.
    """
    try:
        return list(produce())
    except Exception as exc:  # any failure on one line's content is that line's error
        return [line_error(number, exc)]


def line_error(number: int, exc: Exception) -> LineError:
    """The ``LineError`` of a line whose records could not be made (``records_of_line``'s rule, for a parser
    that applies it inline)."""
    return LineError(number, f"cannot read this record ({type(exc).__name__}: {exc})"[:500])


# The largest count a store holds (a PositiveIntegerField on every database): the import refuses a record with a
# count past it or below 0 (``usage_problem``), as its line's error.
COUNT_MAX = 2**31 - 1


def count_problem(name: str, value: object) -> str | None:
    """Why a count cannot be stored (not an int between 0 and ``COUNT_MAX``), or None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= COUNT_MAX):
        return None
    return f"{name} {value!r} is not a count between 0 and {COUNT_MAX:,}; this record was not stored"


def usage_problem(usage: Usage) -> str | None:
    """Why a record's usage cannot be stored, or None."""
    inp, created, read, out = (
        usage.input_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens,
        usage.output_tokens,
    )
    # What nearly every record has, told at once (no generator: the import runs this once per record); the loop below
    # names what is wrong.
    if (
        type(inp) is int
        and type(created) is int
        and type(read) is int
        and type(out) is int
        and min(inp, created, read, out) >= 0
        and max(inp + created + read, out) <= COUNT_MAX  # the context is the first sum (Usage.context)
    ):
        return None
    for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
        problem = count_problem(f"usage.{name}", getattr(usage, name))
        if problem:
            return problem
    return count_problem("the context (input + cache tokens)", usage.context)


def unstorable(record: Message) -> str | None:
    """Why the import would refuse to store this record (``usage_problem``, a time outside years 1 to 9999 in UTC, or
    data no JSON column holds: nesting deeper than orjson writes, an integer past 64 bits), or None.

    The import checks every record itself; a parser whose own numbering counts records asks first (klaude's history
    index), so that a record the store refuses is not counted and the numbering stays the agent's own.
    """
    if record.usage is not None and (problem := usage_problem(record.usage)):
        return problem
    if parse_timestamp(record.timestamp) is not None and readable_time(record.timestamp) is None:
        return f"cannot store this record (timestamp {record.timestamp!r} is out of range); it was not imported"
    try:
        orjson.dumps(record.data, default=str)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:  # orjson's errors are ValueError
        return f"cannot store this record ({exc}); it was not imported"
    return None


def readable_time(value: str | None) -> str | None:
    """``value`` if it is a time the import stores (ISO-8601, in years 1 to 9999 once in UTC), else None.

    A session's start and end are its first and last readable times: one odd timestamp (a string that sorts after
    every time, a year past 9999) must not stand for them, or blank them once stored."""
    moment = parse_timestamp(value)
    if moment is None:
        return None
    try:
        moment.astimezone(UTC)
    except OverflowError:  # year 1 east of UTC is year 0 in UTC, which does not exist
        return None
    return value


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
        if isinstance(raw, OverlongLine):
            yield LineError(number, raw.message())
            number += 1
            raw = next(iterator, None)
            continue
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
