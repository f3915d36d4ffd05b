"""Writes: importing sessions, and everything that changes stored rows.

An import streams the file once through the agent's parser and stores the records in one
transaction, with bulk inserts in batches, so memory stays flat and a failure leaves the
database as it was. Re-importing a file that only grew stores just the new lines; the
parser still reads the whole file so its state (tool names, call grouping) matches a fresh
import exactly.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import logging
import re
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, TypeVar

import orjson
import zstandard
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Count, F, Max, Model, Q, Sum, Value
from django.db.models.functions import Greatest
from django.tasks import TaskContext, task
from django.utils import timezone

from compaction.calls import CallTracker
from compaction.formats import registry as format_registry
from compaction.formats.detect import StillBeingWritten, detect_format, read_head
from compaction.formats.jsonl import COUNT_MAX, count_problem, usage_problem
from compaction.formats.reading import RAW_CHUNK_BYTES, RAW_ZSTD_LEVEL, SettledRead
from compaction.formats.reading import hash_and_compress as _hash_and_compress
from compaction.stats import (
    LISTED_EVENT_KINDS,
    SessionStats,
    SessionTally,
    embedded_response,
)
from compaction.transcript import (
    CARRIED,
    MAIN,
    ApiCall,
    Block,
    ContextEvent,
    LineError,
    Message,
    NotASession,
    ParentLink,
    Parser,
    SessionInfo,
    Usage,
    parse_timestamp,
)
from sessions_app import memory_budget, models, task_queue, usage_cells
from sessions_app.search_text import FTS_DOCSIZE_TABLE, FTS_TABLE, TSV_TABLE, blocks_search_text
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import composition as composition_selectors
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import timeline as timeline_selectors

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

BATCH = 2000  # rows per bulk insert: large enough to amortise, small enough to keep memory flat
BATCH_BYTES = 16 * 1024 * 1024  # ...and a batch of a few giant records is flushed early (see WRITES_IN_FLIGHT)
# Calls an import that creates a session keeps open (their output may still rise on a later line of the response):
# past twice as many, the oldest are stored and tallied, and only their keys and numbers kept. A response's lines
# follow each other (docs/formats/claude-code.md); a line of a call closed already raises its stored output.
OPEN_CALLS = 1000
PATH_MAX = models.SourceFile._meta.get_field("path").max_length or 2000
INT_MAX = COUNT_MAX  # the largest value a PositiveIntegerField holds on every database
CONFLICT_RETRIES = 3  # a concurrent import of the same file lost the race: look again this often


def limit(name: str) -> int:
    """An import limit from settings (config/settings.py holds the defaults and the environment overrides)."""
    return int(getattr(settings, name))


@dataclass(slots=True)
class FileImport:
    """What happened to one file; printed by ``import_sessions --json`` and shown after an upload."""

    path: str
    format: str
    session: int | None
    created: bool
    lines: int  # lines stored by this import (0 when nothing changed)
    errors: list[dict[str, Any]] = field(default_factory=list)
    agent: str = MAIN
    warnings: list[str] = field(default_factory=list)  # said once, not stored: e.g. a last line still being written

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "path": self.path,
            "format": self.format,
            "created": self.created,
            "lines": self.lines,
            "errors": self.errors,
            "warnings": self.warnings,
            "agent": self.agent,
        }


@dataclass(slots=True)
class Rejected:
    path: str
    message: str
    # Not refused for good: the file's only line is still being written (``StillBeingWritten``); it imports once the
    # line is complete. The watcher says it waits for it rather than that it rejected it.
    waiting: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "message": self.message} | ({"waiting": True} if self.waiting else {})


@dataclass(slots=True)
class ImportReport:
    imported: list[FileImport] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "imported": [item.as_json() for item in self.imported],
            "rejected": [item.as_json() for item in self.rejected],
        }


# ---------------------------------------------------------------------------------------------
# Finding files


# Where each agent keeps its sessions, under the home folder: each format module names its own.
SESSION_FOLDERS = format_registry.SESSION_FOLDERS


def default_roots() -> list[Path]:
    """The user's own session folders, where they exist."""
    home = Path.home()
    return [p for p in (home / folder for folder in SESSION_FOLDERS) if p.is_dir()]


def discover(path: Path) -> list[Path]:
    """Session files under ``path`` (itself if a file): main transcripts first, then subagent files.

    Folders hold other JSONL that is not a transcript (workflow journals, persisted tool
    results); those are skipped so a folder scan reports only real problems.
    """
    if path.is_file():
        return [path]
    found = [p for p in path.rglob("*.jsonl") if p.is_file() and format_registry.is_transcript_path(p)]
    return sorted(found, key=lambda p: (format_registry.is_subagent_path(p), str(p)))


def import_paths(*, paths: Iterable[Path]) -> ImportReport:
    report = ImportReport()
    for root in paths:
        if not root.exists():
            report.rejected.append(Rejected(path=str(root), message="No such file or folder."))
            continue
        for file_path in discover(root):
            _collect(report, import_file(path=file_path))
    return report


def _collect(report: ImportReport, outcome: FileImport | Rejected) -> None:
    if isinstance(outcome, Rejected):
        report.rejected.append(outcome)
    else:
        report.imported.append(outcome)


# ---------------------------------------------------------------------------------------------
# Uploads

ProgressCallback = Callable[[ImportReport, int, int], None]  # (report so far, files done, files in all)


