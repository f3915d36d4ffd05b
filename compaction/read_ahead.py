"""A large session file read in a second process while the importing process starts Django and stores it.

``manage.py import_sessions FILE`` spends its first 0.35-0.45 s starting Django, and then parsing one core's worth
of Python while the other core has little to do (bench/README.md, import item 27). For one large file, ``manage.py``
calls ``start_for_command`` before Django is imported: it forks a child that reads the file as an import reads it
(``SettledRead``: the records, and the file's bytes hashed and compressed into zstd frames) and sends them through
a pipe, pickled in batches. The importer (``sessions_app.services._store``) claims what the child read when the file
turns out to be a new main session read with the same settings, and stores it as it arrives; anything else (a file
already imported, a subagent file, other limits) abandons the child, and the importer reads the file itself. A child
that fails or dies makes the importer read the file itself too (``ReadAheadLost``), inside a fresh transaction.

The child is forked before any thread exists (``start`` refuses otherwise) and knows nothing of Django; it is our
own process, so what comes through the pipe is trusted as our own memory is.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compaction.transcript import MAIN, RecordPickler

if TYPE_CHECKING:
    from compaction.transcript import Record, SessionInfo

# ``manage.py`` imports this module for every command: what only a read-ahead uses is imported when one starts.

# Below this the fork, the pickling and the pipe cost more than the overlap wins (a Claude Code session's records
# parse at about 90 MB/s here; 8 MiB is 0.1 s of parsing, about the fork's and the unpickling's cost).
MIN_BYTES = 8 * 1024 * 1024
BATCH_RECORDS = 500  # records per pickled batch: small enough that the importer starts early, large enough to amortise
_HEADER_BYTES = 8  # each batch is preceded by its length
WAITING_BYTES = 64 * 1024 * 1024  # batches read from the pipe and not yet stored: beyond, the child waits


@dataclass(frozen=True, slots=True)
class Plan:
    """What the child reads and how: the importer claims its result only when it would read the same way."""

    path: str  # resolved
    device: int
    inode: int
    size: int  # at the fork; the child reads to the end of the file as it is then
    fmt: str
    agent: str
    max_line_bytes: int
    chunk_bytes: int
    zstd_level: int


@dataclass(frozen=True, slots=True)
class _Frame:
    data: bytes  # one zstd frame of the file's next ``size`` bytes
    size: int


@dataclass(frozen=True, slots=True)
class _End:
    info: SessionInfo
    lines_read: int
    partial_line: int | None
    sha256: str
    consumed: int


@dataclass(frozen=True, slots=True)
class _Failed:
    why: str


class ReadAheadLost(Exception):
    """The child did not read the whole file (it failed or died): the importer reads the file itself."""


_pending: ReadAhead | None = None


def start_for_command(argv: list[str]) -> None:
    """In ``manage.py``, before Django starts: ``import_sessions FILE`` of one large file gets a read-ahead."""
    global _pending
    if len(argv) < 3 or argv[1] != "import_sessions" or os.environ.get("SESSION_INSPECTOR_READ_AHEAD") == "0":
        return
    # Any other word (a second path, an option's value) and there is no read-ahead: only the plain form is known.
    words = [word for word in argv[2:] if word != "--json"]
    if len(words) != 1 or words[0].startswith("-"):
        return
    from compaction.formats.jsonl import MAX_LINE_BYTES

    try:
        max_line_bytes = int(os.environ.get("IMPORT_MAX_LINE_BYTES", MAX_LINE_BYTES))  # as config/settings.py reads it
    except ValueError:
        return
    _pending = start(Path(words[0]), max_line_bytes=max_line_bytes)


def start(path: Path, *, max_line_bytes: int) -> ReadAhead | None:
    """Fork a child reading ``path`` as a new main session, or None when the file is small or not one."""
    from compaction.formats import registry
    from compaction.formats.detect import detect_format, read_head
    from compaction.formats.reading import RAW_CHUNK_BYTES, RAW_ZSTD_LEVEL
    from compaction.transcript import NotASession

    if threading.active_count() > 1:
        return None  # a fork copies no other thread, and a lock one of them held would never be released
    try:
        resolved = path.resolve()
        stat = resolved.stat()
        if not resolved.is_file() or stat.st_size < MIN_BYTES:
            return None
        with resolved.open("rb") as f:
            head = read_head(f)
        fmt = detect_format(head)
        if registry.parent_link(fmt, head=head, path=resolved) is not None:
            return None  # its agent and session are for the database to say
    except (OSError, NotASession):
        return None  # the importer says what is wrong with the file
    plan = Plan(
        path=str(resolved),
        device=stat.st_dev,
        inode=stat.st_ino,
        size=stat.st_size,
        fmt=fmt,
        agent=MAIN,
        max_line_bytes=max_line_bytes,
        chunk_bytes=RAW_CHUNK_BYTES,
        zstd_level=RAW_ZSTD_LEVEL,
    )
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        _child(plan, write_end)
    os.close(write_end)
    return ReadAhead(plan, pid=pid, fd=read_end)


def claim(
    *, path: Path, fmt: str, agent: str, max_line_bytes: int, chunk_bytes: int, zstd_level: int
) -> ReadAhead | None:
    """The pending read-ahead, when it reads ``path`` as the importer would; it is claimed or abandoned once."""
    global _pending
    ahead, _pending = _pending, None
    if ahead is None:
        return None
    try:
        resolved = path.resolve()
        stat = resolved.stat()
    except OSError:
        ahead.close()
        return None
    wanted = Plan(
        path=str(resolved),
        device=stat.st_dev,
        inode=stat.st_ino,
        size=ahead.plan.size,
        fmt=fmt,
        agent=agent,
        max_line_bytes=max_line_bytes,
        chunk_bytes=chunk_bytes,
        zstd_level=zstd_level,
    )
    # A file that shrank since the fork was rewritten: what the child read may no longer be the file.
    if ahead.plan != wanted or stat.st_size < ahead.plan.size:
        ahead.close()
        return None
    return ahead


def abandon() -> None:
    """Stop a read-ahead nobody claimed (``manage.py``, once the command is done)."""
    global _pending
    ahead, _pending = _pending, None
    if ahead is not None:
        ahead.close()


# ---------------------------------------------------------------------------------------------- the child


def _child(plan: Plan, fd: int) -> None:
    """Read the file into the pipe, then end the process without running the parent's exit handlers."""
    code = 0
    try:
        _read_into(plan, fd)
    except BaseException as exc:  # noqa: BLE001 - whatever happened, the importer reads the file itself
        try:
            _send(fd, [_Failed(f"{type(exc).__name__}: {exc}")])
        except BaseException:  # noqa: BLE001 - the importer is gone or stopped reading
            code = 1
    finally:
        os._exit(code)


