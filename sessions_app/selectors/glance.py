"""Reads for the first glance at the head of a session page: the context per call as a sparkline, what filled the
context at the peak as a treemap, and what each subagent cost. The page draws them (``_overview.html``) and the
session's JSON twin carries them (``overview``), from these functions only.

Each number has its one source: the context per call is the timeline's series (``timeline.call_series``, or for a
log without recorded usage the timeline's estimates, ``timeline.main_estimates``); the treemap's cells are the
overview's composition at the peak (``composition.peak_composition``, stored by the worker); the costs are the
session's own, split by agent (``compaction.stats.cost_by_agent``), so they add up to the session's total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import squarify
from django.conf import settings
from django.urls import reverse

from compaction.stats import cost_by_agent
from compaction.transcript import MAIN, ApiCall
from sessions_app import models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors import agents as agent_selectors
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.templatetags.charts import folded

SPARK_POINTS = 120  # points a sparkline draws: one per stretch of calls, the stretch's largest context
SPARK_WIDTH, SPARK_HEIGHT = 1000, 60  # the sparkline's box (its SVG viewBox, stretched to the width of its column)
SPARK_EVENT_KINDS = ("compaction", "microcompact", "prune")  # what the sparkline marks: what cut the context
TREEMAP_WIDTH, TREEMAP_HEIGHT = 600, 200  # the treemap's box (its SVG viewBox; the page scales it whole)
TREEMAP_CELLS = 10  # cells a treemap draws; the smaller rest share one ("folded", as the composition bar does)
PANEL_ROWS = 8  # subagents the panel names one by one, the costliest; the rest share a row (the JSON has all)


# The sparkline and the subagents' costs per process and session version (``updated_at``, which every write to the
# session's rows moves, and its record count), as the timeline page's data is (views/timeline.py): both read every
# call of the session, about 10 ms for a 2 MB session and proportionally more for a larger one, on every page view
# and every refresh of a live session's overview. Small values (at most ``SPARK_POINTS`` points and a row per agent).
_RECORDED: ProcessCache[tuple[Any, ...], dict[str, Any]] = ProcessCache(max_entries=64)


def first_glance(
    *, session: models.Session, peak: dict[str, Any] | None, cuts: list[tuple[str, int]]
) -> dict[str, Any]:
    """The three of the first glance: ``sparkline``, ``treemap`` (of ``peak``, the overview's composition at the
    peak) and ``subagent_costs``, as the overview and its JSON twin carry them. ``cuts``: the main chain's
    ``SPARK_EVENT_KINDS`` events as (kind, after_call), in record order (the overview counts them too)."""

    def recorded() -> dict[str, Any]:
        # One read of the session's calls for both: the timeline's series (``call_series``).
        series, calls = timeline_selectors.call_series(session=session, detail=False)
        return {
            "sparkline": sparkline(session=session, series=series.get(MAIN, []), cuts=cuts),
            "subagent_costs": subagent_costs(session=session, calls=calls),
        }

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
    log recorded no usage and the points are the timeline's estimates. ``events``: ``cuts``, the main chain's
    compactions, microcompacts and prunes (``SPARK_EVENT_KINDS``), each ``after_call`` as stored. ``x``, ``y``: the
    point in the sparkline's box.
    """
    recorded = [(p["call"], p["context"]) for p in series]
    estimated = not recorded
    points = recorded or [(p["x"], p["estimate"]) for p in timeline_selectors.main_estimates(session=session)]
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
        # A log without usage before the worker's token estimates: nothing to draw yet, but not "no calls".
        "computing": estimated and not points and not session.estimates_ready,
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


@dataclass(frozen=True, slots=True)
class SubagentCost:
    """One subagent's share of the session: its calls, tokens and cost.

    ``inline``: a subagent with no file of its own, known from its parent's file (Claude Code's ``agent_progress``
    copies, 1.0.x sidechain lines); where none of its calls is stored, its ``calls`` are the answers those copies
    carry. ``url``: its transcript, where it has stored calls. ``cost_usd`` None: a model without a price.
    """

    agent: str
    label: str
    subagent_type: str
    calls: int
    tokens: int
    cost_usd: float | None
    inline: bool
    url: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "label": self.label,
            "subagent_type": self.subagent_type,
            "calls": self.calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "inline": self.inline,
            "url": self.url,
        }


