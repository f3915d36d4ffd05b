"""Tell which agent wrote a session file, from its first lines only (never from its name).

Claude Code transcripts cannot be recognised by their first line alone: they start with
``summary``, ``file-history-snapshot``, ``last-prompt``, ``progress``… (claude-code.md §12.2), so
every one of the first non-blank lines (up to ``HEAD_LINES``) votes, and the format with most votes
wins. Anything that is not JSONL of records of a known agent raises ``NotASession`` saying why.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, BinaryIO

import orjson

from compaction.formats.jsonl import OverlongLine, read_lines, strip_bom
from compaction.formats.registry import DETECTION_ORDER, FORMAT_LABELS
from compaction.transcript import NotASession

HEAD_LINES = 50  # enough to get past the bookkeeping prefix of a Claude Code file
# The head is held in memory: a line longer than this does not vote (it is read past, not kept), and
# reading stops once the kept lines reach HEAD_MAX_BYTES, so detection never holds a giant line.
HEAD_LINE_BYTES = 4 * 1024 * 1024
HEAD_MAX_BYTES = 16 * 1024 * 1024


class StillBeingWritten(NotASession):
    """Nothing to import yet: the file's only line has no newline and does not read (an agent is writing it)."""


def read_head(f: BinaryIO) -> list[bytes]:
    """The first non-blank lines of a file for ``detect_format``, over-long ones as ``OverlongLine``."""
    head: list[bytes] = []
    kept = 0
    for raw in read_lines(f, max_line_bytes=HEAD_LINE_BYTES):
        if isinstance(raw, OverlongLine) or raw.strip():
            head.append(raw)
            kept += len(raw)
        if len(head) >= HEAD_LINES or kept >= HEAD_MAX_BYTES:
            break
    return head


def _vote(obj: dict[str, Any]) -> str | None:
    """The format whose module claims this record (``vote``), asked in the registry's detection order."""
    for module in DETECTION_ORDER:
        if module.vote(obj):
            return str(module.FORMAT)
    return None


def _looks_like_one_document(lines: list[bytes]) -> bool:
    """A pretty-printed JSON document: its first line is a lone bracket, or the head parses as one value."""
    if lines[0].strip() in (b"{", b"["):
        return True
    try:
        orjson.loads(b"".join(lines))
    except orjson.JSONDecodeError:
        return False
    return True


def detect_format(head: list[bytes], *, name: str = "") -> str:
    """Return "claude-code", "klaude-code", "khaelor" or "codex" for the first lines of a file.

    ``head`` holds raw lines as read from the binary file; ``name`` is only used in error messages.
    The last line of ``head`` may be cut short by the caller and is then ignored.
    """
    label = f"{name}: " if name else ""
    if head:
        head = [strip_bom(head[0]), *head[1:]]  # the parsers read past a BOM too (formats/jsonl.py)
    overlong = [line for line in head if isinstance(line, OverlongLine)]
    lines = [line for line in head if line.strip()][:HEAD_LINES]
    if not lines and overlong:
        raise NotASession(
            f"{label}no line short enough to recognise the format: the first is {overlong[0].size:,} bytes, "
            f"over the {HEAD_LINE_BYTES:,} bytes read per line"
        )
    if not lines:
        raise NotASession(f"{label}the file is empty")
    # A few bad lines inside a real session (a NUL byte, invalid UTF-8, not JSON) are reported per line by the
    # parser; the file is rejected whole only when no line of the head is a record of a known agent ("binary":
    # no line of the head is text).
    votes: Counter[str] = Counter()
    first_problem: str | None = None
    still_written = False  # the head's only line has no newline yet and does not read: an agent is writing it
    for index, line in enumerate(lines):
        # The last line of the head, cut short by the caller or still being written (no newline: the file ends there;
        # a first line only if it may become a record, text that does not open an object never will).
        cut = index == len(lines) - 1 and (index > 0 or (not line.endswith(b"\n") and line.lstrip().startswith(b"{")))
        if b"\x00" in line:
            first_problem = first_problem or "binary content (NUL bytes), not a JSONL session"
            continue
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            if cut:
                still_written = index == 0
                break  # cut inside a character
            first_problem = first_problem or f"binary content (not UTF-8 text: {exc.reason}), not a JSONL session"
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            if index == 0 and lines[0].lstrip().startswith(b"["):
                raise NotASession(f"{label}a JSON array, not JSONL (one JSON object per line)") from None
            if index == 0 and _looks_like_one_document(lines):
                raise NotASession(f"{label}a single JSON document, not JSONL (one JSON object per line)") from None
            if cut:
                still_written = index == 0
                break
            first_problem = first_problem or f"not JSON lines: line {index + 1} is not valid JSON"
            continue
        if isinstance(value, list):
            if index == 0:
                raise NotASession(f"{label}a JSON array, not JSONL of objects")
            first_problem = first_problem or f"line {index + 1} is a JSON array, not an object"
            continue
        if not isinstance(value, dict):
            first_problem = first_problem or f"JSONL of {type(value).__name__} values, not of objects"
            continue
        format_name = _vote(value)
        if format_name is not None:
            votes[format_name] += 1
    if still_written:
        # Not "not a session": a live session's file is often first seen while its first line is being written.
        raise StillBeingWritten(
            f"{label}nothing to import yet: the file's only line is incomplete (no newline, not valid JSON: the agent "
            "may still be writing it); it imports once the line is complete"
        )
    if not votes and first_problem:
        raise NotASession(f"{label}{first_problem}")
    if not votes:
        raise NotASession(
            f"{label}unrelated JSONL: none of the first {len(lines)} lines looks like a "
            + " or ".join(f"{name} record" for name in FORMAT_LABELS.values())
        )
    return votes.most_common(1)[0][0]
