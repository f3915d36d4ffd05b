"""Reads for the token timeline: series per agent on one call axis, markers, estimates and the running cost."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from decimal import Decimal
from typing import Any, cast

from django.conf import settings

from compaction.calls import Peak, peak_of
from compaction.costs import call_cost, exact_call_cost, round_usd
from compaction.prompt_cache import CachePolicy, lifetime_words, read_cache
from compaction.transcript import MAIN, ApiCall, Usage
from sessions_app import memory_budget, models
from sessions_app.selectors.agents import SubagentSpawn, subagent_spawns
from sessions_app.selectors.calls import CALL_FIELDS, calls_without_usage, neutral_call, session_peak
from sessions_app.selectors.thresholds import thresholds_for


def call_series(
    *, session: models.Session, agent: str | None = None, detail: bool = True
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[ApiCall]]]:
    """Each agent's recorded calls as the timeline's points (context, output, cache, model, cost), in call order,
    and the same calls as the core's ``ApiCall`` (for the cache reading); ``agent``: that agent's only.

    The one series of "context per call": the timeline, its JSON twin and the session page's sparkline
    (``selectors.glance``) all read it. ``detail=False``: the points without their time and cost (a third of the
    time on a 4,500-call session, which the sparkline does not draw). One query.
    """
    found = models.ApiCall.objects.filter(session=session)
    if agent is not None:
        found = found.filter(agent=agent)
    when = ("timestamp",) if detail else ()
    rows = list(found.order_by("agent", "number").values_list(*CALL_FIELDS, *when, "seq", "context"))
    series: dict[str, list[dict[str, Any]]] = {}
    calls: dict[str, list[ApiCall]] = {}  # per agent, for the cache reading
    for row in rows:
        call = neutral_call(*row[:-2])  # CALL_FIELDS and the timestamp
        seq, context = row[-2:]
        calls.setdefault(call.agent, []).append(call)
        if not detail:
            series.setdefault(call.agent, []).append({"call": call.number, "seq": seq, "context": context})
            continue
        usage = cast(Usage, call.usage)  # a stored call always has its usage
        model = row[4]  # as stored ("" when none): the point shows it so
        cost = call_cost(usage, model=model, overrides=settings.MODEL_PRICES)
        series.setdefault(call.agent, []).append(
            {
                "call": call.number,
                "seq": seq,
                "context": context,
                "output": usage.output_tokens,
                "cache_read": usage.cache_read_input_tokens,
                "cache_creation": usage.cache_creation_input_tokens,
                "model": model,
                "timestamp": call.timestamp,
                "cost_usd": round(cost.total, 6) if cost is not None else None,
            }
        )
    return series, calls


def timeline(*, session: models.Session, strategy: str | None = None) -> dict[str, Any]:
    """Series (one per agent), markers and thresholds; a fixed number of queries whatever the session's size."""
    memory_budget.check(session=session, reads="calls")
    series, calls = call_series(session=session)
    estimates = estimated_series(session=session)
    events = list(models.ContextEvent.objects.filter(session=session).order_by("seq", "id"))
    markers = [_event_marker(e, series.get(e.agent, [])) for e in events]
    microcompacted: dict[str, list[int]] = {}
    for event in events:
        if event.kind == "microcompact":
            # The call whose prefix it changed: the first one after it (calls are numbered from 1).
            microcompacted.setdefault(event.agent, []).append(event.after_call + 1)
    from compaction.strategies.registry import cache_policy_for_format

    cache_policy = cache_policy_for_format(session.format)
    for agent, points in series.items():
        markers.extend(
            _derived_markers(
                agent, points, calls[agent], microcompacted=microcompacted.get(agent, []), policy=cache_policy
            )
        )
    markers.sort(key=lambda m: (m["seq"], m["kind"]))
    x_of = call_axis(
        series={**calls_without_usage(session, skip=set(series)), **series}, spawns=subagent_spawns(session=session)
    )
    for agent, points in series.items():
        for point in points:
            point["x"] = x_of(agent, point["seq"])
    for marker in markers:
        marker["x"] = x_of(marker["agent"], marker["seq"])
    estimates = {agent: _one_per_x(points, agent=agent, x_of=x_of) for agent, points in estimates.items()}
    return {
        "session": session.pk,
        "format": session.format,
        "model": session.model,
        "x_axis": "call",  # main-chain API call number; a subagent's calls run on from its spawn call
        "series": series,
        "estimates": estimates,
        "estimates_ready": session.estimates_ready,
        # The one headline peak (the session's, ``compaction.calls.Peak``) and every event, in record order.
        "peak": session_peak(session=session).as_json(),
        "events": markers,
        "thresholds": thresholds_for(session=session, strategy=strategy),
        "cost": cumulative_cost(series, calls),
    }


