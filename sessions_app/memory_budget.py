"""How large a session the server reads whole into memory, the cheap check against it, and the refusal.

A preview, a what-if replay, a call's detail, a compaction run and its export read every record of the main chain
into Python objects (``selectors.conversation.conversation``): a process holds about 1.5 times the session's size
for them, and 3 times with what pages derive and keep (bench/memory_bench.py, docs/performance.md). Above the
budget such a read is refused with a sentence that says why and what to do, on the page, its JSON twin and the
commands, never a 500 and never a cut transcript. The check reads the session's stored size and record count
(``Session.size_bytes``, the sum of its files, and ``Session.message_count``), never its records: ``weight``.

A session is weighed by its bytes, or by its records where they are small: each record counts as at least
``RECORD_WEIGHT_BYTES``, because a record costs its objects whatever its size (a session of one-word records took
more than twice the memory of one of large records of the same size; docs/performance.md has the measurement).

Two budgets: ``ANALYSIS_MAX_SESSION_BYTES`` for the web process and the commands (a request thread), and
``WORKER_ANALYSIS_MAX_SESSION_BYTES`` for the analysis the worker stores after an import (``services.analyse_session``
runs inside ``worker_budget``): the diagnosis and the composition it stores are then read by pages without the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

from django.conf import settings

from sessions_app import models

MIB = 1024 * 1024
type Reads = Literal["records", "calls"]  # what a page reads whole: every record of the main chain, or every call
# What one record weighs at least, in bytes of a session of large records holding the same memory once read: a
# one-word record held 1,188 bytes of objects read back, where a session of large records held 0.78 bytes per byte of
# file (1,188 / 0.78 = 1,520; measured with tracemalloc, docs/performance.md "Memory").
RECORD_WEIGHT_BYTES = 1536
# What one API call weighs where a page reads every call and no record (the token timeline, its JSON twin and
# ``manage.py timeline``): the timeline of 295,374 calls took the web process from 77 MB to 1,050 MB, 3.3 KB per
# call, where a session's weight costs a page about 3.7 bytes per byte (493 MB at 128 MiB): 3.3 KB / 3.7 = 890.
CALL_WEIGHT_BYTES = 1024

# The budget in force in this thread (``worker_budget``); None: the web's (ANALYSIS_MAX_SESSION_BYTES).
_ALLOWED: ContextVar[int | None] = ContextVar("analysis_max_session_bytes", default=None)


def most_bytes() -> int:
    """The largest session (its stored size) read whole here and now."""
    allowed = _ALLOWED.get()
    return int(settings.ANALYSIS_MAX_SESSION_BYTES) if allowed is None else allowed


def budget_setting() -> str:
    """The setting whose budget is in force here and now: the one a refusal tells the reader to raise."""
    return "ANALYSIS_MAX_SESSION_BYTES" if _ALLOWED.get() is None else "WORKER_ANALYSIS_MAX_SESSION_BYTES"


def weight(*, session: models.Session, reads: Reads = "records") -> int:
    """What the budgets weigh a session by: its stored size, or ``RECORD_WEIGHT_BYTES`` per record when its records
    are smaller than that on average. The one number every check and refusal compares. A read of every call and no
    record (``reads="calls"``, the timeline) weighs ``CALL_WEIGHT_BYTES`` per call."""
    if reads == "calls":
        return (session.api_calls_main + session.api_calls_side) * CALL_WEIGHT_BYTES
    return max(session.size_bytes, session.message_count * RECORD_WEIGHT_BYTES)


def too_large(*, session: models.Session) -> bool:
    return weight(session=session) > most_bytes()


def too_large_for_worker(*, session: models.Session) -> bool:
    """Larger than even the worker analyses: no stored diagnosis or composition will come."""
    return weight(session=session) > int(settings.WORKER_ANALYSIS_MAX_SESSION_BYTES)


def worker_refusal(*, session: models.Session) -> str:
    """What the overview, the timeline and the diagnosis say of a session the worker does not analyse."""
    most = int(settings.WORKER_ANALYSIS_MAX_SESSION_BYTES)
    counted = weight(session=session)
    return (
        f"Not analysed: {_what_counts(session, counted)}, more than the {_mib(most)} the worker analyses "
        f"(WORKER_ANALYSIS_MAX_SESSION_BYTES), so no composition or diagnosis is computed for it. Raise it above "
        f"{counted:,} bytes on a machine with memory to spare (about 2 MB per MB counted) to have one."
    )


def _what_counts(session: models.Session, counted: int, reads: Reads = "records") -> str:
    """The session's weight in words: its size, or its records (its calls) where they weigh more."""
    if reads == "calls":
        calls = session.api_calls_main + session.api_calls_side
        return f"this session's {calls:,} API calls count as {_mib(counted)} ({CALL_WEIGHT_BYTES:,} bytes each)"
    if counted > session.size_bytes:
        return (
            f"this session's {session.message_count:,} records count as {_mib(counted)} "
            f"({RECORD_WEIGHT_BYTES:,} bytes each: many small records take more memory than their "
            f"{_mib(session.size_bytes)})"
        )
    return f"this session is {_mib(counted)}"


def _mib(size: int) -> str:
    return f"{size / MIB:,.0f} MiB"


class SessionTooLarge(Exception):
    """A whole-session read refused: the session is larger than the budget in force."""

    def __init__(self, *, session: models.Session, most: int, reads: Reads = "records") -> None:
        self.session_id = session.pk
        self.reads = reads
        self.size = weight(session=session, reads=reads)
        self.counts = _what_counts(session, self.size, reads)
        self.most = most
        self.setting = budget_setting()
        self.analysed = not too_large_for_worker(session=session)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        pages = "transcript and search" if self.reads == "calls" else "transcript, timeline and search"
        still = f"Its {pages} still work"
        still += ", and its diagnosis once the worker has analysed it." if self.analysed else "."
        every = "every API call of the session" if self.reads == "calls" else "every record of its main chain"
        return (
            f"{self.counts[0].upper()}{self.counts[1:]}, more than the {_mib(self.most)} this server reads whole "
            f"({self.setting}): this page would hold {every} in memory at once. "
            f"{still} To open this page, raise {self.setting} above {self.size:,} bytes on a server with "
            f"memory to spare (about 3 MB of memory per MB counted), or import a shorter part of the session."
        )


def check(*, session: models.Session, reads: Reads = "records") -> None:
    """Refuse (``SessionTooLarge``) a read of every record (or every call) of ``session`` above the budget in force."""
    most = most_bytes()
    if weight(session=session, reads=reads) > most:
        raise SessionTooLarge(session=session, most=most, reads=reads)


@contextmanager
def worker_budget() -> Iterator[None]:
    """Within this block, in this thread, the worker's budget is in force (``WORKER_ANALYSIS_MAX_SESSION_BYTES``):
    its analysis and its simulations read larger sessions whole than a request does."""
    token = _ALLOWED.set(int(settings.WORKER_ANALYSIS_MAX_SESSION_BYTES))
    try:
        yield
    finally:
        _ALLOWED.reset(token)
