"""Reads for a session that may still be growing: is it live, how far it has grown, which lines it crossed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from compaction.transcript import MAIN
from sessions_app import models
from sessions_app.selectors import thresholds as threshold_selectors


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


# The context events a live page announces: the ones that cut the context (errors and spawns are not announced).
ANNOUNCED_KINDS = ("compaction", "microcompact", "prune")
_VERBS = {"compaction": "Compacted", "microcompact": "Microcompacted", "prune": "Pruned"}


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """A compaction, microcompact or prune of the main chain, with the context either side of it."""

    kind: str
    seq: int
    after_call: int  # the main chain's calls before it (``ContextEvent.after_call``)
    trigger: str
    before: int | None  # the event's own count of tokens before, else the last call's context
    after: int | None  # the event's own count after, else the next call's context (None until that call arrives)

    @property
    def verb(self) -> str:
        return _VERBS.get(self.kind, self.kind)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seq": self.seq,
            "after_call": self.after_call,
            "trigger": self.trigger or None,
            "tokens_before": self.before,
            "tokens_after": self.after,
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
    events: int = 0  # the main chain's compactions, microcompacts and prunes so far
    latest_event: LiveEvent | None = None

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
            "events": self.events,
            "latest_event": self.latest_event.as_json() if self.latest_event else None,
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


def latest_event(
    *, events: list[tuple[str, int, int, str, int | None, int | None]], points: list[tuple[int, int, int]]
) -> LiveEvent | None:
    """The last of ``events`` (kind, seq, after_call, trigger, pre_tokens, post_tokens; in seq order), with the
    context either side read from the main chain's calls (index, seq, context) by seq, not by call number: the
    record order is what the log says, whatever the numbering."""
    if not events:
        return None
    kind, seq, after_call, trigger, pre, post = events[-1]
    before = next((context for _, s, context in reversed(points) if s < seq), None)
    after = next((context for _, s, context in points if s > seq), None)
    return LiveEvent(
        kind=kind,
        seq=seq,
        after_call=after_call,
        trigger=trigger,
        before=pre if pre is not None else before,
        after=post if post is not None else after,
    )


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
    thresholds = threshold_selectors.thresholds_for(session=session)
    points = list(
        models.ApiCall.objects.filter(session=session, agent=MAIN)
        .order_by("number")
        .values_list("number", "seq", "context")
    )
    lines = {"warning": thresholds["warning"], "autocompact": thresholds["autocompact"]}
    events = list(
        models.ContextEvent.objects.filter(session=session, agent=MAIN, kind__in=ANNOUNCED_KINDS)
        .order_by("seq", "id")
        .values_list("kind", "seq", "after_call", "trigger", "pre_tokens", "post_tokens")
    )
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
        events=len(events),
        latest_event=latest_event(events=events, points=points),
    )