def _safe_name(name: str) -> PurePosixPath | None:
    """A relative path inside an upload, or None if it tries to leave the folder."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or name.startswith(("/", "\\")):
        return None
    return PurePosixPath(*parts)


def stage_uploads(*, files: Sequence[UploadedFile], into: Path) -> list[tuple[str, str]]:
    """Copy uploaded files into ``into`` (streaming, chunk by chunk); returns (path inside ``into``, label) each.

    Plain files land in one folder (so a klaude ``events.jsonl`` finds the ``meta.json`` uploaded with it);
    two uploads of the same name get separate folders.
    """
    staged: list[tuple[str, str]] = []
    for i, upload in enumerate(files):
        label = upload.name or f"upload-{i}"
        base = Path(label).name or f"upload-{i}"
        folder = next(f"u{n}" for n in range(len(files) + 1) if not (into / f"u{n}" / base).exists())
        (into / folder).mkdir(parents=True, exist_ok=True)
        with (into / folder / base).open("wb") as out:
            for chunk in upload.chunks():
                out.write(chunk)
        staged.append((f"{folder}/{base}", label))
    return staged


def import_staged(
    *, folder: Path, staged: Sequence[tuple[str, str]], on_progress: ProgressCallback | None = None
) -> ImportReport:
    """Import staged uploads: session files, their klaude meta.json, or zips of folders (which keep their layout,
    so subagent files sit where Claude Code puts them)."""
    report = ImportReport()
    sessions: list[tuple[Path, str]] = []
    for i, (relative, label) in enumerate(staged):
        target = folder / relative
        if zipfile.is_zipfile(target):
            refused_before = len(report.rejected)
            found = _unzip(target, folder / f"z{i}", report, label=label)
            if not found and len(report.rejected) == refused_before:
                report.rejected.append(Rejected(path=label, message="The zip holds no session files (*.jsonl)."))
            sessions.extend(found)
        elif target.name not in format_registry.sidecar_names():
            sessions.append((target, label))
    most = limit("UPLOAD_MAX_SESSION_FILES")
    if len(sessions) > most:
        report.rejected.append(
            Rejected(
                path=", ".join(label for _, label in staged)[:500],
                message=f"The upload holds {len(sessions):,} session files; at most {most:,} are imported per "
                "upload. Nothing was imported: upload the folders in parts, or use `manage.py import_sessions`.",
            )
        )
        return report
    # Main transcripts first so subagent files find their parent.
    sessions.sort(key=lambda item: (format_registry.is_subagent_path(item[0]), item[1]))
    if on_progress is not None:
        on_progress(report, 0, len(sessions))
    for done, (path, label) in enumerate(sessions, start=1):
        _collect(report, import_file(path=path, name=f"upload:{label}", replace_changed=False))
        if on_progress is not None:
            on_progress(report, done, len(sessions))
    return report


def _unzip(archive: Path, into: Path, report: ImportReport, *, label: str) -> list[tuple[Path, str]]:
    """Unpack the session files of a zip, within the limits in settings (a zip bomb must not fill disk or memory).

    Each member's declared size is checked against the limits before it is unpacked, and its actual size against
    the declared one while it streams (``unpack_member``): what reaches the disk never passes either limit, and a
    member refused half-way leaves nothing behind.
    """
    staged: list[tuple[Path, str]] = []
    max_members, max_member = limit("UPLOAD_MAX_ZIP_MEMBERS"), limit("UPLOAD_MAX_MEMBER_BYTES")
    max_total = limit("UPLOAD_MAX_UNZIPPED_BYTES")
    unpacked = 0
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            if len(members) > max_members:
                report.rejected.append(
                    Rejected(
                        path=label,
                        message=f"The zip holds {len(members):,} files, more than {max_members:,} "
                        "(UPLOAD_MAX_ZIP_MEMBERS).",
                    )
                )
                return []
            for info in members:
                rel = _safe_name(info.filename)
                where = f"{label}:{info.filename}"
                if rel is None:
                    report.rejected.append(Rejected(path=where, message="Unsafe path in zip."))
                    continue
                sidecar = rel.name in format_registry.sidecar_names()
                if not sidecar and not format_registry.is_transcript_path(rel):
                    continue
                if info.file_size > max_member:
                    report.rejected.append(
                        Rejected(
                            path=where,
                            message=f"Unpacks to {info.file_size:,} bytes, more than {max_member:,} per file "
                            "(UPLOAD_MAX_MEMBER_BYTES); not unpacked. Import such a file from disk with "
                            "`manage.py import_sessions`.",
                        )
                    )
                    continue
                unpacked += info.file_size
                if unpacked > max_total:
                    report.rejected.append(
                        Rejected(
                            path=where,
                            message=f"The zip unpacks to more than {max_total:,} bytes (UPLOAD_MAX_UNZIPPED_BYTES); "
                            "this and later files were not unpacked.",
                        )
                    )
                    break
                target = into / rel
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with target.open("wb") as out:
                        why = unpack_member(zf, info, out)
                except (zipfile.BadZipFile, RuntimeError, NotImplementedError, EOFError, OSError, zlib.error) as exc:
                    # A corrupt or encrypted member, or a path that clashes with another member.
                    why = f"Cannot unpack: {exc}"
                if why is not None:
                    if target.is_file():
                        target.unlink()  # what was written of it before it was refused
                    report.rejected.append(Rejected(path=where, message=why))
                    continue
                if rel.suffix == ".jsonl":
                    staged.append((target, f"{label}/{rel}"))
    except (zipfile.BadZipFile, OSError) as exc:
        report.rejected.append(Rejected(path=label, message=f"Not a readable zip: {exc}"))
    return staged


UNZIP_CHUNK_BYTES = 1024 * 1024  # read and written at a time while a member is unpacked


def unpack_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: BinaryIO) -> str | None:
    """Stream one zip member into ``out``; None when it held what its header declares, else why it was refused.

    zipfile alone stops at the declared size, checks nothing when the data ends before it, and reports a member
    that inflates past it as a bad CRC. Here the member is read at most one byte past its declared size, so one that
    inflates further is told apart (and refused at once), and never more than the declared size is written: the
    caller has checked that size against the limits. The CRC is checked on what was written."""
    declared = info.file_size
    probe = copy.copy(info)
    probe.file_size = declared + 1  # one byte more than declared shows whether there is more
    del probe.CRC  # zipfile would check it against that byte too many: checked below instead
    written, crc = 0, 0
    with zf.open(probe) as src:
        while chunk := src.read(min(UNZIP_CHUNK_BYTES, declared + 1 - written)):
            if written + len(chunk) > declared:
                return (
                    f"Cannot unpack: it inflates to more than the {declared:,} bytes its zip header declares (a zip "
                    "bomb?); nothing of it was kept."
                )
            out.write(chunk)
            crc = zlib.crc32(chunk, crc)
            written += len(chunk)
    if written < declared:
        return (
            f"Cannot unpack: it ends after {written:,} bytes, although its zip header declares {declared:,} (a damaged "
            "zip?); nothing of it was kept."
        )
    if crc != info.CRC:
        return "Cannot unpack: its content does not match its CRC-32 (a damaged zip?); nothing of it was kept."
    return None


# ---------------------------------------------------------------------------------------------
# One file


def _sha256(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    remaining = size
    with path.open("rb") as f:
        while remaining > 0:
            chunk = f.read(min(1024 * 1024, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    return digest.hexdigest()


def _make_parser(fmt: str, *, agent: str, path: Path) -> Parser:
    return format_registry.make_parser(fmt, agent=agent, path=path)


def import_file(*, path: Path, name: str | None = None, replace_changed: bool = True) -> FileImport | Rejected:
    """Import one file; ``name`` is how it is identified (its path, or an upload's relative name).

    A file whose name is known and whose content only grew imports its new lines. A known path whose
    content changed otherwise is replaced when ``replace_changed`` (a file on disk was rewritten); uploads
    pass False, since two different uploads may share a name (every klaude session is ``events.jsonl``).

    Safe to run concurrently with itself: the database refuses a second copy of the same content
    (``sourcefile_unique_content``), and the import that loses the race looks again and finds the winner's.
    """
    name = _text(name or str(path.resolve()), PATH_MAX)  # a name longer than the column is cut, not refused
    for _ in range(CONFLICT_RETRIES):
        try:
            outcome = _import_file(path=path, name=name, replace_changed=replace_changed)
        except _Conflict:
            continue  # what is stored changed under this import: decide again from the stored rows
        if isinstance(outcome, FileImport) and outcome.created and outcome.agent == MAIN and outcome.session:
            _adopt_waiting_files(fmt=outcome.format, parent=outcome.session)
        return outcome
    return Rejected(
        path=name,
        message="The file could not be stored: it kept conflicting with rows stored at the same time (another "
        "import of the same file?). Nothing of it was kept; import it again.",
    )


def _import_file(*, path: Path, name: str, replace_changed: bool) -> FileImport | Rejected:
    try:
        size = path.stat().st_size
        if size == 0:
            return Rejected(path=name, message="The file is empty.")
        with path.open("rb") as f:
            head = read_head(f)
        fmt = detect_format(head)
        link = format_registry.parent_link(fmt, head=head, path=path)
    except NotASession as exc:
        return Rejected(path=name, message=str(exc), waiting=isinstance(exc, StillBeingWritten))
    except OSError as exc:
        return Rejected(path=name, message=f"Cannot read the file: {exc.strerror or exc}")
    except Exception as exc:  # detection is total by test; should a format module still fail, the batch goes on
        logger.exception("recognising %s failed", name)
        return Rejected(
            path=name, message=f"The format could not be recognised ({type(exc).__name__}); see the server log."
        )

    agent = MAIN
    parent: models.Session | None = None
    if link is not None:
        parent = _find_parent(fmt=fmt, link=link)
        agent = MAIN if parent is None and link.alone_without_parent else link.agent

    same_name = list(models.SourceFile.objects.filter(path=name).order_by("id"))
    if parent is not None and len(same_name) == 1 and _waits_for_a_parent(same_name[0], parent=parent):
        return _join_parent(path=path, name=name, fmt=fmt, agent=agent, waiting=same_name[0], parent=parent)
    for existing in same_name:
        if existing.size == size and _sha256(path, size) == existing.sha256:
            return FileImport(path=name, format=fmt, session=existing.session_id, created=False, lines=0, agent=agent)
        if size > existing.size and _sha256(path, existing.size) == existing.sha256:
            return _store(path=path, name=name, fmt=fmt, agent=existing.agent, file=existing, append=True)
    if len(same_name) == 1 and replace_changed:
        # The file at this path was rewritten, not appended to: its rows are replaced.
        return _store(path=path, name=name, fmt=fmt, agent=same_name[0].agent, file=same_name[0], append=False)
    return _store(path=path, name=name, fmt=fmt, agent=agent, parent=parent)


def _waits_for_a_parent(file: models.SourceFile, *, parent: models.Session) -> bool:
    """Whether ``file``, which names ``parent`` as its parent, was imported before it and so made a session of its
    own (a subagent or forked file alone in its session). One a reviewer ran compactions on stays: its runs and
    reviews would go with it."""
    return (
        file.session_id != parent.pk
        and not models.SourceFile.objects.filter(session_id=file.session_id).exclude(pk=file.pk).exists()
        and not models.CompactionRun.objects.filter(session_id=file.session_id).exists()
    )


class _JoinFailed(Exception):
    def __init__(self, outcome: Rejected) -> None:
        self.outcome = outcome


def _join_parent(
    *, path: Path, name: str, fmt: str, agent: str, waiting: models.SourceFile, parent: models.Session
) -> FileImport | Rejected:
    """A subagent or forked file imported before its parent made a session of its own; now that the parent is stored,
    the file joins it as it would had the parent come first (an import is judged by what one import of the final
    files stores, whatever the order they came in): the session it made goes, and the file is imported into the
    parent. One transaction: a failure leaves the file where it was."""
    try:
        with transaction.atomic():
            waiting.session.delete()
            outcome = _store(path=path, name=name, fmt=fmt, agent=agent, parent=parent)
            if isinstance(outcome, Rejected):
                raise _JoinFailed(outcome)
    except _JoinFailed as failed:
        return failed.outcome
    return outcome


def _adopt_waiting_files(*, fmt: str, parent: int) -> None:
    """Files on disk that were imported before ``parent`` (a main session just created) and wait for a parent in a
    session of their own with no main file (a subagent transcript): each that names ``parent`` is imported again, and
    joins it (``_join_parent``). A file only known from an upload is left as it is; a file that waits as a main
    session itself (``ParentLink.alone_without_parent``: a subagent or forked rollout) joins at its next import."""
    waiting = (
        models.SourceFile.objects.filter(session__format=fmt)
        .exclude(agent=MAIN)
        .exclude(session_id=parent)
        .exclude(session__files__agent=MAIN)
        .order_by("id")
    )
    for file in waiting:
        on_disk = Path(file.path)
        if not on_disk.is_absolute():  # an upload's name
            continue
        try:
            with on_disk.open("rb") as f:
                head = read_head(f)  # its first lines only: most waiting files name another parent
            link = format_registry.parent_link(fmt, head=head, path=on_disk)
        except (OSError, ValueError):  # gone (an upload's name, a deleted file) or not readable: left as it is
            continue
        found = _find_parent(fmt=fmt, link=link) if link is not None else None
        if found is not None and found.pk == parent:
            import_file(path=on_disk)


def _check_constraints_as_rows_arrive() -> None:
    """On PostgreSQL, check this transaction's foreign keys as its rows arrive, not all at its commit.

    Django declares them DEFERRABLE INITIALLY DEFERRED. Deferred, the 53 MB session's checks (40,000 before
    migration 0019, one per key of each record and call) ran at the commit, 0.13 s in which the importing process
    only waited; immediate, the server makes them while that process is still parsing (docs/performance.md). Since
    migration 0021 records and calls have no checked key; the file's chunks, events and line issues do. A
    violation fails the import either way, and rolls it back."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _find_parent(*, fmt: str, link: ParentLink) -> models.Session | None:
    """The main session a subagent or forked file belongs to: by the parent's session id, else by the file
    the agent's folder layout puts the parent in."""
    if link.parent_id:
        found = models.Session.objects.filter(format=fmt, external_id=link.parent_id).order_by("id").first()
        if found is not None:
            return found
    if link.parent_file is not None:
        source = models.SourceFile.objects.filter(path=str(link.parent_file.resolve())).first()
        if source is not None:
            return source.session
    return None


