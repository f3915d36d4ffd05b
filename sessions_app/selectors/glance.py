"""Reads for the first glance at the head of a session page: the context per call as a sparkline, what filled the
context at the peak as a treemap, and what each subagent cost. The page draws them (``_overview.html``) and the
session's JSON twin carries them (``overview``), from these functions only.

Each number has its one source: the context per call is the timeline's series (``timeline.call_series``, or for a
log without recorded usage the timeline's estimates of its calls, ``timeline.main_call_estimates``, which are the
stored composition's contexts); the treemap's cells are the overview's composition at the peak
(``composition.peak_composition``, stored by the worker); the costs are the session's own, split by agent
(``compaction.stats.cost_by_agent``), so they add up to the session's total.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import squarify
from django.conf import settings
from django.urls import reverse

from compaction.transcript import MAIN
from sessions_app import memory_budget, models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors import subagents as subagent_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.selectors.subagents import Subagents
from sessions_app.templatetags.charts import folded

SPARK_POINTS = 120  # points a sparkline draws: one per stretch of calls, the stretch's largest context
SPARK_WIDTH, SPARK_HEIGHT = 1000, 60  # the sparkline's box (its SVG viewBox, stretched to the width of its column)
SPARK_EVENT_KINDS = ("compaction", "microcompact", "prune")  # what the sparkline marks: what cut the context
TREEMAP_WIDTH, TREEMAP_HEIGHT = 600, 200  # the treemap's box (its SVG viewBox; the page scales it whole)
TREEMAP_CELLS = 10  # cells a treemap draws; the smaller rest share one ("folded", as the composition bar does)
PANEL_ROWS = 8  # subagents the panel names one by one, the costliest; the rest share a row (the JSON has all)


# The sparkline and the subagents' costs per process and session version (``updated_at``, which every write to the
# session's rows moves, and its record count), as the timeline page's data is (views/timeline.py): they read every
# call of the session, about 10 ms for a 2 MB session and proportionally more for a larger one, on every page view
# and every refresh of a live session's overview. Small values (at most ``SPARK_POINTS`` points and a row per agent).
_RECORDED: ProcessCache[tuple[Any, ...], dict[str, Any]] = ProcessCache(max_entries=64)


def first_glance(*, session: models.Session, peak: dict[str, Any] | None) -> dict[str, Any]:
    """The three of the first glance: ``sparkline``, ``treemap`` (of ``peak``, the overview's composition at the
    peak) and ``subagent_costs``, as the overview and its JSON twin carry them."""

    def recorded() -> dict[str, Any]:
        series, _ = timeline_selectors.call_series(session=session, agent=MAIN, detail=False)
        # The main chain's cuts of the context, in record order (the rows the overview counts).
        cuts = list(
            models.ContextEvent.objects.filter(session=session, agent=MAIN, kind__in=SPARK_EVENT_KINDS)
            .order_by("seq", "id")
            .values_list("kind", "after_call")
        )
        return {
            "sparkline": sparkline(session=session, series=series.get(MAIN, []), cuts=cuts),
            "subagent_costs": subagent_costs(session=session),
        }

    try:
        memory_budget.check(session=session, reads="calls")  # both read every call of the session
    except memory_budget.SessionTooLarge as too_large:
        refused = {"refused": too_large.message}
        return {"sparkline": refused, "subagent_costs": refused, "treemap": treemap(session=session, peak=peak)}
    if settings.ANALYSIS_CACHE_SECONDS == 0:
        found = recorded()
    else:
        key = (session.pk, session.updated_at, session.message_count)
        found = _RECORDED.get_or_compute(key, recorded, max_age_s=settings.ANALYSIS_CACHE_SECONDS)
    return {**found, "treemap": treemap(session=session, peak=peak)}


def turn_url(*, session_id: int, call: int) -> str:
    """The token timeline opened at a main-chain call (its call panel filled in), as ``call_link`` links it."""
    return f"{reverse('sessions:turn', args=[session_id])}?call={call}"


def sparkline(*, session: models.Session, series: list[dict[str, Any]], cuts: list[tuple[str, int]]) -> dict[str, Any]:
    """The main chain's context per call, thinned to at most ``SPARK_POINTS`` points, with its context cuts.

    ``series``: the main chain's points of the timeline (``timeline.call_series``). Each point drawn is one of them
    (``call``, ``context``): the largest of its stretch of calls, so the peak is always drawn. ``estimated``: the
    log recorded no usage and the points are the timeline's estimates of its calls (``main_call_estimates``: the
    worker's composition, so the peak, the treemap and the timeline say the same); ``computing`` until the worker has
    stored them, ``refused`` (why) when it never will. ``events``: ``cuts``, the main chain's
    compactions, microcompacts and prunes (``SPARK_EVENT_KINDS``), each ``after_call`` as stored. ``x``, ``y``: the
    point in the sparkline's box.
    """
    recorded = [(p["call"], p["context"]) for p in series]
    estimated = not recorded
    estimates = None if recorded else timeline_selectors.main_call_estimates(session=session)
    points = recorded or [(p["x"], p["estimate"]) for p in estimates or []]
    refused = (
        memory_budget.worker_refusal(session=session)
        if estimates is None and estimated and memory_budget.too_large_for_worker(session=session)
        else None
    )
    drawn = thin(points, most=SPARK_POINTS)
    first = points[0][0] if points else 0
    last = points[-1][0] if points else 0
    largest = max((c for _, c in points), default=0)

    def x(call: int) -> float:
        return round(SPARK_WIDTH * (call - first) / (last - first), 2) if last > first else SPARK_WIDTH / 2

    def y(context: int) -> float:
        return round(SPARK_HEIGHT - (SPARK_HEIGHT - 2) * context / largest, 2) if largest else SPARK_HEIGHT

    xs = [x(call) for call, _ in drawn]
    return {
        "calls": len(points),
        "first_call": first if points else None,
        "last_call": last if points else None,
        "largest": largest,
        "estimated": estimated,
        # A log without usage before the worker's analysis: nothing to draw yet, but not "no calls"; and never, past
        # the worker's memory budget, which says why (no other count of its context is made up).
        "computing": estimates is None and estimated and not refused,
        "refused": refused,
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "points": [
            {
                "call": call,
                "context": context,
                "x": xs[i],
                "y": y(context),
                # The stretch of the box a click on this point covers: halfway to its neighbours.
                "from_x": (left := round((xs[i - 1] + xs[i]) / 2, 2) if i else 0),
                "width": round((round((xs[i] + xs[i + 1]) / 2, 2) if i + 1 < len(xs) else SPARK_WIDTH) - left, 2),
                "url": turn_url(session_id=session.pk, call=call),
            }
            for i, (call, context) in enumerate(drawn)
        ],
        "events": [
            {
                "kind": kind,
                "after_call": after_call,
                "x": x(min(max(after_call, first), last)),
                "url": turn_url(session_id=session.pk, call=after_call) if after_call >= 1 else None,
            }
            for kind, after_call in cuts
        ],
    }


def thin(points: list[tuple[int, int]], *, most: int) -> list[tuple[int, int]]:
    """At most ``most`` of ``points`` (call, context), in order: each stretch of calls by its largest context (the
    first of equals), so every peak stays. All of them when they are few enough."""
    if len(points) <= most:
        return list(points)
    kept: list[tuple[int, int]] = []
    for i in range(most):
        stretch = points[i * len(points) // most : (i + 1) * len(points) // most]
        if stretch:
            kept.append(max(stretch, key=lambda p: (p[1], -p[0])))
    return kept


def treemap(*, session: models.Session, peak: dict[str, Any] | None) -> dict[str, Any] | None:
    """What filled the context at the peak (the overview's ``peak_composition``) as squarified cells in a
    ``TREEMAP_WIDTH`` by ``TREEMAP_HEIGHT`` box, largest first, each linking to the timeline at that call.

    The parts are the composition's own (the smallest folded into one cell past ``TREEMAP_CELLS``); the cells' tokens
    add up to the call's context. None before the worker has stored the composition.
    """
    if not peak:
        return None
    parts = sorted(folded(peak["parts"], TREEMAP_CELLS), key=lambda p: -int(p["tokens"]))
    total = sum(int(p["tokens"]) for p in parts)
    if total <= 0:
        return None
    sizes = squarify.normalize_sizes([int(p["tokens"]) for p in parts], TREEMAP_WIDTH, TREEMAP_HEIGHT)
    rects = squarify.squarify(sizes, 0, 0, TREEMAP_WIDTH, TREEMAP_HEIGHT)
    url = turn_url(session_id=session.pk, call=peak["call"])
    return {
        "call": peak["call"],
        "context": peak["context"],
        "estimated": peak["estimated"],
        "width": TREEMAP_WIDTH,
        "height": TREEMAP_HEIGHT,
        "cells": [
            {
                "part": part["part"],
                "kind": part["kind"],
                "tokens": int(part["tokens"]),
                "percent": round(100 * int(part["tokens"]) / total, 1),
                "x": round(rect["x"], 2),
                "y": round(rect["y"], 2),
                "width": round(rect["dx"], 2),
                "height": round(rect["dy"], 2),
                "caption": _caption(str(part["part"]), width=rect["dx"], height=rect["dy"]),
                "url": url,
            }
            for part, rect in zip(parts, rects, strict=True)
        ],
    }


CAPTION_CHAR_WIDTH, CAPTION_HEIGHT = 7.5, 34  # in the treemap's units: a caption's character, its two lines


def _caption(part: str, *, width: float, height: float) -> str:
    """The part's name as a cell has room to print it ("" when it has none: the legend and the title name it)."""
    room = int((width - 12) // CAPTION_CHAR_WIDTH)
    if height < CAPTION_HEIGHT or room < 6:
        return ""
    return part if len(part) <= room else part[: room - 1].rstrip() + "…"


def subagent_rows(*, session: models.Session) -> Subagents:
    """Every subagent of the session with its calls, tokens and cost: the one source of the panel, the session's own
    subagents (``selectors.subagents``: inline or from a file, each response priced once, adding up to the session's
    subagent share)."""
    return subagent_selectors.subagents(session=session)


def subagent_costs(*, session: models.Session) -> dict[str, Any]:
    """The panel of what each subagent cost: every row (``subagent_rows``), costliest first, their sum and the
    session's total.

    ``session_cost_usd`` is the session's own (``Session.cost_usd``, the total every page shows); ``subagents_cost_usd``
    the same calls' subagent share, so with ``main_cost_usd`` they add up to it. Each row is ``SubagentRow.as_json``
    with a ``label`` (what its spawn asked, else its id) and its transcript's ``url``. ``shown``: the rows the page
    names one by one; ``more``: the rest, summed.
    """
    found = subagent_rows(session=session)
    detail = reverse("sessions:detail", args=[session.pk])
    rows = [
        {
            **row.as_json(),
            "label": (row.spawn.description if row.spawn else "") or row.agent,
            "url": f"{detail}?agent={quote(row.agent)}",
        }
        for row in sorted(found.rows, key=lambda r: (-(r.cost_usd or 0.0), r.agent))
    ]
    subagents = found.cost_usd
    total = session.cost_usd
    rest = rows[PANEL_ROWS:]
    return {
        "rows": rows,
        "shown": rows[:PANEL_ROWS],
        "more": {
            "subagents": len(rest),
            "calls": sum(r["calls"] for r in rest),
            "tokens": sum(r["tokens"] for r in rest),
            "cost_usd": round(sum(r["cost_usd"] or 0.0 for r in rest), 6),
        }
        if rest
        else None,
        "subagents": len(rows),
        "calls": found.calls,
        "tokens": found.tokens,
        "subagents_cost_usd": subagents,
        "session_cost_usd": total,
        "main_cost_usd": round(total - subagents, 6) if total is not None and subagents is not None else None,
        "percent": round(100 * subagents / total, 1) if total and subagents is not None else None,
    }