def _read_into(plan: Plan, fd: int) -> None:
    import zstandard

    from compaction.formats import registry
    from compaction.formats.reading import SettledRead, hash_and_compress

    path = Path(plan.path)
    parser = registry.make_parser(plan.fmt, agent=plan.agent, path=path)
    digest = hashlib.sha256()
    zstd = zstandard.ZstdCompressor(level=plan.zstd_level)
    # zstd and hashlib release the GIL: the chunks are hashed and compressed in a thread while the parse goes on, in
    # file order (one worker), as the importer's own reading does (``sessions_app.services._FileWriter``).
    compressor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead-compress")
    jobs: list[tuple[Future[bytes | None], int]] = []
    chunk: list[bytes | memoryview] = []
    chunk_bytes = 0
    consumed = 0
    batch: list[Any] = []

    def flush_chunk() -> None:
        nonlocal chunk, chunk_bytes, consumed
        if chunk:
            jobs.append((compressor.submit(hash_and_compress, digest, zstd, chunk, 0), chunk_bytes))
            consumed += chunk_bytes
            chunk, chunk_bytes = [], 0

    def settle(piece: bytes | memoryview) -> None:
        nonlocal chunk_bytes
        chunk.append(piece)
        chunk_bytes += len(piece)
        if chunk_bytes >= plan.chunk_bytes:
            flush_chunk()

    def frames(*, wait: bool) -> None:
        while jobs and (wait or jobs[0][0].done()):
            job, size = jobs.pop(0)
            frame = job.result()
            if frame is not None:
                batch.append(_Frame(frame, size))

    with path.open("rb", buffering=0) as f:
        read = SettledRead(parser, f, settle=settle, max_line_bytes=plan.max_line_bytes, block_bytes=plan.chunk_bytes)
        for record in read.records():
            batch.append(record)
            if len(batch) >= BATCH_RECORDS:
                frames(wait=False)
                _send(fd, batch)
                batch.clear()
        flush_chunk()
        frames(wait=True)
    compressor.shutdown()
    batch.append(_End(read.info, read.lines_read, read.partial_line, digest.hexdigest(), consumed))
    _send(fd, batch)