_PAUSES = 0  # imports running with the collector paused, in this process's threads
_PAUSES_LOCK = threading.Lock()


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while an import runs; the collector as it was found once every import ends.

    Imports run in the watcher, the worker and ``manage.py`` commands, never in a request thread: the collector
    is the whole process's, and a request pausing it would pause it for every other request too."""
    global _PAUSES
    with _PAUSES_LOCK:
        if _PAUSES == 0 and not gc.isenabled():
            owner = False  # someone else turned collection off: leave it as found
        else:
            owner = True
            _PAUSES += 1
            gc.disable()
    try:
        yield
    finally:
        if owner:
            with _PAUSES_LOCK:
                _PAUSES -= 1
                if _PAUSES == 0:
                    gc.enable()


# SQLite's page cache of the importing connection while an import runs, in KiB: the default (2 MiB) spilled the 53 MB
# session's pages into the write-ahead log mid-transaction, each written again as it changed; at 64 MiB its import
# wrote 4,442 pages instead of 6,055 and read back 1,500 instead of 3,104 (strace, docs/performance.md). Given back
# when the import ends: the watcher and the worker keep their connection.
IMPORT_PAGE_CACHE_KIB = 64 * 1024


@contextmanager
def _import_page_cache() -> Iterator[None]:
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        before = cursor.execute("PRAGMA cache_size").fetchone()[0]
        cursor.execute(f"PRAGMA cache_size = -{IMPORT_PAGE_CACHE_KIB}")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA cache_size = {int(before)}")
        except DatabaseError:  # the connection failed with the import: its own error is the one to report
            logger.warning("could not give back the import's page cache", exc_info=True)


# An import makes and frees millions of objects that hold no cycles (each line's JSON, its record, its row): the
# cyclic collector walked the batch being built, 90 times in the 53 MB import, and once the parse was done, every
# call and event it kept (10-11 ms). Paused around the call, so the import's objects are gone when it resumes
# (0.03 s of the 53 MB import; docs/performance.md).
@cycle_collection_paused()
def _store(
    *,
    path: Path,
    name: str,
    fmt: str,
    agent: str,
    parent: models.Session | None = None,
    file: models.SourceFile | None = None,
    append: bool = False,
) -> FileImport | Rejected:
    try:
        with _import_page_cache(), transaction.atomic():
            writer = _FileWriter.open(name=name, fmt=fmt, agent=agent, parent=parent, file=file, append=append)
            _check_constraints_as_rows_arrive()
            info = _read_and_store(writer, path=path, fmt=fmt, agent=agent)
            writer.finish(info)
    except _SameContent as same:
        # Hashing happens while storing (one read of the file); a copy under another name rolls back.
        return FileImport(path=name, format=fmt, session=same.session_id, created=False, lines=0, agent=agent)
    except NotASession as exc:
        return Rejected(path=name, message=str(exc))
    except OSError as exc:
        return Rejected(path=name, message=f"Cannot read the file: {exc.strerror or exc}")
    except IntegrityError as exc:
        if _is_unique_violation(exc):
            # A concurrent import stored the same rows first (its transaction committed while this one ran).
            logger.info("import of %s conflicted with a concurrent one: %s", name, exc)
            raise _Conflict() from exc
        # Any other constraint (a check) fails the same way whatever runs beside it: trying again would not help.
        logger.exception("import of %s failed", name)
        return Rejected(path=name, message=_FAILED.format(why="a database error"))
    except Exception as exc:  # a parser or database failure: the transaction rolled back, the batch goes on
        logger.exception("import of %s failed", name)
        # A database's own wording (SQL, constraint names) is for the log, not for the person importing.
        why = "a database error" if isinstance(exc, DatabaseError) else f"{type(exc).__name__}: {exc}"
        return Rejected(path=name, message=_FAILED.format(why=why))
    session_id = writer.session.pk
    index = not writer.session.search_ready
    transaction.on_commit(lambda: _enqueue_estimates(session_id, index=index))
    return FileImport(
        path=name,
        format=fmt,
        session=session_id,
        created=writer.created,
        lines=writer.lines_stored,
        errors=[{"line": e.line, "message": e.message} for e in writer.errors],
        agent=agent,
        warnings=writer.warnings,
    )


_FAILED = "The import failed and nothing of it was kept ({why}). The details are in the server log."


def _is_unique_violation(exc: IntegrityError) -> bool:
    """Whether the database refused a second copy of unique rows (what a concurrent import of the same file causes),
    rather than a value (a check, a foreign key)."""
    cause = exc.__cause__
    return getattr(cause, "sqlstate", None) == "23505" or "UNIQUE constraint failed" in str(exc)


def _read_and_store(writer: _FileWriter, *, path: Path, fmt: str, agent: str) -> SessionInfo:
    """Store the file's records and bytes; what the parser learned."""
    parser = _make_parser(fmt, agent=agent, path=path)
    # Unbuffered: the writer reads blocks of RAW_CHUNK_BYTES (read_settled_lines), which a buffer would copy.
    with path.open("rb", buffering=0) as f:
        writer.consume(writer.reader(parser, f))
    return parser.info


def _enqueue_estimates(session_id: int, *, index: bool = False) -> None:
    try:
        if index:  # first: a search finds the session's records once this is done
            index_search_task.enqueue(session_id)
        estimate_tokens_task.enqueue(session_id)
    except Exception:  # the import stands even if the queue is unavailable; estimates can be redone
        logger.exception("could not enqueue token estimates for session %s", session_id)


MESSAGE_COLUMNS = (
    "session_id",
    "file_id",
    "seq",
    "agent",
    "line",
    "role",
    "kind",
    "raw_type",
    "uuid",
    "parent_uuid",
    "timestamp",
    "model",
    "call_number",
    "blocks_json",
    "data_json",
    "raw",
    "chars",
    "search_text",
)
CALL_COLUMNS = (
    "session_id",
    "file_id",
    "agent",
    "number",
    "key",
    "seq",
    "line",
    "model",
    "timestamp",
    "input_tokens",
    "cache_creation_tokens",
    "cache_creation_1h_tokens",
    "cache_read_tokens",
    "output_tokens",
    "context",
)


def _text(value: str | None, limit: int | None = None) -> str:
    """A string as a column can hold it: PostgreSQL text cannot contain NUL, and columns have a length."""
    value = (value or "").replace("\x00", "\ufffd")
    return value[:limit] if limit else value


def _column_types(db: BaseDatabaseWrapper, table: str, columns: tuple[str, ...]) -> list[int]:
    """PostgreSQL's type oid of each of ``columns``, as the database has them (a binary COPY must name them).

    Asked once per process and table: a column's type changes only by a migration, which runs in a process of its
    own, and the oids of built-in types are the same in every database. Asking per batch cost a round trip each."""
    key = (db.alias, table, columns)
    if key not in _COLUMN_TYPES:
        with db.connection.cursor() as cursor:
            cursor.execute(
                "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0",
                [db.ops.quote_name(table)],
            )
            oids = dict(cursor.fetchall())
        _COLUMN_TYPES[key] = [oids[column] for column in columns]
    return _COLUMN_TYPES[key]


_COLUMN_TYPES: dict[tuple[str, str, tuple[str, ...]], list[int]] = {}


def _insert_rows(
    model: type[Model], columns: tuple[str, ...], rows: list[tuple[Any, ...]], *, db: BaseDatabaseWrapper = connection
) -> None:
    """Insert many rows at once, bypassing per-object ORM work (the import's hot path).

    PostgreSQL gets COPY; other databases executemany on the raw DB-API cursor. Values go to the driver as they
    are: times as ``_stored_time`` made them for ``db``. Both run inside the caller's transaction, so an import
    stays all or nothing. ``db`` is the caller's connection: the import runs this in its writer thread
    (``_Writes``), which must use the importing thread's connection and transaction, not one of its own.
    """
    if not rows:
        return
    table = db.ops.quote_name(model._meta.db_table)
    cols = ", ".join(db.ops.quote_name(c) for c in columns)
    raw = db.connection
    if db.vendor == "postgresql":
        # Binary COPY: values go out as they are, where the text format escapes every byte of the JSON and hex-
        # encodes the raw chunks (twice their size on the wire, decoded again by the server).
        types = _column_types(db, model._meta.db_table, columns)
        with raw.cursor() as cursor, cursor.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(row)
        return
    placeholder = "?" if db.vendor == "sqlite" else "%s"
    cursor = raw.cursor()
    try:
        cursor.executemany(f"INSERT INTO {table} ({cols}) VALUES ({', '.join([placeholder] * len(columns))})", rows)
    finally:
        cursor.close()


