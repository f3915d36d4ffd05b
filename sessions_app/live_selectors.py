"""Reads for a session that may still be growing: is it live, how far it has grown, which lines it crossed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from compaction.transcript import MAIN
from sessions_app import models, selectors


@dataclass(frozen=True, slots=True)
class Crossing:
    """The main chain's context rose over a threshold line at this call (it may fall back after a compaction)."""

    line: str  # "warning" or "autocompact"
    threshold: int
    call: int
    seq: int
    context: int

    def as_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "threshold": self.threshold,
            "call": self.call,
            "seq": self.seq,
            "context": self.context,
        }


@dataclass(frozen=True, slots=True)
class LiveStatus:
    session: int
    live: bool
    last_activity: datetime | None  # the last record's own timestamp, else when the file last grew here
    messages: int
    calls_main: int
    calls_side: int
    context: int | None  # the main chain's last recorded context
    window: int
    warning: int | None
    autocompact: int | None
    crossings: list[Crossing]

    @property
    def version(self) -> str:
        """Changes whenever the session grew; a page is rendered with it (``_live_placeholder.html``), then polls."""
        return f"{self.messages}-{self.calls_main}-{self.calls_side}"

    @property
    def above(self) -> str | None:
        """The highest line the last context is above, if any."""
        if self.context is None:
            return None
        if self.autocompact and self.context >= self.autocompact:
            return "autocompact"
        if self.warning and self.context >= self.warning:
            return "warning"
        return None

    def last_crossing(self, line: str) -> Crossing | None:
        return next((c for c in reversed(self.crossings) if c.line == line), None)

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "live": self.live,
            "version": self.version,
            "last_activity": self.last_activity.isoformat() if self.last_activity else None,
            "messages": self.messages,
            "api_calls": {"main": self.calls_main, "side": self.calls_side},
            "context": self.context,
            "window": self.window,
            "thresholds": {"warning": self.warning, "autocompact": self.autocompact},
            "above": self.above,
            "crossings": [c.as_json() for c in self.crossings],
        }


def upward_crossings(*, points: list[tuple[int, int, int]], lines: dict[str, int | None]) -> list[Crossing]:
    """Each call (index, seq, context) at which the context went from below a line to at or above it."""
    found: list[Crossing] = []
    for name, threshold in lines.items():
        if not threshold:
            continue
        below = True
        for call, seq, context in points:
            if below and context >= threshold:
                found.append(Crossing(line=name, threshold=threshold, call=call, seq=seq, context=context))
            below = context < threshold
    return sorted(found, key=lambda c: (c.seq, c.threshold))


def last_activity(*, session: models.Session) -> datetime | None:
    # The agent's own clock says when it last wrote; logs without timestamps fall back to the last import.
    if session.ended_at is not None:
        return session.ended_at
    imported: datetime | None = models.SourceFile.objects.filter(session=session).aggregate(t=Max("imported_at"))["t"]
    return imported


def live_status(*, session: models.Session, now: datetime | None = None) -> LiveStatus:
    """Whether the session is live (its last record is under ``SESSION_LIVE_SECONDS`` old) and where it stands."""
    now = now or timezone.now()
    activity = last_activity(session=session)
    live = activity is not None and now - activity <= timedelta(seconds=settings.SESSION_LIVE_SECONDS)
    thresholds = selectors.thresholds_for(session=session)
    points = list(
        models.ApiCall.objects.filter(session=session, agent=MAIN)
        .order_by("number")
        .values_list("number", "seq", "context")
    )
    lines = {"warning": thresholds["warning"], "autocompact": thresholds["autocompact"]}
    return LiveStatus(
        session=session.pk,
        live=live,
        last_activity=activity,
        messages=session.message_count,
        calls_main=session.api_calls_main,
        calls_side=session.api_calls_side,
        context=points[-1][2] if points else None,
        window=thresholds["window"],
        warning=thresholds["warning"],
        autocompact=thresholds["autocompact"],
        crossings=upward_crossings(points=points, lines=lines),
    )