def composition_contexts(composition: dict[str, Any]) -> list[tuple[int, int]]:
    """(call, context) at each call of a main chain's composition (``selectors.composition.composition_series``)."""
    return list(zip(composition.get("calls") or [], composition.get("context") or [], strict=True))


def estimated_peak(*, composition: dict[str, Any]) -> Peak:
    """The peak of a log whose main chain recorded no usage: the largest context of its composition
    (``composition_contexts``), the first of equals; the very points its sparkline and timeline draw
    (``main_call_estimates``) and its treemap splits."""
    return peak_of(composition_contexts(composition))


def call_axis(
    *, series: dict[str, list[dict[str, Any]]], spawns: dict[str, SubagentSpawn]
) -> Callable[[str, int], int]:
    """Where a record of an agent sits on the timeline's x axis, in main-chain calls.

    A main-chain record sits at the call it belongs to or follows ("after call N"; 0 before the first call).
    A subagent runs while its spawning call waits for the Task result: its call j sits at the spawn call + j - 1,
    so its series starts at the spawn call, however deep (calls are numbered from 1, as everywhere). A subagent no
    tool call started but whose first record points into its parent (the compaction request) starts at the call
    there (``agents.subagent_spawns``); one whose spawn is unknown starts after the main chain's last call.
    """
    seqs = {agent: [p["seq"] for p in points] for agent, points in series.items()}
    calls = {agent: [p["call"] for p in points] for agent, points in series.items()}
    start: dict[str, int] = {}

    def local_call(agent: str, seq: int) -> int:
        i = bisect.bisect_right(seqs.get(agent, []), seq) - 1
        return calls[agent][i] if i >= 0 else 0

    def origin(agent: str, visiting: frozenset[str]) -> int:
        if agent == MAIN:
            return 0
        if agent not in start:
            spawn = spawns.get(agent)
            if spawn is None or spawn.parent in visiting:
                start[agent] = calls.get(MAIN, [0])[-1] if calls.get(MAIN) else 0
            else:
                start[agent] = place(spawn.parent, spawn.seq, visiting | {agent})
        return start[agent]

    def place(agent: str, seq: int, visiting: frozenset[str] = frozenset()) -> int:
        call = local_call(agent, seq)
        if agent == MAIN:
            return call
        return origin(agent, visiting | {agent}) + max(call - 1, 0)

    return place


def _one_per_x(points: list[dict[str, Any]], *, agent: str, x_of: Callable[[str, int], int]) -> list[dict[str, Any]]:
    """Estimate points on the call axis: the first record at each call (its response), one point per x."""
    placed: list[dict[str, Any]] = []
    for point in points:
        x = x_of(agent, point["seq"])
        if not placed or placed[-1]["x"] != x:
            placed.append({**point, "x": x})
    return placed


