"""Reads for the at-a-glance head of a session page: the worker's stored analysis and the overview built on it."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from compaction.transcript import MAIN
from sessions_app import memory_budget, models
from sessions_app.selectors import glance
from sessions_app.selectors.calls import session_peak
from sessions_app.selectors.thresholds import thresholds_for


def stored_analysis(*, session: models.Session, series: bool = False) -> models.SessionAnalysis | None:
    """The worker's analysis of this version of the session, or None while it is (re)computed.

    ``series``: load the composition at every call too (the timeline), not only its peak (the overview).
    """
    rows = models.SessionAnalysis.objects.filter(session=session).defer("conversation")  # stored_conversation's
    analysis = (rows if series else rows.defer("composition")).first()
    if analysis is None or analysis.message_count != session.message_count:
        return None
    return analysis


COUNTED_EVENTS = ("compaction", "microcompact", "prune", "overflow")


def context_event_counts(*, session: models.Session) -> dict[str, int]:
    """How many compactions, microcompacts, prunes and overflows the main chain recorded (its context events, the
    rows ``session_stats`` lists): the counts the overview and the settings simulator show."""
    counts = dict(
        models.ContextEvent.objects.filter(session=session, agent=MAIN, kind__in=COUNTED_EVENTS)
        .values_list("kind")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {kind: counts.get(kind, 0) for kind in COUNTED_EVENTS}


def overview(*, session: models.Session) -> dict[str, Any]:
    """The at-a-glance head of a session page and its JSON twin; each number from its one source.

    Peak, window, calls and cost: the session's columns, which the import fills from ``compaction.stats``
    (``services.refresh_session_summary``); the lines: ``thresholds_for`` (the session's own strategy);
    compactions, microcompacts and prunes: the main chain's context events, the rows ``session_stats`` lists (a
    few rows: the page must not read every call); the composition at the peak and the verdict: the
    worker's stored analysis (``composition_series``, ``compaction.diagnose``), or ``computing`` until it is there.
    """
    thresholds = thresholds_for(session=session)
    counts = context_event_counts(session=session)
    analysis = stored_analysis(session=session)
    # A session larger than the worker analyses never gets an analysis: said, not "computing" for ever.
    not_analysed = (
        memory_budget.worker_refusal(session=session) if memory_budget.too_large_for_worker(session=session) else None
    )
    peak_composition = analysis.peak if analysis is not None else None
    duration = (
        (session.ended_at - session.started_at).total_seconds() if session.started_at and session.ended_at else None
    )
    return {
        "agent": session.format,
        "peak": session_peak(session=session).as_json(),
        "peak_context": session.peak_context,
        "peak_is_estimate": session.peak_is_estimate,
        "window": thresholds["window"],
        "lines": {"warning": thresholds["warning"], "autocompact": thresholds["autocompact"]},
        "thresholds_source": thresholds["source"],
        "api_calls": {"main": session.api_calls_main, "side": session.api_calls_side},
        "compactions": counts.get("compaction", 0),
        "microcompacts": counts.get("microcompact", 0),
        "prunes": counts.get("prune", 0),
        "duration_seconds": duration,
        "cost_usd": session.cost_usd,
        "computing": analysis is None and not_analysed is None,
        "not_analysed": not_analysed,
        "peak_composition": peak_composition,
        "verdict": analysis.verdict if analysis is not None else None,
        # The first glance (selectors.glance): the context per call, what filled it at the peak, what subagents cost.
        **glance.first_glance(session=session, peak=peak_composition),
    }
