"""Live tail: import what grows under the agents' session folders while it is being written.

The watcher only decides *which* files to import and *when*; each file goes through the one import
(``services.import_file``), which stores only the lines added since the last pass, reports bad lines,
and leaves a partial last line for the next pass. A pass that fails for one file logs it and goes on:
the next change to the file retries it. A session whose file the agent deleted stays, marked archived (``archive``):
checked for every session after the first pass, and for the files of each deletion seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from django.db import close_old_connections, connection
from watchfiles import Change, watch

from compaction.formats import registry as format_registry
from sessions_app import archive, services

logger = logging.getLogger(__name__)

# Reported after each pass: the file outcomes of that pass.
# The first pass's summary line says this; ``manage.py serve`` waits for it before printing the login.
CAUGHT_UP = "caught up"
# The first pass's progress lines start with this; ``manage.py serve`` shows the latest on one terminal line.
FIRST_SCAN = "first scan"
PassCallback = Callable[[list[services.FileImport | services.Rejected]], None]
# (files done, files in the pass, the outcomes so far): told after each file of the first pass.
ProgressCallback = Callable[[int, int, list[services.FileImport | services.Rejected]], None]


def is_session_file(path: Path) -> bool:
    """The files ``services.discover`` picks in a folder: transcripts, not journals or persisted tool results."""
    return format_registry.is_transcript_path(path)


def _import_order(paths: Iterable[Path]) -> list[Path]:
    # Main transcripts before subagent files, so a subagent file written in the same pass finds its parent.
    return sorted(set(paths), key=lambda p: (p.name.startswith("agent-") or "subagents" in p.parts, str(p)))


def import_changed(
    *, paths: Iterable[Path], on_progress: ProgressCallback | None = None
) -> list[services.FileImport | services.Rejected]:
    """Import each changed session file that still exists, one transaction per file."""
    outcomes: list[services.FileImport | services.Rejected] = []
    ordered = _import_order(paths)
    for done, path in enumerate(ordered, start=1):
        if path.is_file():  # else deleted or renamed away since the change was seen
            try:
                outcomes.append(services.import_file(path=path))
            except Exception:  # a database hiccup on one file must not stop the tail of the others
                logger.exception("live import of %s failed", path)
        if on_progress is not None:
            on_progress(done, len(ordered), outcomes)
    return outcomes


def _changed_session_files(changes: set[tuple[Change, str]]) -> list[Path]:
    return [Path(p) for change, p in changes if change != Change.deleted and is_session_file(Path(p))]


def watch_sessions(
    *,
    roots: Sequence[Path] | None = None,
    stop_event: threading.Event | None = None,
    on_pass: PassCallback | None = None,
    on_progress: ProgressCallback | None = None,
    step_ms: int = 50,
    debounce_ms: int = 1600,
    retry_roots_s: float = 10.0,
) -> None:
    """Catch up on every session under ``roots`` (default: ``services.default_roots()``), then import changes.

    Runs until ``stop_event`` is set. A change is imported ``step_ms`` after writing pauses (an agent writes
    a turn in a burst), or after ``debounce_ms`` of continuous writing. The default roots are looked up again
    every ``retry_roots_s``: an agent run for the first time creates its folder, which is then followed too.
    ``on_progress`` hears of each file of the first pass (the catch-up, which may take minutes on a big history).
    """
    stop = stop_event or threading.Event()
    first_pass_told = False

    def current_roots() -> list[Path]:
        return [r for r in (roots if roots is not None else services.default_roots()) if r.exists()]

    try:
        while not stop.is_set():
            watched = current_roots()
            if not watched:
                if not first_pass_told:
                    # Nothing to catch up on is a first pass too: whoever waits for it (the login banner) goes on.
                    first_pass_told = True
                    _report([], on_pass)
                stop.wait(retry_roots_s)
                continue
            # Sessions whose files the agent deleted while nobody watched; checked before the pass, not between it
            # and the watch below: a file written between the pass and the watch's start would wait for its next write.
            _check_archive(None)
            # What grew while nobody watched (the server was down, or a new root) comes in with the first pass.
            found = [f for r in watched for f in services.discover(r)]
            progress = None if first_pass_told else on_progress
            first_pass_told = True
            _report(import_changed(paths=found, on_progress=progress), on_pass)
            for changes in watch(
                *watched,
                watch_filter=lambda _change, p: is_session_file(Path(p)),
                step=step_ms,
                debounce=debounce_ms,
                stop_event=stop,
                raise_interrupt=False,
                rust_timeout=int(retry_roots_s * 1000),
                yield_on_timeout=True,
            ):
                if not changes:  # a quiet interval: has a root appeared or gone?
                    if current_roots() != watched:
                        break
                    continue
                close_old_connections()  # a long idle connection may have been dropped by the server
                _report(import_changed(paths=_changed_session_files(changes)), on_pass)
                deleted = [Path(p) for change, p in changes if change == Change.deleted]
                if deleted:
                    _check_archive(deleted)
    finally:
        connection.close()  # this thread's connection; a test or the command may run the watcher in a thread


def _check_archive(paths: list[Path] | None) -> None:
    """Sessions whose main file is gone are marked archived (``archive.check_sources``): all of them, or those of
    ``paths``. A failure is logged: the tail goes on."""
    try:
        changed = archive.check_sources() if paths is None else archive.check_paths(paths=paths)
    except Exception:
        logger.exception("checking for deleted session files failed")
        return
    if changed:
        logger.info("%s session(s) archived or back: their files were deleted or restored", changed)


def _report(outcomes: list[services.FileImport | services.Rejected], on_pass: PassCallback | None) -> None:
    if on_pass is not None:
        on_pass(outcomes)


def _counts(outcomes: list[services.FileImport | services.Rejected]) -> str:
    imported = [o for o in outcomes if isinstance(o, services.FileImport)]
    new = sum(1 for o in imported if o.created)
    grew = sum(1 for o in imported if o.lines and not o.created)
    waiting = sum(1 for o in outcomes if isinstance(o, services.Rejected) and o.waiting)
    rejected = len(outcomes) - len(imported) - waiting
    being_written = f", {waiting} still being written" if waiting else ""
    return f"{new} new session(s), {grew} grew, {rejected} not a session{being_written}"


def summary(outcomes: list[services.FileImport | services.Rejected]) -> str:
    return f"{CAUGHT_UP}: {len(outcomes)} file(s), {_counts(outcomes)}; now importing what the agents write"


def progress(done: int, total: int, outcomes: list[services.FileImport | services.Rejected]) -> str:
    """The first pass's progress, one line: ``manage.py serve`` shows the latest in place on the terminal."""
    return f"{FIRST_SCAN}: {done:,}/{total:,} file(s), {_counts(outcomes)}"


def describe(outcome: services.FileImport | services.Rejected) -> str | None:
    """One log line for a pass outcome worth telling (new lines, bad lines, a rejection); None otherwise."""
    stamp = time.strftime("%H:%M:%S")
    if isinstance(outcome, services.Rejected):
        return f"{stamp} {'waiting for' if outcome.waiting else 'rejected'} {outcome.path}: {outcome.message}"
    if not outcome.lines and not outcome.errors:
        return None
    state = "is new" if outcome.created else "grew"
    errors = f", {len(outcome.errors)} bad line(s)" if outcome.errors else ""
    return f"{stamp} session {outcome.session} {state}: +{outcome.lines} lines{errors}  {outcome.path}"