def _send(fd: int, items: list[Any]) -> None:
    blob = RecordPickler.dumps(items)
    view = memoryview(len(blob).to_bytes(_HEADER_BYTES, "little") + blob)
    while view:
        view = view[os.write(fd, view) :]


# ---------------------------------------------------------------------------------------------- the importer


class _Batches:
    """The batches read from the pipe and not yet taken, at most ``limit`` bytes of them (a single larger batch may
    wait alone): when the importer is slower than the child, the pipe fills and the child waits, so memory stays flat
    however large the file."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._changed = threading.Condition()
        self._waiting: deque[bytes | None] = deque()
        self._bytes = 0
        self._closed = False

    def put(self, blob: bytes | None) -> None:
        """Add a batch (None: the end), once there is room for it."""
        size = len(blob) if blob is not None else 0
        with self._changed:
            while self._bytes and self._bytes + size > self._limit and not self._closed:
                self._changed.wait()
            if self._closed:
                return
            self._waiting.append(blob)
            self._bytes += size
            self._changed.notify_all()

    def get(self) -> bytes | None:
        with self._changed:
            while not self._waiting:
                self._changed.wait()
            blob = self._waiting.popleft()
            self._bytes -= len(blob) if blob is not None else 0
            self._changed.notify_all()
            return blob

    def close(self) -> None:
        """Drop what waits and take nothing more: the thread filling it ends."""
        with self._changed:
            self._closed = True
            self._waiting.clear()
            self._bytes = 0
            self._changed.notify_all()


class ReadAhead:
    """The importer's end of a read-ahead: a thread empties the pipe as the child fills it, so the child does not
    wait for the importer while it starts Django. Up to ``WAITING_BYTES`` of batches wait (the records pickled, the
    bytes compressed: all of the 53 MB session's are 29 MB)."""

    def __init__(self, plan: Plan, *, pid: int, fd: int) -> None:
        self.plan = plan
        self._pid: int | None = pid
        self._batches = _Batches(WAITING_BYTES)
        self._thread = threading.Thread(target=self._drain, args=(fd,), name="read-ahead", daemon=True)
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            with open(fd, "rb", buffering=1024 * 1024) as pipe:
                while len(header := pipe.read(_HEADER_BYTES)) == _HEADER_BYTES:
                    size = int.from_bytes(header, "little")
                    blob = pipe.read(size)
                    if len(blob) < size:
                        break
                    self._batches.put(blob)
        except OSError:
            pass  # the batches stop: ``records`` reports the read-ahead lost
        finally:
            self._batches.put(None)

    def read(self, *, on_frame: Callable[[bytes, int], None]) -> AheadRead:
        return AheadRead(self._batches, on_frame=on_frame)

    def close(self) -> None:
        """Stop the child if it still runs, and reap it."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        self._batches.close()  # a drain thread waiting for room goes on to the pipe's end
        self._thread.join()


class AheadRead:
    """What the child read, as the importer consumes it: ``SettledRead``'s records and counts; the file's bytes come
    as the child's zstd frames (``on_frame(frame, size)``), and its sha256 once it is read (``sha256``)."""

    def __init__(self, batches: _Batches, *, on_frame: Callable[[bytes, int], None]) -> None:
        self._batches = batches
        self._on_frame = on_frame
        self.info: SessionInfo | None = None
        self.lines_read = 0
        self.partial_line: int | None = None
        self.sha256: str | None = None
        self.consumed = 0

    def records(self) -> Iterator[Record]:
        while True:
            blob = self._batches.get()
            if blob is None:
                raise ReadAheadLost("the read-ahead process ended before the end of the file")
            for item in pickle.loads(blob):
                kind = type(item)
                if kind is _Frame:
                    self._on_frame(item.data, item.size)
                elif kind is _End:
                    self.info, self.lines_read, self.partial_line = item.info, item.lines_read, item.partial_line
                    self.sha256, self.consumed = item.sha256, item.consumed
                    return
                elif kind is _Failed:
                    raise ReadAheadLost(f"the read-ahead process failed: {item.why}")
                else:
                    yield item