def cumulative_cost(series: dict[str, list[dict[str, Any]]], calls: dict[str, list[ApiCall]]) -> dict[str, Any]:
    """The session's running cost over every agent's calls, in call-axis order (the timeline's cost line).

    ``calls``: each agent's calls in its points' order (``call_series``). The running sum is exact
    (``compaction.costs.exact_call_cost``) and rounded as the session's cost is, so the line ends at the cost every
    other page shows, to the last digit. Calls sharing a place on the axis (a subagent's beside the main chain's) fold
    into one point there.
    """
    pairs = sorted(
        ((p, call) for agent, points in series.items() for p, call in zip(points, calls[agent], strict=True)),
        key=lambda pair: (pair[0].get("x", 0), pair[0]["seq"]),
    )
    total = Decimal(0)
    points: list[dict[str, Any]] = []
    unpriced = 0
    for point, call in pairs:
        exact = exact_call_cost(cast(Usage, call.usage), model=call.model, overrides=settings.MODEL_PRICES)
        if exact is None:
            unpriced += 1
            continue
        total += exact
        if points and "x" in point and points[-1]["x"] == point["x"]:
            points.pop()
        points.append({"seq": point["seq"], "x": point.get("x", point["seq"]), "cumulative_usd": round_usd(total)})
    return {"points": points, "total_usd": round_usd(total), "unpriced_calls": unpriced}


def estimated_series(*, session: models.Session, agent: str | None = None) -> dict[str, list[dict[str, int]]]:
    """Per agent (``agent``: that one only): the tiktoken estimate of the conversation so far at each record, reset at
    each compaction.

    Labelled an estimate everywhere: Claude's tokenizer is not public and the system prompt and tool
    schemas are invisible in the logs, so recorded usage always wins where it exists. A main chain that recorded no
    usage has no other context line: its points are its calls' own estimates (``main_call_estimates``), on each
    call's record, so its line is the sparkline's, its peak's and its composition's.
    """
    found = models.Message.objects.filter(session=session, tokens__isnull=False)
    if agent is not None:
        found = found.filter(agent=agent)
    without_usage = agent in (None, MAIN) and not models.ApiCall.objects.filter(session=session, agent=MAIN).exists()
    if without_usage:
        found = found.exclude(agent=MAIN)
    rows = (
        found.exclude(kind__in=["bookkeeping", "unknown"])
        .order_by("agent", "seq")
        .values_list("agent", "seq", "kind", "role", "tokens", "call_number")
    )
    result: dict[str, list[dict[str, int]]] = {}
    total: dict[str, int] = {}
    seen_calls: dict[str, set[int]] = {}
    for owner, seq, kind, role, tokens, call_number in rows.iterator(chunk_size=5000):
        if kind == "compact_summary":
            total[owner] = 0  # what the model sees restarts from the summary
        if role == "meta":
            continue
        total[owner] = total.get(owner, 0) + (tokens or 0)
        points = result.setdefault(owner, [])
        # One point per API call (its first record) and per record of logs without usage.
        if call_number is not None:
            if call_number in seen_calls.setdefault(owner, set()):
                continue
            seen_calls[owner].add(call_number)
            points.append({"seq": seq, "call": call_number, "estimate": total[owner]})
        elif kind == "assistant" or not points or points[-1]["seq"] != seq:
            points.append({"seq": seq, "call": -1, "estimate": total[owner]})
    if without_usage:
        estimates = main_call_estimates(session=session) or []
        seqs = {p["call"]: p["seq"] for p in calls_without_usage(session, skip=set(result)).get(MAIN, [])}
        main = [{"seq": seqs[p["call"]], **p} for p in estimates if p["call"] in seqs]
        if main:
            result[MAIN] = main
    return result


