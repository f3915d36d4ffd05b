"""One pass over a session file: the parser's records and, in order, every byte of the file.

An import stores both: the records, and the original bytes as zstd frames beside their sha256. The importer
(``sessions_app.services``) reads a file through ``SettledRead`` and compresses it through ``hash_and_compress``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

import zstandard

from compaction.formats.jsonl import OverlongLine, read_settled_lines
from compaction.transcript import Parser, Record, SessionInfo

RAW_CHUNK_BYTES = 8 * 1024 * 1024  # input bytes per stored zstd frame
# zstd at level 1 for the stored original bytes: on the 53 MB session zlib at level 1 took 0.36 s of CPU for
# 17.2 MB, zstd 0.06 s for 10.9 MB (and reads back in a quarter of zlib's time).
RAW_ZSTD_LEVEL = 1


class SettledRead:
    """The records ``parser`` reads from ``f``, every byte of the file handed to ``settle`` in order as it goes.

    ``read_settled_lines`` settles the bytes of every line before it is parsed, but for an unterminated last line (an
    agent may still be writing it): it is settled once parsed, and left out when the parser found it incomplete
    (``partial_line`` then names it). ``lines_read`` counts the lines whose bytes were settled; ``done`` is True once
    the file is read to its end (what is left is the parse of its last lines).
    """

    def __init__(
        self,
        parser: Parser,
        f: BinaryIO,
        *,
        settle: Callable[[bytes | memoryview], None],
        max_line_bytes: int,
        block_bytes: int = RAW_CHUNK_BYTES,
    ) -> None:
        self._parser = parser
        self._f = f
        self._settle = settle
        self._max_line_bytes = max_line_bytes
        self._block_bytes = block_bytes
        self._pending_partial: bytes | None = None
        self.lines_read = 0
        self.partial_line: int | None = None
        self.done = False

    @property
    def info(self) -> SessionInfo:
        return self._parser.info

    def records(self) -> Iterator[Record]:
        yield from self._parser.parse(self._lines())
        partial = self._parser.info.data.get("partial_last_line")
        if self._pending_partial is not None and not partial:
            self.lines_read += 1  # the unterminated last line parsed: keep it
            self._settle(self._pending_partial)
        self.partial_line = partial or None

    def _lines(self) -> Iterator[bytes]:
        for raw in read_settled_lines(
            self._f, settle=self._settle, max_line_bytes=self._max_line_bytes, block_bytes=self._block_bytes
        ):
            if not isinstance(raw, OverlongLine) and not raw.endswith(b"\n"):
                self._pending_partial = raw  # decided after parsing: a partial last line may be skipped
                yield raw
                break
            self.lines_read += 1
            yield raw
        self.done = True


def hash_and_compress(
    hash: hashlib._Hash, zstd: zstandard.ZstdCompressor, pieces: list[bytes | memoryview], stored_before: int
) -> bytes | None:
    """Hash a chunk of the file; its bytes after the first ``stored_before`` (an earlier import stored those) as one
    zstd frame, or None when there are none."""
    for piece in pieces:
        hash.update(piece)
    new: list[bytes | memoryview] = []
    for piece in pieces:
        if stored_before >= len(piece):
            stored_before -= len(piece)
            continue
        new.append(piece[stored_before:] if stored_before else piece)
        stored_before = 0
    return compress_pieces(zstd, new) if new else None


def compress_pieces(zstd: zstandard.ZstdCompressor, pieces: list[bytes | memoryview]) -> bytes:
    """One zstd frame of the pieces' bytes, as ``zstd.compress`` of their concatenation makes (without making it)."""
    if len(pieces) == 1:
        return zstd.compress(pieces[0])
    frame = zstd.compressobj(size=sum(len(piece) for piece in pieces))  # the size in the header: readers need it
    return b"".join([*(frame.compress(piece) for piece in pieces), frame.flush()])