def _sqlite_utc_text(value: datetime | None) -> str | None:
    """What Django's SQLite backend stores for an aware datetime when its connection's zone is UTC (naive UTC text,
    ``adapt_datetimefield_value``), without its checks per value: the import's timestamps are all aware."""
    if value is None:
        return None
    if value.tzinfo is not UTC:  # ``_timestamp`` gives UTC times already
        value = value.astimezone(UTC)
    # isoformat of a UTC time ends in "+00:00": cut, it is str() of the naive time, without making that time.
    return value.isoformat(" ")[:-6]


# The form Claude Code and most agents write their times in (UTC, milliseconds, "Z"): ``_sqlite_time_text`` reads
# Django's text off it.
_MILLISECONDS_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)


def _sqlite_time_text(value: str | None) -> str | None:
    """``_sqlite_utc_text(_timestamp(value))``: Django's SQLite text of an agent's timestamp (ValueError for one no
    database can hold).

    A time in the usual form is the same digits, "2025-01-02T03:04:05.678Z" -> "2025-01-02 03:04:05.678000" (and no
    fraction for a whole second, as str() writes it), read off the string once the time is known valid: formatting
    the time cost 3 % of the import's instructions."""
    if value is not None and _MILLISECONDS_Z.fullmatch(value):
        try:
            datetime.fromisoformat(value)  # its digits make a time (a UTC time in this form is always storable)
        except ValueError:
            return None  # as _timestamp has it: a time that cannot be read is no time
        return f"{value[:10]} {value[11:19]}" if value.endswith(".000Z") else f"{value[:10]} {value[11:23]}000"
    return _sqlite_utc_text(_timestamp(value))


def _stored_time(db: BaseDatabaseWrapper) -> Callable[[str | None], Any]:
    """How an import's row hands an agent's timestamp to ``db``'s driver (``_insert_rows`` sends values as they
    are); the function raises ValueError for a time no database can hold.

    SQLite's driver gets Django's text (naive UTC), made once per value as the row is built: adapting the rows
    again before the insert copied every row. The other drivers adapt a datetime themselves."""
    if db.vendor != "sqlite":
        return _timestamp
    if settings.USE_TZ and db.timezone == UTC:
        return _sqlite_time_text
    adapt = db.ops.adapt_datetimefield_value
    return lambda value: adapt(_timestamp(value))


RAW_COLUMNS = ("file_id", "index", "data")
# Batches handed to the writer thread and not yet stored (message batches, and the compressed chunks between them):
# memory stays flat, at most 4 x BATCH_BYTES of records (the 53 MB session's batches are 7 MB). At 2, the 53 MB
# import waited 0.1 s in mid-parse for PostgreSQL's server, which gets less of the cores while the parse runs and
# catches up at its end (docs/performance.md).
WRITES_IN_FLIGHT = 4
# Chunks of input handed to the compressor's thread and not yet hashed and compressed: at most 48 MiB, so memory
# stays flat, yet the parsing rarely waits for that thread, which shares the other core with PostgreSQL's server
# (at 2 the 53 MB import's parsing waited about 0.1 s for it; at 6, 0.03 s less in all: docs/performance.md).
RAW_JOBS_IN_FLIGHT = 6