def subagent_rows(*, session: models.Session, calls: dict[str, list[ApiCall]]) -> list[SubagentCost]:
    """Every subagent of the session with what it cost, costliest first: the one source of the panel.

    ``calls``: the session's stored calls by agent (``timeline.call_series``). Their cost with the responses only a
    parent's ``progress`` records carry (``calls.stored_embedded``), split by agent as the session's total counts them
    (``compaction.stats.cost_by_agent`` over ``priced_once``: each response once), so the rows and the main chain add
    up to the session's cost. A subagent without a file of its own is inline; a spawn names what it was asked.
    """
    embedded = list(call_selectors.stored_embedded(session=session))
    if not embedded and set(calls) <= {MAIN}:
        return []  # the main chain made every call: nothing to split (pricing 4,500 calls took 70 ms)
    stored = (call for agent_calls in calls.values() for call in agent_calls)
    costs = cost_by_agent(stored, embedded=embedded, prices=settings.MODEL_PRICES)
    subagents = [agent for agent in dict.fromkeys([*calls, *costs]) if agent != MAIN]
    # What each was asked (two queries) and which have a file of their own (one), only where there is a subagent.
    spawns = agent_selectors.subagent_spawns(session=session) if subagents else {}
    with_files = (
        set(models.SourceFile.objects.filter(session=session, agent__in=subagents).values_list("agent", flat=True))
        if subagents
        else set()
    )
    detail = reverse("sessions:detail", args=[session.pk])
    rows = []
    for agent in subagents:
        cost = costs.get(agent)
        spawn = spawns.get(agent)
        own = agent in calls
        usage = cost.usage if cost else None
        rows.append(
            SubagentCost(
                agent=agent,
                label=(spawn.description if spawn else "") or agent or "an unnamed subagent",
                subagent_type=spawn.subagent_type if spawn else "",
                calls=len(calls[agent]) if own else sum(m.calls for m in cost.by_model) if cost else 0,
                tokens=usage.context + usage.output_tokens if usage else 0,
                cost_usd=cost.total_usd if cost else 0.0,
                inline=agent not in with_files,
                url=f"{detail}?agent={quote(agent)}" if own else None,
            )
        )
    return sorted(rows, key=lambda r: (-(r.cost_usd or 0.0), r.agent))


def subagent_costs(*, session: models.Session, calls: dict[str, list[ApiCall]] | None = None) -> dict[str, Any]:
    """The panel of what each subagent cost: every row (``subagent_rows``), their sum and the session's total.

    ``calls``: the session's calls by agent as ``timeline.call_series`` gives them (read here when not given).

    ``session_cost_usd`` is the session's own (``Session.cost_usd``, the total every page shows); the rows' sum is
    the same calls' cost split by agent, so subagents and main chain add up to it (to the micro-dollar each row is
    rounded to). ``shown``: the rows the page names one by one; ``more``: the rest, summed.
    """
    if calls is None:
        calls = timeline_selectors.call_series(session=session, detail=False)[1]
    rows = subagent_rows(session=session, calls=calls)
    priced = [r.cost_usd for r in rows if r.cost_usd is not None]
    subagents = round(sum(priced), 6) if len(priced) == len(rows) else None
    total = session.cost_usd
    rest = rows[PANEL_ROWS:]
    return {
        "rows": [r.as_json() for r in rows],
        "shown": [r.as_json() for r in rows[:PANEL_ROWS]],
        "more": {
            "subagents": len(rest),
            "calls": sum(r.calls for r in rest),
            "tokens": sum(r.tokens for r in rest),
            "cost_usd": round(sum(r.cost_usd or 0.0 for r in rest), 6),
        }
        if rest
        else None,
        "subagents": len(rows),
        "calls": sum(r.calls for r in rows),
        "tokens": sum(r.tokens for r in rows),
        "subagents_cost_usd": subagents,
        "session_cost_usd": total,
        "main_cost_usd": round(total - subagents, 6) if total is not None and subagents is not None else None,
        "percent": round(100 * subagents / total, 1) if total and subagents is not None else None,
    }