def main_call_estimates(*, session: models.Session) -> list[dict[str, Any]] | None:
    """For a log whose main chain recorded no usage: each call's estimated context (``x`` and ``call`` its number,
    from 1 as ``api_calls_main`` counts them; ``estimate`` its context), or None until the worker has stored the
    composition of this version of the session (never, past the worker's memory budget: its pages say so).

    The context is the composition's (``services.analyse_session`` stores ``composition_series``): the records sent
    in the call's request, less the tool results the agent's prunes replaced and what its compactions summarised
    away. It is the one story of such a log: its peak (``estimated_peak``), its sparkline, its timeline's main line
    and its treemap. A running total of every record would count what the agent itself had removed. Two columns of
    the stored row are read, not its parts.
    """
    row = (
        models.SessionAnalysis.objects.filter(session=session)
        .values_list("message_count", "composition__calls", "composition__context")
        .first()
    )
    if row is None or row[0] != session.message_count:  # an analysis of another version (overview.stored_analysis)
        return None
    contexts = composition_contexts({"calls": row[1], "context": row[2]})
    return [{"x": call, "call": call, "estimate": context} for call, context in contexts]


def _event_marker(event: models.ContextEvent, points: list[dict[str, Any]]) -> dict[str, Any]:
    marker: dict[str, Any] = {
        "kind": event.kind,
        "agent": event.agent,
        "seq": event.seq,
        "line": event.line,
        "after_call": event.after_call,
        "timestamp": event.timestamp.isoformat() if event.timestamp else None,
        "trigger": event.trigger or None,
        "pre_tokens": event.pre_tokens,
        "post_tokens": event.post_tokens,
        "tokens_saved": event.tokens_saved,
        "tool_ids": event.tool_ids,
        "message": event.message[:500],
    }
    before = points[event.after_call - 1] if 0 < event.after_call <= len(points) else None
    after = points[event.after_call] if event.after_call < len(points) else None
    marker["context_before"] = before["context"] if before else None
    marker["context_after"] = after["context"] if after else None
    if event.kind == "compaction":
        # Tokens after = the next call's context (the summary plus what Claude Code re-attached).
        marker["tokens_after"] = event.post_tokens or (after["context"] if after else None)
        if before and event.pre_tokens:
            # Tool output that arrived after the last request: often the real reason for the overflow.
            marker["gap_after_last_usage"] = event.pre_tokens - before["context"]
    return marker


def _derived_markers(
    agent: str, points: list[dict[str, Any]], calls: list[ApiCall], *, microcompacted: list[int], policy: CachePolicy
) -> list[dict[str, Any]]:
    """Cache misses and idle gaps, which the logs do not mark but the usage numbers show.

    ``calls`` are the agent's stored calls (``neutral_call``), ``points`` the timeline's points of the same calls.

    Read by ``compaction.prompt_cache``, the same reading the diagnosis reports, by the cache rules of the
    session's provider (``policy``); ``microcompacted`` are the calls a microcompact of this agent preceded
    (its events' ``after_call``).
    """
    reading = read_cache(
        calls,
        microcompacted=microcompacted,
        policy=policy,
    )
    by_call = {p["call"]: p for p in points}
    markers: list[dict[str, Any]] = []
    for miss in reading.misses:
        point = by_call[miss.call]
        markers.append(
            {
                "kind": "cache_miss",
                "agent": agent,
                "seq": point["seq"],
                "call": miss.call,  # the call whose request missed the cache
                "timestamp": point["timestamp"],
                "recreated_tokens": miss.recreated_tokens,
                "cause": miss.cause,
                "message": f"cache read fell from {miss.cache_read_before:,} to {miss.cache_read:,}; "
                f"{policy.missed_words(miss.recreated_tokens)}",
            }
        )
    for gap in reading.idle_gaps:
        point = by_call[gap.call]
        markers.append(
            {
                "kind": "idle_gap",
                "agent": agent,
                "seq": point["seq"],
                "after_call": gap.previous_call,  # the pause lay between this call and the next
                "timestamp": point["timestamp"],
                "seconds": int(gap.seconds),
                "lifetime_minutes": gap.lifetime_minutes,  # of the entries the calls before it wrote
                "message": f"{gap.minutes:,} min idle, longer than the {lifetime_words(gap.lifetime_minutes)} "
                f"cache lifetime of the entries the calls before it wrote ({policy.provider})",
            }
        )
    return markers