class _Writes:
    """The import's inserts, run in order by one thread while the importing thread goes on parsing.

    The database work of a batch (PostgreSQL's COPY, SQLite's executemany: both release the GIL) overlaps
    the parsing of the next. The thread uses the importing thread's connection, so every row is in the
    import's one transaction; the importing thread issues no query of its own until ``drain``. A failure
    is raised in the importing thread at its next ``submit`` or ``drain``, and the transaction rolls back.
    """

    def __init__(self, db: BaseDatabaseWrapper) -> None:
        db.ensure_connection()
        self._db = db
        # Only PostgreSQL's COPY gains: its rows go out in large buffers and the server works on its own core.
        # SQLite's executemany gives up and takes back the GIL for every row, and each taking back waits for the
        # parsing thread's switch interval (5 ms): threaded, a batch took seconds.
        self._pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-writes") if db.vendor == "postgresql" else None
        )
        self._pending: list[Future[None]] = []

    def submit(self, model: type[Model], columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if self._pool is None:
            _insert_rows(model, columns, rows, db=self._db)
            return
        while len(self._pending) >= WRITES_IN_FLIGHT:
            self._pending.pop(0).result()
        self._pending.append(self._pool.submit(self._insert, model, columns, rows))

    def _insert(self, model: type[Model], columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
        with self._db.wrap_database_errors:  # the same exceptions as a query of the importing thread
            _insert_rows(model, columns, rows, db=self._db)

    def drain(self) -> None:
        """Wait until every submitted row is stored (raising the first failure)."""
        while self._pending:
            self._pending.pop(0).result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


class _SameContent(Exception):
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id


class _Conflict(Exception):
    """The database refused this import's rows because a concurrent import stored them first."""


def _stored_block(b: Block) -> dict[str, Any]:
    """A block as ``blocks_json`` keeps it: its fields that say something (``Message.blocks`` reads it back)."""
    stored: dict[str, Any] = {"kind": b.kind} if b.kind else {}
    if b.text:
        stored["text"] = b.text
    if b.tool_id:
        stored["tool_id"] = b.tool_id
    if b.tool_name:
        stored["tool_name"] = b.tool_name
    if b.is_error:
        stored["is_error"] = b.is_error
    if b.media_type:
        stored["media_type"] = b.media_type
    return stored


def _timestamp(value: str | None) -> datetime | None:
    """A timestamp as every database stores it (in UTC); raises ValueError for one no database can hold."""
    moment = parse_timestamp(value)
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC)  # Django stores UTC: year 1 at +01:00 is year 0 there, which does not exist
    except OverflowError:
        raise ValueError(f"timestamp {value!r} is out of range") from None


def _time_or_none[T](make: Callable[[str | None], T], value: str | None) -> T | None:
    """``make(value)`` (``_timestamp``, or an import's ``_stored_time``) for summaries of many records (session start
    and end, a call): an unstorable time is no time; the record that carried it has its own line error."""
    try:
        return make(value)
    except ValueError:
        return None


class _FileWriter:
    """Stores one file's records; used inside a transaction."""

    def __init__(self, *, session: models.Session, file: models.SourceFile, created: bool, skip_lines: int) -> None:
        self.session = session
        self.file = file
        self._session_id, self._file_id = session.pk, file.pk  # every row names them: read once, not per row
        self.created = created
        self.skip_lines = skip_lines  # lines already stored (incremental import)
        # Lines of those with an error: a record of one the store refused feeds no call now either (it did not when it
        # was new; one-shot imports of the file agree). Their records are encoded again to tell; the others are not.
        self._refused_before = (
            set(models.LineIssue.objects.filter(file=file).values_list("line", flat=True)) if skip_lines else set()
        )
        self.errors: list[LineError] = []
        self.errors_not_kept = 0  # past IMPORT_MAX_LINE_ERRORS only counted, so a file of garbage stays small
        self.warnings: list[str] = []
        self.lines_stored = 0
        self.tracker = CallTracker()
        # The next record's number: after the session's last (0 is a number: a session of one record has seq 0).
        last_seq = models.Message.objects.filter(session=session).aggregate(m=Max("seq"))["m"]
        self.next_seq = 0 if last_seq is None else last_seq + 1
        self._messages: list[tuple[Any, ...]] = []
        self._batch_bytes = 0
        self._max_line_bytes = limit("IMPORT_MAX_LINE_BYTES")
        self._max_errors = limit("IMPORT_MAX_LINE_ERRORS")
        self._call_seq: dict[tuple[str, str], int] = {}
        # zstd and hashlib release the GIL: a file larger than a chunk is compressed and hashed in this thread while
        # parsing goes on. Started at the first full chunk, so a small file costs no thread.
        self._compressor: ThreadPoolExecutor | None = None
        self._chunk_jobs: list[Future[bytes | None]] = []  # each chunk's stored frame (None: stored before)
        self._zstd = zstandard.ZstdCompressor(level=RAW_ZSTD_LEVEL)  # used by one thread at a time
        self._events: list[models.ContextEvent] = []
        self._last_seq = self.next_seq - 1
        self._hash = hashlib.sha256()
        self._consumed = 0
        self._lines_read = 0
        self._raw_index = models.RawChunk.objects.filter(file=file).count()
        # Pieces of the file as the reader settles them (views of its blocks): hashed and compressed without a copy.
        self._chunk: list[bytes | memoryview] = []
        self._chunk_bytes = 0
        self._reading = True  # while the file is being read (a full chunk then goes to the compressor's thread)
        self._writes = _Writes(connections[DEFAULT_DB_ALIAS])  # this thread's wrapper, not the per-thread proxy
        self._stored_time = _stored_time(connections[DEFAULT_DB_ALIAS])
        self._index_after = 0  # the last Message id before this import's (for the search index)
        self._search_chars = 0  # search text this import stored (a small import indexes itself)
        # What the summary of a session this import creates counts, tallied as its calls are stored (``_close_calls``).
        self._tally = SessionTally(prices=settings.MODEL_PRICES)
        self._call_rows: list[tuple[Any, ...]] = []
        self._embedded: list[ApiCall] = []
        self._unknown_stored = 0
        self._created_stats: SessionStats | None = None
        self._read: SettledRead | None = None
        # Records of lines an earlier import stored that the parser gave only after reading lines past them (``_late``).
        self._late: list[tuple[Message, int | None, bool]] = []  # (record, its call's number, whether it starts it)
        self._carried = _CarriedCopies.for_file(session=session, file=file, created=created)

    @classmethod
    def open(
        cls,
        *,
        name: str,
        fmt: str,
        agent: str,
        parent: models.Session | None,
        file: models.SourceFile | None,
        append: bool,
    ) -> _FileWriter:
        if file is not None and append:
            return cls(session=file.session, file=file, created=False, skip_lines=file.lines)
        if file is not None:
            # The content changed in place (not an append): replace what this file contributed.
            # The records by session too: their file key has no index of its own (models.Message.file).
            models.Message.objects.filter(session=file.session, file=file).delete()
            for model in (models.ApiCall, models.ContextEvent, models.LineIssue, models.RawChunk):
                model.objects.filter(file=file).delete()
            file.size, file.lines, file.sha256 = 0, 0, ""
            if file.agent == MAIN:
                # What the session knew of itself came from this file's old content too (``_apply_info`` keeps a
                # column the parser leaves empty): a one-shot import of the new content would not have it.
                for column, empty in SESSION_INFO_EMPTY.items():
                    setattr(file.session, column, empty)
            return cls(session=file.session, file=file, created=False, skip_lines=0)
        created = parent is None
        session = parent or models.Session.objects.create(format=fmt)
        if parent is not None and agent != MAIN:
            _drop_carried_copies(session=session, agent=agent)
        file = models.SourceFile.objects.create(session=session, agent=agent, path=name, sha256="")
        return cls(session=session, file=file, created=created, skip_lines=0)

    # -- reading --------------------------------------------------------------------------

    def reader(self, parser: Parser, f: BinaryIO) -> SettledRead:
        """The file's records, its bytes hashed and kept as they pass; no line held longer than the limit."""
        return SettledRead(
            parser, f, settle=self._accept_bytes, max_line_bytes=self._max_line_bytes, block_bytes=RAW_CHUNK_BYTES
        )

    def _accept_bytes(self, piece: bytes | memoryview) -> None:
        """Bytes of the file, in order, to hash and (those not stored by an earlier import) to store."""
        self._chunk.append(piece)
        self._chunk_bytes += len(piece)
        if self._chunk_bytes >= RAW_CHUNK_BYTES:
            self._flush_chunk()

    def _background(self, fn: Callable[..., _T], *args: Any) -> Future[_T]:
        """``fn(*args)`` in the compressor's thread; done at once when the file ended before a chunk filled."""
        if self._compressor is None and self._reading:
            self._compressor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-compress")
        if self._compressor is not None:
            return self._compressor.submit(fn, *args)
        done: Future[_T] = Future()
        done.set_result(fn(*args))
        return done

    def _flush_chunk(self) -> None:
        if not self._chunk:
            return
        # Compressed chunks go to the database as they are ready, not all after the last line: there, PostgreSQL's
        # server took 0.1 s to store the 53 MB import's 11 MB of chunks while the import only waited.
        self._store_chunk_jobs(pending=RAW_JOBS_IN_FLIGHT - 1)
        stored_before = min(max(self.file.size - self._consumed, 0), self._chunk_bytes)  # an append's known bytes
        job = self._background(_hash_and_compress, self._hash, self._zstd, self._chunk, stored_before)
        self._chunk_jobs.append(job)
        self._consumed += self._chunk_bytes
        self._chunk, self._chunk_bytes = [], 0

    def _store_chunk_jobs(self, *, pending: int = 0) -> None:
        """Store the compressed chunks in file order: each one done, and the oldest (waiting for it) while more than
        ``pending`` chunks remain in the compressor's hands."""
        jobs = self._chunk_jobs
        while jobs and (len(jobs) > pending or jobs[0].done()):
            frame = jobs.pop(0).result()
            if frame is not None:
                self._writes.submit(models.RawChunk, RAW_COLUMNS, [(self._file_id, self._raw_index, frame)])
                self._raw_index += 1

    def consume(self, read: SettledRead) -> None:
        try:
            self._consume(read)
        finally:
            self._writes.close()
            if self._compressor is not None:
                self._compressor.shutdown(wait=True, cancel_futures=True)

    def _consume(self, read: SettledRead) -> None:
        known_calls = {
            (c.agent, c.key): c
            for c in models.ApiCall.objects.filter(file=self.file).only("id", "agent", "key", "output_tokens")
        }
        # Before any write is queued (PostgreSQL's writes run in another thread on this connection). Ids only grow
        # (a sequence; AUTOINCREMENT on SQLite), and the index reads only this session's rows after this one.
        self._index_after = models.Message.objects.aggregate(m=Max("id"))["m"] or 0
        self._read = read
        for record in read.records():
            if isinstance(record, Message):
                self._add_message(record)
            elif isinstance(record, ContextEvent):
                self._add_event(record)
            elif isinstance(record, LineError):
                self._add_error(record)
        self._reading = False
        self._lines_read = read.lines_read
        partial = read.partial_line
        if partial:
            self.warnings.append(
                f"line {partial}: the last line is incomplete (no newline, not valid JSON: the agent may still be "
                "writing it) and was not imported; import the file again once it is complete."
            )
        self._flush_messages()
        self._flush_chunk()
        if self.created:
            # A session this import created holds no other file's calls: the last go to the writer behind the last
            # records, and its summary is tallied while the database stores them (docs/performance.md).
            self._close_calls(self.tracker.close_oldest(keep=0))
            self._writes.submit(models.ApiCall, CALL_COLUMNS, self._call_rows)
            self._call_rows = []
            self._created_stats = None if self.tracker.raised else self._tally_created()
        self._store_chunk_jobs()
        self._writes.drain()  # from here on, queries run in this thread again
        self._raise_closed_outputs()
        self._check_same_content()
        self._index_for_search()
        if not self.created:
            self._restate_late()
            self._store_calls(known_calls)
            self._writes.drain()

    def _sha256(self) -> str:
        return self._hash.hexdigest()

    def _check_same_content(self) -> None:
        """A file whose whole content is already stored (under any name) is not stored twice.

        Checked once the file is read (its hash is complete) and before the calls are stored, which a
        second copy of a subagent file would collide with. ``sourcefile_unique_content`` makes this hold
        under concurrency too.
        """
        same = (
            models.SourceFile.objects.filter(sha256=self._sha256(), size=self._consumed)
            .exclude(pk=self.file.pk)
            .first()
        )
        if same is not None:
            raise _SameContent(same.session_id)

    def _add_message(self, record: Message) -> None:
        if self._carried.superseded(record):
            return
        # A record the parser read but a column cannot hold is that line's error; the rest of the file imports.
        problem = usage_problem(record.usage) if record.usage is not None else None
        encoded: tuple[str, str, Any, str] | None = None
        if problem is None and (record.line > self.skip_lines or record.line in self._refused_before):
            try:
                encoded = self._encode(record)
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:  # orjson's errors are ValueError
                problem = f"cannot store this record ({exc}); it was not imported"
            if record.line <= self.skip_lines:
                encoded = None  # stored, or refused and reported, by the import that read its line
        if problem is not None:
            self._add_error(LineError(record.line, problem))
            return
        # Every record feeds the tracker: a reply without usage is a call of a log that records none (KHAELOR).
        starts_call = self.tracker.add(record) is not None
        if starts_call and record.call_key is not None:
            self._call_seq[(record.agent, record.call_key)] = self.next_seq
            if self.created and self.tracker.open_calls > 2 * OPEN_CALLS:
                self._close_calls(self.tracker.close_oldest(keep=OPEN_CALLS))
        number = self.tracker.number_of(record) if record.usage is not None else None
        if encoded is None:
            # A line stored by an earlier import: it only feeds the call tracker, unless the parser held it until it
            # read lines that import had not (``_late``).
            if self._read is not None and self._read.lines_read > self.skip_lines:
                self._late.append((record, number, starts_call))
            return
        blocks_json, data_json, timestamp, readable = encoded
        self._search_chars += len(readable)
        self._last_seq = self.next_seq
        self._messages.append(
            (
                self._session_id,
                self._file_id,
                self.next_seq,
                _text(record.agent, 100),
                record.line,
                record.role,
                record.kind,
                _text(record.raw_type, 100),
                _text(record.uuid, 100),
                _text(record.parent_uuid, 100),
                timestamp,
                _text(record.model, 200),
                number,
                blocks_json,
                data_json,
                _text(record.raw),
                min(sum([len(b.text) for b in record.blocks]), INT_MAX),
                readable,
            )
        )
        self._batch_bytes += len(blocks_json) + len(data_json) + len(record.raw or "")
        self.next_seq += 1
        self.lines_stored += 1
        # Kept for a session this import creates only: another import's summary is read from all of the session's rows.
        if self.created and record.kind == "unknown":
            self._unknown_stored += 1
        elif record.raw_type == "progress" and (response := embedded_response(record)) is not None:
            # As selectors.calls.session_stats reads them back (progress rows only): the created session's summary
            # and usage cells; for another import, whether its cells must read the inline responses again.
            self._embedded.append(response)
        if len(self._messages) >= BATCH or self._batch_bytes >= BATCH_BYTES:
            self._flush_messages()

    def _restate_late(self) -> None:
        """Records an earlier import stored while the parser still held them, as they read now.

        A parser may hold a line's records until a later line says what they belong to (an agent may write a
        response's items before the token count of its call). The import that ended between the two stored them
        as the parser gave them at the end of the file, without their call; this import's parser gives them again
        once it has read past them, with it. Their rows take the call and the data, and the call starts at their
        seq, as a one-shot import of the file has them."""
        for record, number, starts_call in self._late:
            rows = models.Message.objects.filter(
                session=self.session, file=self.file, line=record.line, raw_type=_text(record.raw_type, 100)
            )
            data_json = orjson.dumps(record.data, default=str).decode() if record.data else "{}"
            rows.update(call_number=number, data_json=data_json)
            seq = rows.order_by("seq").values_list("seq", flat=True).first()
            if starts_call and record.call_key is not None and seq is not None:
                self._call_seq[(record.agent, record.call_key)] = seq

    def _encode(self, record: Message) -> tuple[str, str, Any, str]:
        """The record's JSON columns, timestamp (as stored) and search text; raises for content a database cannot
        hold."""
        blocks_json = orjson.dumps([_stored_block(b) for b in record.blocks]).decode()
        data_json = orjson.dumps(record.data, default=str).decode() if record.data else "{}"
        readable = "" if record.kind == "bookkeeping" else blocks_search_text(record.blocks)
        return blocks_json, data_json, self._stored_time(record.timestamp), readable

    def _add_event(self, event: ContextEvent) -> None:
        if event.line <= self.skip_lines or event.agent in self._carried.own_files:
            return
        problem = next(
            filter(
                None,
                (
                    count_problem(f"the {event.kind} event's {name}", getattr(event, name))
                    for name in ("pre_tokens", "post_tokens", "tokens_saved")
                ),
            ),
            None,
        )
        if problem is None:
            try:
                row = models.ContextEvent(
                    session=self.session,
                    file=self.file,
                    agent=_text(event.agent, 100),
                    kind=_text(event.kind, 20),
                    seq=max(self._last_seq, 0),
                    line=event.line,
                    after_call=self.tracker.count(event.agent),
                    timestamp=_timestamp(event.timestamp),
                    trigger=_text(event.trigger, 50),
                    pre_tokens=event.pre_tokens,
                    post_tokens=event.post_tokens,
                    tokens_saved=event.tokens_saved,
                    tool_ids=_json_safe([str(i) for i in event.tool_ids]),
                    message=_text(event.message),
                    data=_json_safe(event.data),
                )
            except (TypeError, ValueError, OverflowError, RecursionError) as exc:
                problem = f"cannot store the {event.kind} event of this line ({exc})"
        if problem is not None:
            self._add_error(LineError(event.line, problem))
            return
        self._events.append(row)

    def _add_error(self, error: LineError) -> None:
        if error.line <= self.skip_lines:
            return
        if len(self.errors) < self._max_errors:
            self.errors.append(error)
        else:
            self.errors_not_kept += 1

    def _flush_messages(self) -> None:
        self._writes.submit(models.Message, MESSAGE_COLUMNS, self._messages)
        self._messages = []
        self._batch_bytes = 0

    def _index_for_search(self) -> None:
        """A small import indexes its records itself (the live watcher's appends are searchable at once); a large
        one leaves them to the task worker (``index_search``): on the 53 MB session FTS5 took about 0.16 s of the
        import (docs/performance.md), PostgreSQL's ``to_tsvector`` over its 12 MB of text about 1.8 s."""
        if not self.lines_stored:
            return
        if self._search_chars > INDEX_INLINE_CHARS or not self.session.search_ready:
            # Left to the worker, which indexes whatever of the session is missing (a subagent file imported
            # after its large main chain waits with it rather than indexing the main chain here).
            self.session.search_ready = False  # saved with the session's summary
            return
        _insert_search_index(session_id=self.session.pk, after=self._index_after)

    def _store_calls(self, known: dict[tuple[str, str], models.ApiCall]) -> None:
        """The calls of an import into a session that existed (an append, a subagent file, a rewritten file), once
        its file is read: a session this import creates stores them as they close (``_close_calls``)."""
        new_calls: list[tuple[Any, ...]] = []
        changed: list[models.ApiCall] = []
        # Calls another file of this session already holds (a second, different version of a subagent file):
        # the database keeps one call per (agent, number), so the copy is this file's line error, not a crash.
        taken = set(
            models.ApiCall.objects.filter(session=self.session).exclude(file=self.file).values_list("agent", "number")
        )
        for call in self.tracker.calls():
            u = call.usage
            if u is None:  # never: the tracker's calls carry their usage
                continue
            existing = known.get((call.agent, call.key))
            if existing is not None:
                # A response split across two imports: its last lines may raise the output count. Only a count that
                # changed is written: a live session's every append used to rewrite all of its calls (0.5 s of a
                # one-line append to the 53 MB session).
                if existing.output_tokens != u.output_tokens:
                    existing.output_tokens = u.output_tokens
                    changed.append(existing)
                continue
            if (call.agent, call.number) in taken:
                self._add_error(
                    LineError(
                        call.line,
                        f"API call {call.number} of agent {call.agent} is already stored from another file of this "
                        "session (another version of the same transcript); this copy is not counted",
                    )
                )
                continue
            new_calls.append(self._call_row(call, u))
        self._writes.submit(models.ApiCall, CALL_COLUMNS, new_calls)
        if changed:
            self._writes.drain()
            models.ApiCall.objects.bulk_update(changed, ["output_tokens"], batch_size=BATCH)

    def _call_row(self, call: ApiCall, u: Usage) -> tuple[Any, ...]:
        """A call as its ``CALL_COLUMNS`` row (``u``: its usage)."""
        return (
            self._session_id,
            self._file_id,
            _text(call.agent, 100),
            call.number,
            _text(call.key, 200),
            self._call_seq.pop((call.agent, call.key), 0),
            call.line,
            _text(call.model, 200),
            _time_or_none(self._stored_time, call.timestamp),
            u.input_tokens,
            u.cache_creation_input_tokens,
            u.cache_creation_1h_input_tokens,
            u.cache_read_input_tokens,
            u.output_tokens,
            u.context,
        )

    def _close_calls(self, calls: list[ApiCall]) -> None:
        """Calls of a session this import creates that no later line raises any more (``CallTracker.close_oldest``):
        stored in batches and tallied for its summary, none kept."""
        for call in calls:
            u = call.usage
            if u is None:  # never: the tracker's calls carry their usage
                continue
            row = self._call_row(call, u)
            self._call_rows.append(row)
            # The summary counts the call as selectors.calls.session_stats reads its row back: the stored texts (a
            # copy only where storing changed one).
            if row[2] != call.agent or row[4] != call.key or row[7] != (call.model or ""):
                call = call_selectors.neutral_call(
                    row[2],
                    row[3],
                    row[4],
                    row[6],
                    row[7],
                    u.input_tokens,
                    u.cache_creation_input_tokens,
                    u.cache_read_input_tokens,
                    u.output_tokens,
                    u.cache_creation_1h_input_tokens,
                )
            self._tally.add(call)
        if len(self._call_rows) >= BATCH:
            self._writes.submit(models.ApiCall, CALL_COLUMNS, self._call_rows)
            self._call_rows = []

    def _raise_closed_outputs(self) -> None:
        """A line of a call stored already that raised its output (a log interleaving more than ``OPEN_CALLS``
        responses): the stored output takes it. The summary is then read back from the rows (``finish``)."""
        for (agent, key), output in self.tracker.raised.items():
            models.ApiCall.objects.filter(file=self.file, agent=_text(agent, 100), key=_text(key, 200)).update(
                output_tokens=Greatest(F("output_tokens"), Value(output))
            )

    # -- finishing ------------------------------------------------------------------------

    def finish(self, info: SessionInfo) -> None:
        if self._events:
            models.ContextEvent.objects.bulk_create(self._events, batch_size=BATCH)
        if self.errors_not_kept:
            last = self.errors[-1].line if self.errors else 0
            self.errors.append(
                LineError(last, f"and {self.errors_not_kept:,} more bad lines after this one, not listed")
            )
        if self.errors:
            models.LineIssue.objects.bulk_create(
                [
                    models.LineIssue(
                        session=self.session, file=self.file, path=self.file.path, line=e.line, message=e.message
                    )
                    for e in self.errors
                ],
                batch_size=BATCH,
            )
        if self.created and self._lines_read == 0 and not self.errors:
            raise NotASession("The file holds no records.")
        self.file.size = self._consumed
        self.file.lines = self._lines_read
        self.file.sha256 = self._sha256()
        self.file.save()
        if self.lines_stored:
            self.session.estimates_ready = False  # the new records have no estimate yet
            # The worker's analysis was of other records: gone, so no reader takes it for this version (a file
            # rewritten with as many records as before kept its record count, and readers compare only that).
            models.SessionAnalysis.objects.filter(session=self.session).delete()
            models.SessionFinding.objects.filter(session=self.session).delete()
        if self.file.agent == MAIN:
            if count_problem("context window", info.context_window) is not None:
                # A value the session's column cannot hold failed the session row, and with it the whole file.
                self.warnings.append(
                    f"the context window the file gives ({info.context_window!r}) is not a count between 0 and "
                    f"{COUNT_MAX:,}; it was not kept"
                )
                info.context_window = None
            _apply_info(self.session, info)
        self._carried.mark_calls(session=self.session, file=self.file)
        stored = None
        if self._created_stats is not None:
            stored = StoredTotals(
                stats=self._created_stats,
                records=self.lines_stored,
                unknown_records=self._unknown_stored,
                size_bytes=self.file.size,
                line_errors=len(self.errors),
            )
        refresh_session_summary(session=self.session, stored=stored)
        self._keep_usage_cells()
        if self.file.agent == MAIN and format_registry.agent_profile(self.session.format).title_records_elsewhere:
            _link_title_records(self.session)

    def _keep_usage_cells(self) -> None:
        """The session's usage cells, made again from its rows (``usage_cells``); a session this import created
        has its inline responses from what it stored, not read back."""
        inline: list[usage_cells.InlineResponse] | None = None
        if self.created:
            inline = [
                usage_cells.InlineResponse(response=r, timestamp=_time_or_none(_timestamp, r.timestamp))
                for r in self._embedded
            ]
        elif not (
            self._embedded
            or any(record.raw_type == "progress" for record, _, _ in self._late)
            or usage_cells.has_inline_cells(session=self.session)
        ):
            # Neither this import nor an earlier one stored an inline response: the session has none to read back
            # (the scan of its progress records was most of the time an append spent on its cells).
            inline = []
        usage_cells.keep_usage_cells(session=self.session, inline=inline)

    def _tally_created(self) -> SessionStats:
        """The statistics of the session this import created, from what it stored: the session holds this file's
        rows and no other, so these are the numbers ``refresh_session_summary`` would read back from them (reading
        them was 0.06-0.27 s of the 53 MB import; ``tests/sessions_app/test_session_stats.py`` compares both on every
        sample and on generated files). With its counts, they are the session's ``StoredTotals`` (``finish``)."""
        # The order selectors.calls.session_stats reads them in: by seq, then as inserted.
        events = call_selectors.listed_events(
            e for e in sorted(self._events, key=lambda e: e.seq) if e.kind in LISTED_EVENT_KINDS
        )
        return self._tally.result(events=events, embedded=self._embedded, responses=self.tracker.responses())


@dataclass(slots=True)
class _CarriedCopies:
    """Subagent records that only a record of the parent carries (``compaction.transcript.CARRIED``: Claude Code's
    ``agent_progress`` copies, docs/formats/claude-code.md): stored as that subagent's own records and calls while
    its own file is not imported; the file, once imported, supersedes them (``_drop_carried_copies``), and a
    parent's later lines add none for it. The calls of the copies are marked ``ApiCall.carried``."""

    own_files: frozenset[str]  # the session's subagents that have a file of their own (only for a main file)
    agents: set[str] = field(default_factory=set)  # agents this import stored carried copies of

    @classmethod
    def for_file(cls, *, session: models.Session, file: models.SourceFile, created: bool) -> _CarriedCopies:
        if created or file.agent != MAIN:
            return cls(own_files=frozenset())
        return cls(
            own_files=frozenset(
                models.SourceFile.objects.filter(session=session).exclude(agent=MAIN).values_list("agent", flat=True)
            )
        )

    def superseded(self, record: Message) -> bool:
        """Whether ``record`` is a carried copy to leave out (its agent's own file is stored); notes the others."""
        if CARRIED not in record.data:
            return False
        if record.agent in self.own_files:
            return True
        self.agents.add(record.agent)
        return False

    def mark_calls(self, *, session: models.Session, file: models.SourceFile) -> None:
        if self.agents:
            models.ApiCall.objects.filter(session=session, file=file, agent__in=self.agents).update(carried=True)


def _drop_carried_copies(*, session: models.Session, agent: str) -> None:
    """A subagent's own file is about to be stored: the copies of its records that its parent's file carried
    (records, calls, events of ``agent`` stored from another file) go, so each of its calls is counted once, from
    the file. The search index drops their rows with them (its delete triggers)."""
    others = models.SourceFile.objects.filter(session=session).exclude(agent=agent).values("id")
    models.Message.objects.filter(session=session, agent=agent, file__in=others).delete()
    for model in (models.ApiCall, models.ContextEvent):
        model.objects.filter(session=session, agent=agent, file__in=others).delete()


@dataclass(frozen=True, slots=True)
class StoredTotals:
    """A session's statistics and counts of its stored rows, as its denormalised columns take them."""

    stats: SessionStats
    records: int
    unknown_records: int
    size_bytes: int
    line_errors: int


def _link_title_records(session: models.Session) -> None:
    """Some agents (their profile's title rule) write files holding only ``summary`` records: a title for another
    conversation, whose
    record the summary's ``leafUuid`` names. Such a file's title goes to that conversation when it is imported
    (unless it has a title record of its own) and the title-only session is no longer listed; until then it
    says what it is (``info["title_record_for"]``)."""
    records = models.Message.objects.filter(session=session)
    # The call count first: a conversation has calls, and is known not to be title-only without a query.
    if session.api_calls_main == 0 and records.exists() and not records.exclude(raw_type="summary").exists():
        leaves = [
            leaf
            for data in records.values_list("data_json", flat=True)
            if isinstance(leaf := orjson.loads(data).get("leafUuid"), str)
        ]
        session.info = {**session.info, "title_record_for": leaves}
        named = models.Message.objects.filter(uuid__in=leaves).exclude(session=session).select_related("session")
        target = named.first()
        if target is not None:
            _attach_title(title_only=session, target=target.session)
        session.save(update_fields=["info"])
        return
    for title_only in models.Session.objects.filter(info__has_key="title_record_for").exclude(pk=session.pk):
        leaves = title_only.info.get("title_record_for") or []
        if title_only.info.get("title_attached_to") == session.pk or (
            leaves and models.Message.objects.filter(session=session, uuid__in=leaves).exists()
        ):
            _attach_title(title_only=title_only, target=session)
            title_only.save(update_fields=["info"])


def _attach_title(*, title_only: models.Session, target: models.Session) -> None:
    if target.info.get("title_from") in (None, "prompt"):  # a summary title beats a first prompt, not a set title
        target.title = title_only.title
        target.info = {**target.info, "title_from": "summary"}
        target.save(update_fields=["title", "info"])
    title_only.info = {**title_only.info, "title_attached_to": target.pk}


def _json_safe(value: Any) -> Any:
    """Plain JSON for a JSONField, with NUL characters (which PostgreSQL's jsonb refuses) escaped away."""
    return orjson.loads(orjson.dumps(value, default=str).replace(b"\\u0000", b"\\ufffd"))


# The session's columns ``_apply_info`` fills from its main file's parser, as a new session has them.
SESSION_INFO_EMPTY: dict[str, Any] = {
    "external_id": "",
    "title": "",
    "project": "",
    "model": "",
    "agent_version": "",
    "context_window": None,
    "started_at": None,
    "ended_at": None,
}


def _apply_info(session: models.Session, info: SessionInfo) -> None:
    session.external_id = _text(info.session_id or session.external_id, 200)
    session.title = _text(info.title or session.title, 500)
    session.project = _text(info.cwd or session.project, 1000)
    session.model = _text(info.model or session.model, 200)
    session.agent_version = _text(info.agent_version or session.agent_version, 50)
    session.context_window = info.context_window or session.context_window
    session.started_at = _time_or_none(_timestamp, info.started_at) or session.started_at
    session.ended_at = _time_or_none(_timestamp, info.ended_at) or session.ended_at
    session.info = _json_safe(info.data)


def refresh_session_summary(*, session: models.Session, stored: StoredTotals | None = None) -> None:
    """Recompute the denormalised columns the list filters and sorts on, from the one statistics definition.

    ``stored``: the same numbers, known by the import that created the session (read from its rows otherwise)."""
    if stored is None:
        stored = _stored_totals(session)
    stats = stored.stats
    session.api_calls_main = stats.api_calls.main
    session.api_calls_side = stats.api_calls.side
    # A log without recorded usage has its peak from the worker's analysis (``analyse_session``), which stays valid
    # while its records do: a refresh that stored none keeps it (an append of half a line reset it to 0 until the
    # analysis ran again). Otherwise the recorded peak; the analysis sets a new estimate for such a log.
    keeps_estimate = session.peak_is_estimate and stats.peak.call is None and stored.records == session.message_count
    if not keeps_estimate:
        session.peak_context = stats.peak.tokens
        session.peak_call = stats.peak.call
        session.peak_is_estimate = False
    session.peak_context_side = stats.max_context.side
    session.message_count = stored.records
    session.size_bytes = stored.size_bytes
    session.line_errors = stored.line_errors
    session.unknown_records = stored.unknown_records
    session.has_compaction = stats.has_compaction
    session.overflowed = stats.overflowed(window=session.window)
    session.compaction_failed = stats.compaction_failed(agent_compacts=_agent_compacts(session))
    session.cost_usd = stats.cost.total_usd
    session.save()


def _stored_totals(session: models.Session) -> StoredTotals:
    """``StoredTotals`` read from the session's rows."""
    # Both counts in one pass over the session's records (on PostgreSQL each pass read 16,000 rows of the heap).
    counts = models.Message.objects.filter(session=session).aggregate(
        records=Count("id"), unknown=Count("id", filter=Q(kind="unknown"))
    )
    return StoredTotals(
        stats=call_selectors.session_stats(session=session),
        records=counts["records"],
        unknown_records=counts["unknown"],
        size_bytes=models.SourceFile.objects.filter(session=session).aggregate(s=Sum("size"))["s"] or 0,
        line_errors=models.LineIssue.objects.filter(session=session).count(),
    )


def _agent_compacts(session: models.Session) -> bool:
    """Whether the session's agent, at its version, compacts at all (its strategy says)."""
    from compaction.strategies.registry import build_strategy, strategy_for_format

    strategy = build_strategy(strategy_for_format(session.format), info=None, overrides={})
    return strategy.compacts(version=session.agent_version or None)


# Search text an import indexes itself; more is left to the task worker. On the 53 MB session's 12 MB of text,
# FTS5 took about 0.16 s and PostgreSQL's 'simple' to_tsvector (through sessions_app_search_words, migration
# 0016) about 1.6 s: this is at most about 0.01 s and 0.07 s of an import.
INDEX_INLINE_CHARS = 500_000


def _search_index_missing(alias: str) -> str:
    """SQL true for a message row (``alias``) not yet in the search index: FTS5's docsize table holds one row per
    indexed record (migration 0015), PostgreSQL's tsvector table one per record (0016)."""
    table = FTS_DOCSIZE_TABLE if connection.vendor == "sqlite" else TSV_TABLE
    return f"NOT EXISTS (SELECT 1 FROM {table} t WHERE t.id = {alias}.id)"


def _insert_search_index(*, session_id: int, after: int) -> int:
    """The session's records after id ``after`` that the search index lacks, indexed; returns how many."""
    table = models.Message._meta.db_table
    if connection.vendor == "sqlite":
        insert = f"INSERT INTO {FTS_TABLE} (rowid, search_text) SELECT m.id, m.search_text"
    else:
        insert = f"INSERT INTO {TSV_TABLE} (id, tsv) SELECT m.id, sessions_app_search_words(m.search_text)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"{insert} FROM {table} m "  # noqa: S608  (our table names)
            f"WHERE m.session_id = %s AND m.id > %s AND {_search_index_missing('m')}",
            [session_id, after],
        )
        return cursor.rowcount


