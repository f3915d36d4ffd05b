"""How large a session the server reads whole into memory, the cheap check against it, and the refusal.

A preview, a what-if replay, a call's detail, a compaction run and its export read every record of the main chain
into Python objects (``selectors.conversation.conversation``): a process holds about 1.5 times the session's size
for them, and 3 times with what the pages derive and keep (bench/memory_bench.py, docs/performance.md). Above the
budget such a read is refused with a sentence that says why and what to do, on the page, its JSON twin and the
commands, never a 500 and never a cut transcript. The check reads the session's stored size
(``Session.size_bytes``, the sum of its files), never its records.

Two budgets: ``ANALYSIS_MAX_SESSION_BYTES`` for the web process and the commands (a request thread), and
``WORKER_ANALYSIS_MAX_SESSION_BYTES`` for the analysis the worker stores after an import (``services.analyse_session``
runs inside ``allowing`` it): the diagnosis and the composition it stores are then read by pages without the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

from sessions_app import models

MIB = 1024 * 1024

# The budget in force in this thread (``allowing``); None: the web's (ANALYSIS_MAX_SESSION_BYTES).
_ALLOWED: ContextVar[int | None] = ContextVar("analysis_max_session_bytes", default=None)


def most_bytes() -> int:
    """The largest session (its stored size) read whole here and now."""
    allowed = _ALLOWED.get()
    return int(settings.ANALYSIS_MAX_SESSION_BYTES) if allowed is None else allowed


def too_large(*, session: models.Session) -> bool:
    return session.size_bytes > most_bytes()


def too_large_for_worker(*, session: models.Session) -> bool:
    """Larger than even the worker analyses: no stored diagnosis or composition will come."""
    return session.size_bytes > int(settings.WORKER_ANALYSIS_MAX_SESSION_BYTES)


def worker_refusal(*, session: models.Session) -> str:
    """What the overview, the timeline and the diagnosis say of a session the worker does not analyse."""
    most = int(settings.WORKER_ANALYSIS_MAX_SESSION_BYTES)
    return (
        f"Not analysed: this session is {_mib(session.size_bytes)}, more than the {_mib(most)} the worker analyses "
        f"(WORKER_ANALYSIS_MAX_SESSION_BYTES), so no composition or diagnosis is computed for it. Raise it above "
        f"{session.size_bytes:,} bytes on a machine with memory to spare (about 2 MB per MB of session) to have one."
    )


def _mib(size: int) -> str:
    return f"{size / MIB:,.0f} MiB"


class SessionTooLarge(Exception):
    """A whole-session read refused: the session is larger than the budget in force."""

    def __init__(self, *, session: models.Session, most: int) -> None:
        self.session_id = session.pk
        self.size = session.size_bytes
        self.most = most
        self.analysed = not too_large_for_worker(session=session)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        still = "Its transcript, timeline and search still work"
        still += ", and its diagnosis once the worker has analysed it." if self.analysed else "."
        return (
            f"This session is {_mib(self.size)}, more than the {_mib(self.most)} this server reads whole "
            f"(ANALYSIS_MAX_SESSION_BYTES): this page would hold every record of its main chain in memory at once. "
            f"{still} To open this page, raise ANALYSIS_MAX_SESSION_BYTES above {self.size:,} bytes on a server with "
            f"memory to spare (about 3 MB of memory per MB of session), or import a shorter part of the session."
        )


def check(*, session: models.Session) -> None:
    """Refuse (``SessionTooLarge``) a read of every record of ``session`` above the budget in force."""
    most = most_bytes()
    if session.size_bytes > most:
        raise SessionTooLarge(session=session, most=most)


@contextmanager
def allowing(most: int) -> Iterator[None]:
    """Within this block, in this thread, sessions up to ``most`` bytes are read whole (the worker's analysis)."""
    token = _ALLOWED.set(most)
    try:
        yield
    finally:
        _ALLOWED.reset(token)
