"""Writes: the archive. A session stays when the agent deletes its file (Claude Code removes transcripts older than
``cleanupPeriodDays``, 30 days by default: docs/archive.md); it is marked archived, and its files can be written
back, byte for byte, from the bytes the import stored (``models.RawChunk``).

- ``check_sources`` marks (and unmarks) sessions whose main file is gone from where it was imported from: the
  watcher's first pass and each deletion it sees, and the session page, call it.
- ``restore_session`` writes a session's files back where they were imported from, or under another folder as
  they lay under the agent's own (``--to ~/.claude/projects``); a different file already there is never
  overwritten.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath

from django.db.models import QuerySet
from django.utils import timezone

from compaction.formats import registry as format_registry
from compaction.transcript import MAIN
from sessions_app import models
from sessions_app.selectors.sessions import read_raw


class RestoreRefused(Exception):
    """A restore that would overwrite a different file, or has nothing to write (the message says which)."""


def main_file(session: models.Session) -> models.SourceFile | None:
    """The session's main file when it was imported from a place (an absolute path), not from an upload."""
    for file in session.files.all():
        if file.agent == MAIN and PurePath(file.path).is_absolute():
            return file
    return None


def source_missing(session: models.Session) -> bool:
    """Whether the session's main file no longer exists where it was imported from."""
    file = main_file(session)
    return file is not None and not Path(file.path).is_file()


def check_sources(*, sessions: QuerySet[models.Session] | Iterable[models.Session] | None = None) -> int:
    """Mark archived the sessions (default: every one) whose main file is gone, and not archived those whose file
    is back; how many changed."""
    if sessions is None:
        sessions = models.Session.objects.all()
    if isinstance(sessions, QuerySet):
        sessions = sessions.prefetch_related("files").only("pk", "archived_at")
    now = timezone.now()
    changed = 0
    for session in sessions:
        gone = source_missing(session)
        if gone == (session.archived_at is not None):
            continue
        session.archived_at = now if gone else None
        models.Session.objects.filter(pk=session.pk).update(archived_at=session.archived_at)
        changed += 1
    return changed


def check_paths(*, paths: Iterable[Path]) -> int:
    """``check_sources`` for the sessions imported from ``paths`` (files the watcher saw deleted)."""
    names = [str(p) for p in paths]
    if not names:
        return 0
    return check_sources(sessions=models.Session.objects.filter(files__path__in=names, files__agent=MAIN).distinct())


def resume_command(session: models.Session) -> str:
    """The agent's own command that resumes the session, in its working directory ("" when the agent has none)."""
    template = format_registry.agent_profile(session.format).resume_command
    if not template or not session.external_id:
        return ""
    command = template.format(session_id=shlex.quote(session.external_id))
    return f"cd {shlex.quote(session.project)} && {command}" if session.project else command


@dataclass(frozen=True, slots=True)
class RestoredFile:
    path: str
    bytes: int
    written: bool  # False: the same bytes were there already

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "bytes": self.bytes, "written": self.written}


@dataclass(frozen=True, slots=True)
class Restored:
    session: int
    files: list[RestoredFile]
    resume_command: str

    def as_json(self) -> dict[str, object]:
        return {
            "session": self.session,
            "files": [f.as_json() for f in self.files],
            "resume_command": self.resume_command,
        }


def target_path(*, session: models.Session, file: models.SourceFile, to: Path | None) -> Path:
    """Where ``file`` goes back: where it was imported from, or under ``to`` as it lay under its agent's folder
    (``<project slug>/<id>.jsonl`` for Claude Code), or by its name when it lay elsewhere."""
    source = Path(file.path)
    if to is None:
        if not source.is_absolute():
            raise RestoreRefused(
                f"{file.path} was uploaded, not imported from a folder: give a folder to restore it to (--to DIR)."
            )
        return source
    for folder in format_registry.session_folders(session.format):
        parts = PurePath(folder).parts
        for i in range(len(source.parts) - len(parts)):
            if source.parts[i : i + len(parts)] == parts:
                return to.joinpath(*source.parts[i + len(parts) :])
    return to / source.name


def restore_session(*, session: models.Session, to: Path | None = None) -> Restored:
    """Write every file of ``session`` back from its stored bytes (main file first); refuses, before writing any,
    when a different file is where one would go."""
    files = list(session.files.order_by("id"))
    if not files:
        raise RestoreRefused(f"Session {session.pk} has no stored file to restore.")
    plan = [(file, target_path(session=session, file=file, to=to)) for file in files]
    for file, target in plan:
        if target.exists() and not _same_content(target, file):
            raise RestoreRefused(
                f"{target} exists and differs from the stored copy of this session's file; nothing was overwritten. "
                "Move it away, or restore elsewhere with --to DIR."
            )
    done = [_write(file=file, target=target) for file, target in plan]
    if to is None and session.archived_at is not None:
        session.archived_at = None
        models.Session.objects.filter(pk=session.pk).update(archived_at=None)
    return Restored(session=session.pk, files=done, resume_command=resume_command(session))


def _same_content(target: Path, file: models.SourceFile) -> bool:
    if not target.is_file() or target.stat().st_size != file.size:
        return False
    digest = hashlib.sha256()
    with target.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == file.sha256


def _write(*, file: models.SourceFile, target: Path) -> RestoredFile:
    """The stored bytes to ``target`` (through a temporary file beside it, renamed once complete and checked)."""
    if target.exists():
        return RestoredFile(path=str(target), bytes=file.size, written=False)  # the same bytes (checked above)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".restoring")
    try:
        with os.fdopen(handle, "wb") as out:
            for piece in read_raw(file=file):
                digest.update(piece)
                size += len(piece)
                out.write(piece)
        if size != file.size or digest.hexdigest() != file.sha256:
            raise RestoreRefused(
                f"The stored bytes of {file.path} do not match what was imported ({size:,} of {file.size:,} bytes, "
                "or another hash); nothing was written."
            )
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return RestoredFile(path=str(target), bytes=size, written=True)