def index_search(*, session_id: int) -> int:
    """Every record of the session in the search index, then the session marked searchable; returns how many
    records were indexed. The task worker runs it after a large import."""
    with transaction.atomic():
        done = _insert_search_index(session_id=session_id, after=0)
        # Ready only if nothing is missing now: an import committed meanwhile may have added records.
        table = models.Message._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {models.Session._meta.db_table} SET search_ready = %s WHERE id = %s "  # noqa: S608
                f"AND NOT EXISTS (SELECT 1 FROM {table} m WHERE m.session_id = %s AND {_search_index_missing('m')})",
                [True, session_id, session_id],
            )
    return done


def estimate_session_tokens(*, session_id: int, batch: int = 500) -> int:
    """Fill ``Message.tokens`` with tiktoken estimates, once; returns how many were estimated.

    A record with more text than ``TOKEN_ESTIMATE_MAX_CHARS`` gets chars/4 instead, marked in
    ``tokens_method``: tiktoken's time grows faster than linearly on long text without whitespace, and its
    text is not even loaded (a batch holds at most ``batch`` records of bounded size).
    """
    from compaction.tokens import tiktoken_counts

    most = limit("TOKEN_ESTIMATE_MAX_CHARS")
    done = 0
    table = connection.ops.quote_name(models.Message._meta.db_table)
    pending = models.Message.objects.filter(session_id=session_id, tokens__isnull=True).order_by("seq")
    while True:
        sizes = list(pending.values_list("id", "chars")[:batch])
        if not sizes:
            break
        large = [(pk, chars) for pk, chars in sizes if chars > most]
        small = dict(
            models.Message.objects.filter(pk__in=[pk for pk, chars in sizes if chars <= most]).values_list(
                "id", "blocks_json"
            )
        )
        texts = ["\n".join(b.get("text", "") for b in orjson.loads(blocks)) for blocks in small.values()]
        counts = tiktoken_counts(texts)
        updates = [(count, models.Message.TokensMethod.TIKTOKEN, pk) for pk, count in zip(small, counts, strict=True)]
        updates += [(-(-chars // 4), models.Message.TokensMethod.CHARS_DIV_4, pk) for pk, chars in large]
        with transaction.atomic(), connection.cursor() as cursor:
            # One statement per batch; Django's bulk_update builds a CASE per row, far slower here.
            cursor.executemany(f"UPDATE {table} SET tokens = %s, tokens_method = %s WHERE id = %s", updates)
        done += len(sizes)
    session = models.Session.objects.get(pk=session_id)
    session.estimates_ready = True
    # A log without recorded usage gets its peak from the analysis that follows (``analyse_session``): the composition
    # is the one count of its context that honours what the agent removed (prunes, compactions).
    session.save(update_fields=["estimates_ready", "updated_at"])
    return done


def _without_usage(session: models.Session) -> bool:
    """Whether the session's main chain recorded no usage (KHAELOR without ``model.usage``): its replies count as
    calls (``api_calls_main``), so it is told by having no recorded call."""
    return not models.ApiCall.objects.filter(session=session, agent=MAIN).exists()


def analyse_session(*, session_id: int) -> models.SessionAnalysis | None:
    """Compute and store what is too slow for a request: the composition at every call and the verdict.

    Runs after the token estimates (the composition splits by them). A session deleted meanwhile is skipped.
    """
    session = models.Session.objects.filter(pk=session_id).first()
    if session is None:
        return None
    if memory_budget.too_large_for_worker(session=session):
        # Its pages say so (the overview, the timeline, the diagnosis): nothing will be computed for it.
        logger.warning(
            "session %s: %s bytes, more than WORKER_ANALYSIS_MAX_SESSION_BYTES; not analysed",
            session.pk,
            session.size_bytes,
        )
        return None
    # The main chain is stored for the pages only when they may read it (a larger one would never be loaded).
    keep_conversation = not memory_budget.too_large(session=session)
    count = session.message_count
    try:
        with memory_budget.worker_budget():
            series = composition_selectors.composition_series(session=session)
            if _without_usage(session):
                # Its only count of the context is the composition's: the peak every page shows is the one the
                # sparkline, the timeline and the treemap draw (``timeline.estimated_peak``), stored before the
                # diagnosis reads it. Only for this version of the session: a larger one is analysed again.
                peak = timeline_selectors.estimated_peak(composition=series)
                estimated = peak.call is not None  # no call, no estimate: "no API call", as with usage
                session.peak_context, session.peak_call, session.peak_is_estimate = peak.tokens, peak.call, estimated
                models.Session.objects.filter(pk=session.pk, message_count=count).update(
                    peak_context=peak.tokens, peak_call=peak.call, peak_is_estimate=estimated
                )
            # The whole diagnosis is stored too: the first request of a web process reads it instead of computing
            # it (0.3-0.5 s on a 53 MB session, bench/analysis_bench.py).
            report = diagnosis_selectors.compute_diagnosis(session=session)
            stored = (
                conversation_selectors.dump_conversation(
                    conversation_selectors.conversation(session=session, agent=MAIN)
                )
                if keep_conversation
                else None
            )
    finally:
        # The worker serves no page: a big session's records kept after its analysis would only add to the peak of
        # whatever the worker does next (bench/memory_bench.py).
        conversation_selectors.forget_conversations()
    analysis, _ = models.SessionAnalysis.objects.update_or_create(
        session=session,
        defaults={
            "message_count": count,
            "composition": series,
            "peak": composition_selectors.peak_composition(series, call=session.peak_call),
            "verdict": report["verdict"],
            "diagnosis": orjson.dumps(report, default=str),
            "conversation": stored,
        },
    )
    store_findings(session=session, report=report)
    # Answers cached until the session changes (views/cached.py) must not keep saying "computing".
    models.Session.objects.filter(pk=session_id).update(updated_at=timezone.now())
    return analysis


def store_findings(*, session: models.Session, report: dict[str, Any]) -> None:
    """The diagnosis report's findings as rows (``models.SessionFinding``), replacing the session's earlier ones: what
    the Findings page adds up across the archive (``selectors.findings``)."""
    with transaction.atomic():
        models.SessionFinding.objects.filter(session=session).delete()
        models.SessionFinding.objects.bulk_create(
            models.SessionFinding(
                session=session,
                kind=finding["kind"],
                subject=finding.get("subject", "")[:200],
                rank=finding.get("rank", 0),
                tokens=finding.get("tokens", 0),
                cost_usd=finding.get("cost_usd"),
                data=finding,
            )
            for finding in report.get("recommendations", [])
        )


# ----------------------------------------------------------------------------- background tasks
# What continues an import in the background (``manage.py db_worker``). Declared beside the work they run, so that
# this module enqueues them without importing a module above it. Tasks take only ids.


@task()
def estimate_tokens_task(session_id: int) -> int:
    """Store a tiktoken estimate for every message of a session that has none yet, then queue its analysis."""
    done = estimate_session_tokens(session_id=session_id)
    analyse_session_task.enqueue(session_id)
    return done


@task()
def index_search_task(session_id: int) -> int:
    """A large import's records in the search index (``index_search``)."""
    return index_search(session_id=session_id)


@task(takes_context=True)
def analyse_session_task(context: TaskContext, session_id: int) -> bool:
    """The composition at every call and the diagnosis verdict, stored (``analyse_session``); False when not
    needed. An analysis of the same session queued after this one makes it needless: a live session queues one per
    append, and each would analyse the whole session again (1.5 s on the 53 MB one) for a version the later one
    analyses anyway."""
    if task_queue.queued_after(
        task_path=analyse_session_task.module_path, first_arg=session_id, after=context.task_result.enqueued_at
    ):
        return False
    return analyse_session(session_id=session_id) is not None
