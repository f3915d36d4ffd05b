"""Overflow diagnosis: why a session's context grew, which lines it crossed, what (did not) compact.

Pure Python over the neutral model. Everything is read from the records: recorded usage per API call,
the context events the parser drew (compactions, microcompacts, API and overflow errors) and the messages
themselves. Sizes of messages are estimates by the session's own strategy (``Strategy.estimate``, named
by ``Strategy.estimator_label``) and are labelled as such; recorded usage wins where it exists. Where the
log cannot answer (no usage), the diagnosis says so instead of guessing.

The "why did it overflow" signal follows docs/formats/claude-code.md §13 step 6: attribute the growth
between successive recorded contexts to what arrived in between, and report the gap between a
compaction's ``preTokens`` and the last recorded context separately (output that no request reported).

``diagnose`` lays the main chain out once (``compaction.chain.session_chain``) and hands it to one function per
section of the report; each section returns typed rows, and ``Diagnosis.as_json`` is the JSON twin the page and
CLI show.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compaction.after_compaction import DEFAULT_CALLS as CALLS_AFTER_COMPACTION
from compaction.after_compaction import measure_chain
from compaction.agents import Fix, FixTopic, ToolRoles
from compaction.calls import Peak, peak_of
from compaction.chain import Chain, own_strategy, session_chain
from compaction.costs import PriceOverrides, format_usd, price_for, usage_cost
from compaction.prompt_cache import (
    ANTHROPIC_CACHE,
    EXPIRY,
    MISS_KINDS,
    MODEL_SWITCH,
    CacheMiss,
    CachePolicy,
    CacheReading,
    idle_minutes,
    lifetime_words,
    read_cache,
)
from compaction.replay import ReplayResult, api_steps, is_compaction_record, replay, session_thresholds
from compaction.strategies.base import Strategy, session_version
from compaction.strategies.registry import EDITABLE, build_strategy, default_strategy
from compaction.thresholds import Thresholds
from compaction.transcript import ApiCall, ContextEvent, Message, SessionInfo, Usage
from compaction.transforms import ToolCap, cap_tool_results
from compaction.windows import ONE_MILLION_CONTEXT_WINDOW

TOP = 10  # contributors and jumps listed
ARRIVALS_LISTED = 5  # messages listed under a jump or a compaction
NEARLY_FULL_SHARE = 0.9  # a peak this close to the window, with no compaction line below it, is told as a fill
_SCANNED_TEXT_CHARS = 2_000  # only short notices are searched for those texts
_QUOTED_CHARS = 300  # of an error or notice, in a failure row
# Without a strategy (sections called on their own) sizes are estimated as the first registered strategy does
# (``strategies.registry.default_strategy``); ``diagnose`` uses the session's own strategy's estimate and names it.
DRIFT_MEANING = (
    "recorded context growth divided by the estimate of what arrived, over calls with no "
    "compaction between them (above 1: the estimate undercounts)"
)


# ----------------------------------------------------------------------------- inputs


def call_points(messages: Sequence[Message]) -> list[ApiCall]:
    """The main chain's calls with a recorded context (``ApiCall.context`` above 0), located in ``messages``
    (``ApiCall.first``, ``ApiCall.end``)."""
    return [call for call in api_steps(messages) if call.context]


# ----------------------------------------------------------------------------- rows


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """A known context size: a recorded call, or the size a compaction or an overflow error reported."""

    position: int
    call: int
    tokens: int
    source: str


@dataclass(frozen=True, slots=True)
class Crossing:
    line: str  # warning, autocompact, blocking or window
    threshold: int
    call: int
    tokens: int
    source: str

    @property
    def before_call(self) -> bool:
        """Whether the size is one the agent reported for the request it was about to send as ``call`` (a
        compaction's preTokens, an overflow error), not that call's recorded usage: the call itself went out after the
        compaction, smaller, so "at call N" would contradict the timeline's call N."""
        return self.source != RECORDED_USAGE


@dataclass(slots=True)
class ToolContribution:
    tool: str
    results: int = 0
    chars: int = 0
    tokens_estimate: int = 0


@dataclass(frozen=True, slots=True)
class MessageContribution:
    seq: int
    line: int
    kind: str
    role: str
    tools: list[str]
    chars: int
    tokens_estimate: int


@dataclass(frozen=True, slots=True)
class ContributorScope:
    from_seq: int | None
    to_call: int | None
    tokens: int
    estimate: str = ""  # how the sizes were estimated (the strategy's ``estimator_label``)


@dataclass(frozen=True, slots=True)
class Contributors:
    by_tool: list[ToolContribution]
    by_message: list[MessageContribution]
    scope: ContributorScope


@dataclass(frozen=True, slots=True)
class Arrival:
    """A message that reached the model between two requests."""

    seq: int
    line: int
    kind: str
    tools: list[str]
    chars: int
    tokens_estimate: int


@dataclass(frozen=True, slots=True)
class Jump:
    call: int
    from_context: int
    to_context: int
    delta: int
    arrived: str
    messages: list[Arrival]

    def as_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "from": self.from_context,
            "to": self.to_context,
            "delta": self.delta,
            "arrived": self.arrived,
            "messages": [dataclasses.asdict(a) for a in self.messages],
        }


@dataclass(frozen=True, slots=True)
class Growth:
    calls: int
    median_delta: int | None
    largest_jumps: list[Jump]

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "median_delta": self.median_delta,
            "largest_jumps": [j.as_json() for j in self.largest_jumps],
        }


@dataclass(frozen=True, slots=True)
class Drift:
    recorded_per_estimated_token: float
    recorded_growth: int
    estimated_growth: int
    estimate: str = ""  # how the growth was estimated (the strategy's ``estimator_label``)
    meaning: str = DRIFT_MEANING


@dataclass(frozen=True, slots=True)
class CompactionRow:
    after_call: int  # the number of the last call before it
    seq: int | None
    line: int
    trigger: str | None
    pre_tokens: int | None
    post_tokens: int | None
    last_call: int | None
    last_context: int | None
    last_output: int | None
    gap: int | None  # preTokens minus the last recorded context: what no request reported
    arrived_after_last_call: str
    arrived: list[Arrival]
    past_threshold: int | None
    against_threshold: str = ""  # past_threshold in words: "15,078 past the threshold", "15,078 below it"
    # The first request after the compaction rebuilds the prompt (its cache writes): what it cost, in USD.
    next_call: int | None = None
    next_call_cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str  # overflow, api_error or nothing_to_compact
    after_call: int  # the number of the last call before it
    line: int
    tokens: int | None
    message: str
    followed_by: str  # compaction, call or nothing
    compaction_trigger: str | None
    failed: bool
    seq: int | None = None
    repeats: int = 1  # identical consecutive failures collapsed into this row
    last_line: int | None = None  # the line of the last of them


@dataclass(frozen=True, slots=True)
class Failures:
    rows: list[Failure]
    breaker_call: int | None  # where consecutive failed overflows open the agent's circuit breaker


@dataclass(slots=True)
class Diagnosis:
    verdict: str
    window: int
    is_1m_window: bool
    overflowed: bool
    needed_compaction: bool
    has_usage: bool
    peak: Peak  # the headline peak (``compaction.calls.peak_of`` the recorded calls); preTokens are evidence
    thresholds: Thresholds
    crossings: list[Crossing]
    contributors_by_tool: list[ToolContribution]
    contributors_by_message: list[MessageContribution]
    contributors_scope: ContributorScope
    growth: Growth
    compactions: list[CompactionRow]
    failures: list[Failure]
    cache: CacheReading
    drift: Drift | None  # None without both recorded growth and an estimate of it
    notes: list[str]
    agent: str = ""  # the session's agent, as its strategy names it (its ``short_label``)
    agent_compacts: bool = True
    estimator: str = ""  # how the sizes were estimated (the strategy's ``estimator_label``)
    recommendations: list[Finding] = dataclasses.field(default_factory=list)
    limits: list[str] = dataclasses.field(default_factory=list)  # what the data cannot support
    miss_costs: dict[int, float | None] = dataclasses.field(default_factory=dict)  # call -> USD beyond a read

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "agent": self.agent,
            "agent_compacts": self.agent_compacts,
            "estimator": self.estimator,
            "recommendations": [dataclasses.asdict(r) for r in self.recommendations],
            "limits": list(self.limits),
            "window": self.window,
            "is_1m_window": self.is_1m_window,
            "overflowed": self.overflowed,
            "needed_compaction": self.needed_compaction,
            "has_usage": self.has_usage,
            "peak": self.peak.as_json(),
            "thresholds": dataclasses.asdict(self.thresholds),
            "thresholds_rule": readable_source(self.thresholds.source),
            "crossings": [{**dataclasses.asdict(c), "before_call": c.before_call} for c in self.crossings],
            "contributors_by_tool": [dataclasses.asdict(c) for c in self.contributors_by_tool],
            "contributors_by_message": [dataclasses.asdict(c) for c in self.contributors_by_message],
            "contributors_scope": dataclasses.asdict(self.contributors_scope),
            "growth": self.growth.as_json(),
            "compactions": [dataclasses.asdict(c) for c in self.compactions],
            "failures": [dataclasses.asdict(f) for f in self.failures],
            "cache": cache_json(self.cache, miss_costs=self.miss_costs),
            "drift": dataclasses.asdict(self.drift) if self.drift else {},
            "notes": list(self.notes),
        }


def cache_json(cache: CacheReading, *, miss_costs: dict[int, float | None] | None = None) -> dict[str, Any]:
    """The cache reading as JSON; ``miss_costs``: what each miss cost beyond a cache read (USD, by call)."""
    costs = miss_costs or {}
    return {
        "ttl_minutes": cache.lifetime.minutes,
        "ttl_source": cache.lifetime.source,
        "misses": [
            {
                "call": miss.call,
                "cache_read_before": miss.cache_read_before,
                "cache_read": miss.cache_read,
                "recreated_tokens": miss.recreated_tokens,
                "idle_minutes": round(miss.idle_minutes, 1) if miss.idle_minutes is not None else None,
                "cause": miss.cause,
                "extra_cost_usd": costs.get(miss.call),
            }
            for miss in cache.misses
        ],
        "recreated_tokens": cache.recreated_tokens,
    }


# ----------------------------------------------------------------------------- helpers


def _chars(message: Message) -> int:
    return sum(len(b.text) for b in message.blocks)


def _seq(message: Message, position: int) -> int:
    # The stored record's seq (for links) when the session came from the database, else the agent's own.
    seq = message.data.get("row_seq", message.data.get("seq"))
    return seq if isinstance(seq, int) else position


def against_line(delta: int, *, line: str = "the threshold") -> str:
    """A signed distance in words: "15,078 past the threshold", "15,078 below the threshold"."""
    if delta > 0:
        return f"{delta:,} past {line}"
    if delta < 0:
        return f"{-delta:,} below {line}"
    return f"exactly at {line}"


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.0f}k"


def _tool_names(message: Message) -> list[str]:
    return [b.tool_name or "unknown tool" for b in message.blocks if b.kind == "tool_result"]


def describe_arrivals(messages: Sequence[Message], *, reaches_model: Callable[[Message], bool] | None = None) -> str:
    """ "9 tool results (Read ×4, Bash ×5; 110k characters)" for what reached the model in ``messages``.

    ``reaches_model`` is the agent's rule (``Chain.reaches_model``), the first registered strategy's without one.
    """
    sent = reaches_model or default_strategy().reaches_model
    tools: Counter[str] = Counter()
    prompts = 0
    chars = 0
    for message in messages:
        if not sent(message) or message.role == "assistant":
            continue
        names = _tool_names(message)
        tools.update(names)
        if not names and message.kind in ("prompt", "injected"):
            prompts += 1
        chars += _chars(message)
    parts: list[str] = []
    results = sum(tools.values())
    if results:
        if len(tools) == 1:
            name = next(iter(tools))
            parts.append(f"{results} {name} result{'s' if results > 1 else ''}")
        else:
            listing = ", ".join(f"{name} ×{count}" for name, count in tools.most_common())
            parts.append(f"{results} tool results ({listing})")
    if prompts:
        parts.append(f"{prompts} user message{'s' if prompts > 1 else ''}")
    if not parts:
        return "nothing that reached the model"
    return " and ".join(parts) + f" ({chars / 1000:.0f}k characters)"


def arrivals(
    messages: Sequence[Message],
    start: int,
    end: int,
    *,
    limit: int = ARRIVALS_LISTED,
    estimate: Callable[[Message], int] | None = None,
    reaches_model: Callable[[Message], bool] | None = None,
) -> list[Arrival]:
    """The largest of the user-side messages in ``messages[start:end]`` that reached the model (``estimate`` and
    ``reaches_model``: the session's strategy's, the first registered strategy's without one)."""
    sized = estimate or default_strategy().estimate
    sent = reaches_model or default_strategy().reaches_model
    rows = [
        Arrival(
            seq=_seq(messages[p], p),
            line=messages[p].line,
            kind=messages[p].kind,
            tools=_tool_names(messages[p]),
            chars=_chars(messages[p]),
            tokens_estimate=sized(messages[p]),
        )
        for p in range(start, end)
        if sent(messages[p]) and messages[p].role != "assistant"
    ]
    rows.sort(key=lambda r: r.chars, reverse=True)
    return rows[:limit]


# ----------------------------------------------------------------------------- the diagnosis


def diagnose(
    messages: Sequence[Message],
    events: Sequence[ContextEvent],
    calls: Sequence[ApiCall] | None = None,
    *,
    info: SessionInfo,
    thresholds: Thresholds | None = None,
    prices: PriceOverrides | None = None,
) -> Diagnosis:
    """Diagnose one session's main chain.

    ``events`` are the ContextEvents its parser drew (other agents' events are ignored); ``calls``
    replace the numbers recorded in ``messages`` for the calls they name (``call_points``); ``thresholds``
    defaults to the lines of the session's own agent; ``prices`` are price overrides (``compaction.costs``).
    """
    strategy = own_strategy(info=info)
    chain = session_chain(messages, events, info=info, calls=calls, strategy=strategy)
    if thresholds is None:
        thresholds = session_thresholds(strategy, chain.messages, info=info)
    version = session_version(chain.messages) or info.agent_version
    breaker = strategy.circuit_breaker(version=version)
    series = context_series(chain)
    peak = max(series, key=lambda point: point.tokens) if series else None
    contributors = largest_contributors(chain, peak=peak)
    compaction_rows = fired_compactions(chain, thresholds=thresholds, prices=prices)
    failure_report = compaction_failures(chain, breaker=breaker)
    overflowed = bool(chain.events_of("overflow")) or (peak.tokens if peak else 0) > thresholds.window
    growth = growth_per_call(chain)
    cache = cache_reading(chain, policy=strategy.cache_policy)
    return Diagnosis(
        verdict=verdict(
            chain,
            thresholds=thresholds,
            peak=peak,
            compactions=compaction_rows,
            failures=failure_report.rows,
        ),
        window=thresholds.window,
        is_1m_window=thresholds.window >= ONE_MILLION_CONTEXT_WINDOW,
        overflowed=overflowed,
        needed_compaction=needed_compaction(chain, thresholds=thresholds, peak=peak, overflowed=overflowed),
        has_usage=bool(chain.calls),
        peak=peak_of((c.number, c.context) for c in chain.calls),
        thresholds=thresholds,
        crossings=threshold_crossings(series, thresholds=thresholds),
        contributors_by_tool=contributors.by_tool,
        contributors_by_message=contributors.by_message,
        contributors_scope=contributors.scope,
        growth=growth,
        compactions=compaction_rows,
        failures=failure_report.rows,
        cache=cache,
        drift=estimator_drift(chain, strategy=strategy),
        notes=report_notes(
            chain,
            thresholds=thresholds,
            breaker_call=failure_report.breaker_call,
            agent=strategy.short_label,
            breaker=breaker,
        ),
        agent=strategy.short_label,
        agent_compacts=strategy.compacts(version=version),
        estimator=strategy.estimator_label,
        recommendations=recommendations(
            chain,
            info=info,
            strategy=strategy,
            thresholds=thresholds,
            compactions=compaction_rows,
            growth=growth,
            cache=cache,
            prices=prices,
            peak=peak,
        ),
        limits=data_limits(chain),
        miss_costs=miss_costs(chain, cache=cache, prices=prices, policy=strategy.cache_policy),
    )


def own_thresholds(chain: Chain, *, info: SessionInfo) -> Thresholds:
    """The lines of the strategy that models the session's own format (the first registered one otherwise)."""
    return session_thresholds(own_strategy(info=info), chain.messages, info=info)


RECORDED_USAGE = "recorded usage"  # a series point's source when it is a call's own usage


def context_series(chain: Chain) -> list[SeriesPoint]:
    """Recorded contexts, plus the sizes compactions (preTokens) and overflow errors reported, in order."""
    points = [SeriesPoint(c.first, c.number, c.context, RECORDED_USAGE) for c in chain.calls]
    for position, event in chain.events:
        if event.pre_tokens and event.kind in ("compaction", "overflow"):
            source = "compaction preTokens" if event.kind == "compaction" else "overflow error"
            # A reported size measured the prompt of the next request: the call after the last one before it.
            points.append(SeriesPoint(position, chain.after_call(position) + 1, event.pre_tokens, source))
    points.sort(key=lambda p: (p.position, p.call))
    return points


def threshold_crossings(series: Sequence[SeriesPoint], *, thresholds: Thresholds) -> list[Crossing]:
    """Each time the series goes from below a line to at or above it."""
    lines = [
        ("warning", thresholds.warning),
        ("autocompact", thresholds.autocompact),
        ("blocking", thresholds.blocking),
        ("window", thresholds.window),
    ]
    crossings: list[Crossing] = []
    for label, threshold in lines:
        if threshold is None:
            continue
        below = True
        for point in series:
            if point.tokens >= threshold and below:
                crossings.append(Crossing(label, threshold, point.call, point.tokens, point.source))
            below = point.tokens < threshold
    crossings.sort(key=lambda c: (c.call, c.threshold))
    return crossings


def largest_contributors(chain: Chain, *, peak: SeriesPoint | None) -> Contributors:
    """What filled the window at its fullest: the messages since the last compaction before the peak."""
    messages = chain.messages
    # A recorded peak's request holds the messages before its first record; a reported size, those before it.
    focus = peak.position if peak is not None else len(messages)
    start = chain.segment_start(focus)
    by_tool: dict[str, ToolContribution] = {}
    sized: list[tuple[int, int]] = []
    for position in range(start, min(focus, len(messages))):
        message = messages[position]
        if not chain.reaches_model(message):
            continue
        sized.append((_chars(message), position))
        for block in message.blocks:
            if block.kind != "tool_result":
                continue
            name = block.tool_name or "unknown tool"
            row = by_tool.setdefault(name, ToolContribution(tool=name))
            row.results += 1
            row.chars += len(block.text)
            row.tokens_estimate += chain.block_tokens(message, block)
    by_message = [
        MessageContribution(
            seq=_seq(messages[p], p),
            line=messages[p].line,
            kind=messages[p].kind,
            role=messages[p].role,
            tools=_tool_names(messages[p]) or [b.tool_name for b in messages[p].blocks if b.tool_name],
            chars=chars,
            tokens_estimate=chain.estimate(messages[p]),
        )
        for chars, p in sorted(sized, reverse=True)[:TOP]
    ]
    scope = ContributorScope(
        from_seq=_seq(messages[start], start) if start < len(messages) else None,
        to_call=peak.call if peak else None,
        tokens=peak.tokens if peak else 0,
        estimate=chain.estimator,
    )
    return Contributors(
        by_tool=sorted(by_tool.values(), key=lambda r: r.chars, reverse=True)[:TOP],
        by_message=by_message,
        scope=scope,
    )


def _intervals(chain: Chain) -> list[tuple[ApiCall, ApiCall, bool]]:
    """Successive recorded calls, and whether a real compaction lies between them (then it is not growth)."""
    compacted_before = [0]
    for message in chain.messages:
        compacted_before.append(compacted_before[-1] + (1 if is_compaction_record(message) else 0))
    return [
        (prev, cur, compacted_before[cur.first] != compacted_before[prev.first])
        for prev, cur in zip(chain.calls, chain.calls[1:], strict=False)
    ]


def growth_per_call(chain: Chain) -> Growth:
    """Growth per call: the median and the largest jumps with what arrived before each."""
    deltas: list[int] = []
    candidates: list[tuple[int, ApiCall, ApiCall]] = []
    for prev, cur, compacted in _intervals(chain):
        delta = cur.context - prev.context
        deltas.append(delta)
        if not compacted and delta > 0:
            candidates.append((delta, prev, cur))
    # Only the largest jumps are described: describing every interval costs more than the rest of the report.
    candidates.sort(key=lambda candidate: candidate[0], reverse=True)
    jumps: list[Jump] = []
    for delta, prev, cur in candidates[:TOP]:
        arrived_from = prev.end or prev.first
        arrived_to = cur.first
        jumps.append(
            Jump(
                call=cur.number,
                from_context=prev.context,
                to_context=cur.context,
                delta=delta,
                arrived=describe_arrivals(chain.messages[arrived_from:arrived_to], reaches_model=chain.reaches_model),
                messages=arrivals(
                    chain.messages, arrived_from, arrived_to, estimate=chain.estimate, reaches_model=chain.reaches_model
                ),
            )
        )
    return Growth(
        calls=len(chain.calls),
        median_delta=int(statistics.median(deltas)) if deltas else None,
        largest_jumps=jumps,
    )


def estimator_drift(chain: Chain, *, strategy: Strategy | None = None) -> Drift | None:
    """Recorded growth per estimated token over the intervals with no compaction; None without both.

    The estimate is ``strategy``'s own (the one its agent compares with its lines), the chain's without one.
    """
    estimate_of = strategy.estimate if strategy is not None else chain.estimate
    recorded = 0
    estimated = 0
    for prev, cur, compacted in _intervals(chain):
        if compacted:
            continue
        delta = cur.context - prev.context
        start, end = prev.first, cur.first
        estimate = sum(estimate_of(m) for m in chain.messages[start:end] if chain.reaches_model(m))
        if delta > 0 and estimate > 0:
            recorded += delta
            estimated += estimate
    if not estimated:
        return None
    return Drift(
        recorded_per_estimated_token=round(recorded / estimated, 3),
        recorded_growth=recorded,
        estimated_growth=estimated,
        estimate=strategy.estimator_label if strategy is not None else chain.estimator,
    )


def fired_compactions(
    chain: Chain, *, thresholds: Thresholds, prices: PriceOverrides | None = None
) -> list[CompactionRow]:
    """Each compaction that fired, against the last recorded context before it, and what the next call cost."""
    messages = chain.messages
    rows: list[CompactionRow] = []
    for position, event in chain.events_of("compaction"):
        following = chain.count_before(position)
        after = chain.calls[following] if following < len(chain.calls) else None
        after_cost = _call_cost(chain, after, prices=prices) if after is not None else None
        last = chain.last_call_before(position)
        arrived_from = (last.end or position) if last is not None else chain.segment_start(position)
        rows.append(
            CompactionRow(
                after_call=chain.after_call(position),
                seq=_seq(messages[position], position) if position < len(messages) else None,
                line=event.line,
                trigger=event.trigger,
                pre_tokens=event.pre_tokens,
                post_tokens=event.post_tokens,
                last_call=last.number if last else None,
                last_context=last.context if last else None,
                last_output=last.usage.output_tokens if last and last.usage else None,
                gap=(event.pre_tokens - last.context) if (last and event.pre_tokens) else None,
                arrived_after_last_call=describe_arrivals(
                    messages[arrived_from:position], reaches_model=chain.reaches_model
                ),
                arrived=arrivals(
                    messages, arrived_from, position, estimate=chain.estimate, reaches_model=chain.reaches_model
                ),
                past_threshold=(
                    event.pre_tokens - thresholds.autocompact
                    if event.pre_tokens and thresholds.autocompact is not None
                    else None
                ),
                against_threshold=(
                    against_line(event.pre_tokens - thresholds.autocompact)
                    if event.pre_tokens and thresholds.autocompact is not None
                    else ""
                ),
                next_call=after.number if after is not None else None,
                next_call_cost_usd=round(after_cost, 6) if after_cost is not None else None,
            )
        )
    return rows


def compaction_failures(chain: Chain, *, breaker: int | None = None) -> Failures:
    """Errors and what followed them, "nothing to compact" notices, and where the circuit breaker opens.

    ``breaker``: after how many consecutive failed compactions the agent stops trying (None: no such rule).
    Identical consecutive failures (an agent retrying the same request) are one row with a count.
    """
    rows: list[Failure] = []
    call_starts = chain.call_starts
    compaction_events = chain.events_of("compaction")
    consecutive = 0
    breaker_call: int | None = None
    for position, event in chain.events:
        if event.kind == "compaction":
            consecutive = 0
            continue
        if event.kind not in ("overflow", "api_error"):
            continue
        following = chain.count_before(position + 1)
        next_call_position = call_starts[following] if following < len(call_starts) else len(chain.messages) + 1
        followed = next(
            (e for p, e in compaction_events if position <= p < next_call_position and e is not event), None
        )
        if followed is not None:
            outcome = "compaction"
        elif following < len(call_starts):
            outcome = "call"
        else:
            outcome = "nothing"
        failed = event.kind == "overflow" and followed is None
        consecutive = consecutive + 1 if failed else 0
        if breaker is not None and consecutive >= breaker and breaker_call is None:
            breaker_call = chain.after_call(position)
        rows.append(
            Failure(
                kind=event.kind,
                after_call=chain.after_call(position),
                line=event.line,
                tokens=event.pre_tokens,
                message=error_text(event.message)[:_QUOTED_CHARS],
                followed_by=outcome,
                compaction_trigger=followed.trigger if followed is not None else None,
                failed=failed,
                seq=_seq(chain.messages[position], position) if position < len(chain.messages) else None,
            )
        )
    for position, message in enumerate(chain.messages):
        if message.role == "user" and message.kind == "tool_result":
            continue  # a tool's output may quote these texts; only the agent's own notices count
        text = message.text
        if len(text) <= _SCANNED_TEXT_CHARS and any(t in text for t in chain.refusals):
            rows.append(
                Failure(
                    kind="nothing_to_compact",
                    after_call=chain.after_call(position),
                    line=message.line,
                    tokens=None,
                    message=text[:_QUOTED_CHARS],
                    followed_by="nothing",
                    compaction_trigger=None,
                    failed=True,
                    seq=_seq(message, position),
                )
            )
    rows.sort(key=lambda f: (f.after_call, f.line))
    return Failures(rows=_collapsed(rows), breaker_call=breaker_call)


_QUOTED_ERROR = re.compile(r"""['"]message['"]\s*:\s*['"]([^'"]+)['"]""")


def error_text(message: str) -> str:
    """An API error as its text: the error body's innermost message instead of the body printed as a dict."""
    found = _QUOTED_ERROR.findall(message)
    if not found or "{" not in message:
        return message
    head = message[: message.index("{")].rstrip(" -:")
    return f"{head}: {found[-1]}" if head else found[-1]


# Retries of one request differ only in the request id the API gave each.
_REQUEST_ID = re.compile(r"\b(?:req|msg)_[A-Za-z0-9]+")


def _failure_key(row: Failure) -> tuple[str, int, str, str, int | None]:
    return (row.kind, row.after_call, _REQUEST_ID.sub("", row.message), row.followed_by, row.tokens)


def _collapsed(rows: Sequence[Failure]) -> list[Failure]:
    """Consecutive failures of the same kind, call, text and outcome as one row with a count."""
    out: list[Failure] = []
    for row in rows:
        prev = out[-1] if out else None
        if prev is not None and _failure_key(prev) == _failure_key(row):
            out[-1] = dataclasses.replace(prev, repeats=prev.repeats + 1, last_line=row.line)
        else:
            out.append(row)
    return out


def cache_reading(chain: Chain, *, policy: CachePolicy = ANTHROPIC_CACHE) -> CacheReading:
    """Cache lifetime and misses of the recorded calls (``compaction.prompt_cache``, shared with the timeline), by
    the prompt-cache rules of the session's provider (``policy``, its strategy's)."""
    call_starts = chain.call_starts
    microcompacted: list[int] = []
    for position, _ in chain.events_of("microcompact"):
        # The call a microcompact changed the prefix of: the first one starting after it.
        following = bisect.bisect_right(call_starts, position)
        if following < len(chain.calls):
            microcompacted.append(chain.calls[following].number)
    return read_cache(
        chain.calls,
        microcompacted=microcompacted,
        policy=policy,
    )


def needed_compaction(chain: Chain, *, thresholds: Thresholds, peak: SeriesPoint | None, overflowed: bool) -> bool:
    return (
        bool(chain.events_of("compaction"))
        or overflowed
        or (thresholds.autocompact is not None and peak is not None and peak.tokens >= thresholds.autocompact)
    )


def report_notes(
    chain: Chain,
    *,
    thresholds: Thresholds,
    breaker_call: int | None,
    agent: str = "The agent",
    breaker: int | None = None,
) -> list[str]:
    """What the reader must know to trust the numbers: missing usage, assumed lines, the window, the breaker."""
    found: list[str] = []
    if not chain.calls:
        found.append(
            "No usage is recorded in this log: threshold crossings, growth per call, cache behaviour and "
            "estimator drift cannot be read from it; message sizes are estimates."
        )
    if thresholds.assumption:
        found.append(f"Thresholds are partly assumed: {readable_source(thresholds.source)}")
    if thresholds.window >= ONE_MILLION_CONTEXT_WINDOW:
        found.append(f"1M-token window ({thresholds.window:,}): from the model or a recorded context above 200k.")
    if breaker_call is not None and breaker is not None:
        found.append(
            f"{breaker} consecutive overflows without a compaction by call {breaker_call}: "
            f"{agent}'s circuit breaker stops automatic compaction at this point."
        )
    return found


_DOC_REFERENCES = (
    re.compile(r"\s*\([^()]*(?:docs/|§)[^()]*\)"),  # "(docs/compaction/claude-code.md §1.1, §1.8)", "(§1.1-1.2)"
    re.compile(r"\s*docs/[\w./-]+\.md(?:\s*§[\d.]+(?:[-–,]\s*§?[\d.]+)*)?"),
)


def readable_source(text: str) -> str:
    """A threshold source without references to our internal docs (users cannot open them)."""
    for pattern in _DOC_REFERENCES:
        text = pattern.sub("", text)
    return text.strip()


def verdict(
    chain: Chain,
    *,
    thresholds: Thresholds,
    peak: SeriesPoint | None,
    compactions: Sequence[CompactionRow],
    failures: Sequence[Failure],
) -> str:
    """One sentence: the first overflow, else the worst compaction, else how full the window got."""
    overflows = chain.events_of("overflow")
    if overflows:
        return _overflow_verdict(chain, overflows[0], thresholds=thresholds, failures=failures)
    if compactions:
        return _compaction_verdict(compactions, thresholds=thresholds)
    return _peak_verdict(thresholds=thresholds, peak=peak if chain.calls else None)


def _overflow_verdict(
    chain: Chain, overflow: tuple[int, ContextEvent], *, thresholds: Thresholds, failures: Sequence[Failure]
) -> str:
    position, event = overflow
    window = thresholds.window
    last = chain.last_call_before(position)
    arrived_from = (last.end or position) if last is not None else 0
    size = f"{event.pre_tokens:,} tokens against the {window:,}-token window" if event.pre_tokens else "it"
    text = f"The prompt overflowed after call {chain.after_call(position)}: {size}"
    arrived = describe_arrivals(chain.messages[arrived_from:position], reaches_model=chain.reaches_model)
    if last is not None:
        text += f", after {arrived} arrived after the last request ({last.context:,} tokens recorded"
        if thresholds.autocompact is not None and last.context < thresholds.autocompact:
            text += f", below the {thresholds.autocompact:,} compaction threshold"
        text += ")"
    failure = next((f for f in failures if f.line == event.line and f.kind == "overflow"), None)
    if failure is not None and failure.followed_by == "compaction":
        return text + f"; an {failure.compaction_trigger or 'overflow'} compaction followed and the session recovered."
    return text + "; no compaction followed it."


def _compaction_verdict(compactions: Sequence[CompactionRow], *, thresholds: Thresholds) -> str:
    auto = [c for c in compactions if c.trigger != "manual"]
    worst = max(auto or compactions, key=lambda c: (c.past_threshold or 0, c.gap or 0))
    more = f" ({len(compactions)} compactions in total)" if len(compactions) > 1 else ""
    if worst.trigger == "manual":
        pre = f" at {worst.pre_tokens:,} tokens" if worst.pre_tokens else ""
        return f"A manual compaction ran after call {worst.after_call}{pre}; no automatic compaction was needed{more}."
    line = thresholds.autocompact
    pre_tokens = worst.pre_tokens
    if line is None or pre_tokens is None:
        return f"Context was compacted ({worst.trigger or 'auto'}) after call {worst.after_call}{more}."
    text = f"Context crossed the {_k(line)} autocompact threshold after call {worst.after_call}"
    if worst.gap is not None and worst.gap > 0.01 * line and worst.last_context is not None:
        text += (
            f" after {worst.arrived_after_last_call} arrived after the last request "
            f"({worst.last_context:,} tokens recorded)"
        )
    text += f"; compaction fired at {pre_tokens:,} tokens"
    past = pre_tokens - line
    text += f", {against_line(past)}"
    return text + f"{more}."


def _peak_verdict(*, thresholds: Thresholds, peak: SeriesPoint | None) -> str:
    if peak is None:
        return (
            "No usage is recorded, so the log cannot show how full the window got; no compaction or overflow "
            "was recorded."
        )
    window = thresholds.window
    window_label = "1M" if window >= ONE_MILLION_CONTEXT_WINDOW else _k(window)
    share = peak.tokens / window if window else 0
    line = thresholds.autocompact
    if (line is None or line > window) and share >= NEARLY_FULL_SHARE:
        # The agent could not have compacted in time: say why, in the strategy's own words.
        return (
            f"Context filled {peak.tokens:,} of {window:,} tokens at call {peak.call} without compacting: "
            f"{thresholds.source}."
        )
    if line is not None and peak.tokens >= line:
        return (
            f"Context reached {peak.tokens:,} tokens at call {peak.call} ({share:.0%} of the {window_label} window), "
            f"past the {_k(line)} compaction threshold, but no compaction was recorded: the log ends before the "
            "agent checked again."
        )
    text = (
        f"Context peaked at {peak.tokens:,} tokens at call {peak.call}, {share:.0%} of the {window_label} window; "
        "it never needed compaction"
    )
    if thresholds.warning is not None and peak.tokens >= thresholds.warning:
        text += f" (it passed the {_k(thresholds.warning)} warning line)"
    return text + "."


# ----------------------------------------------------------------------------- recommendations
#
# Each finding says what happened (with links to the records), what to change, and what the change would
# have done: measured by the what-if replay of the session's own strategy where the change is a strategy
# parameter or can be simulated on the transcript (``compaction.transforms``), computed from recorded usage
# and prices for cost findings, and said to be unproved where neither applies.

# Caps tried for oversized tool results, largest first: round character counts below the agents' own
# limits (klaude-code Read 50,000; Claude Code Bash 30,000 by default).
CAP_LADDER = (40_000, 30_000, 25_000, 20_000, 15_000, 10_000)
# A tool result is oversized when it alone takes this share of the window (Claude Code's own Read limit,
# 25,000 tokens, is 12.5% of a 200k window; half of that is already a large bite of the room left).
OVERSIZED_WINDOW_SHARE = 0.05
# Which tools read a file (the content of the file a path key names), explore (reads, searches, commands, the web:
# what a subagent can do in its own context) and start a subagent are the agent's tool roles (``Chain.tools``).
# One prompt's exploration worth moving to a subagent: a fifth of the window.
SUBAGENT_WINDOW_SHARE = 0.2
# Consecutive compactions with fewer calls than this between them are a loop.
LOOP_CALLS = 3
# A compaction that leaves the context above this share of the line leaves little room.
CROWDED_AFTER_SHARE = 0.7
REPEATED_LISTED = 5


@dataclass(frozen=True, slots=True)
class Evidence:
    """A record that supports a finding (the page links it)."""

    seq: int
    line: int
    label: str


@dataclass(frozen=True, slots=True)
class Detail:
    """One row of a finding's table: a file read again, a call that missed the cache."""

    subject: str  # a file path, "call 12"
    tokens: int
    count: int | None = None  # reads of the file
    minutes: float | None = None  # idle minutes before the call
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class ReplayProof:
    """The same strategy replayed on the session as recorded and with the change."""

    change: str  # "Read results capped at 25,000 characters", "a compaction reserve of 32,000 tokens"
    strategy: str
    overrides: dict[str, str]  # strategy parameters the change sets
    cap_tool: str | None
    cap_chars: int | None
    peak_before: int
    peak_after: int
    overflows_before: int
    overflows_after: int
    compactions_before: int
    compactions_after: int
    summary: str
    # Every replayed request's context added up: the input tokens the session sends (and pays for, mostly as
    # cache reads), as recorded and with the change. 0 where no replay stepped through the session.
    tokens_sent_before: int = 0
    tokens_sent_after: int = 0


@dataclass(frozen=True, slots=True)
class Finding:
    """What a session shows that costs tokens and money, and what would avoid it: the one type of the diagnosis's
    recommendations and of the findings across the archive (``sessions_app.selectors.findings``).

    ``kind``: tool_outputs (the largest tool outputs, one finding per tool, its commands or files in ``details``),
    repeated_reads, reads_after_compaction (files read again after a real compaction), cache_misses (one finding per
    cause, ``subject``: expiry, prefix_change, model_switch),
    warning_line (a session that crossed the warning line often), late_arrivals, compaction_timing, subagent.
    """

    kind: str
    title: str
    finding: str
    change: str
    effect: str  # measured (replay, cost) or why it is not
    evidence: list[Evidence]
    tokens: int = 0  # tokens at stake
    cost_usd: float | None = None  # dollars at stake (compaction.costs); None: not priced
    proof: ReplayProof | None = None  # the replayed saving, where a replay proves it
    rank: int = 0
    details: list[Detail] = dataclasses.field(default_factory=list)
    subject: str = ""  # what it is about: the tool, the cause of the misses, the line
    calls: list[int] = dataclasses.field(default_factory=list)  # the calls it links to ("call N"), first ones first
    fixes: list[Fix] = dataclasses.field(default_factory=list)  # what to paste, where the agent has one


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "es" if word.endswith("s") else "s")


def _tool_uses(messages: Sequence[Message]) -> dict[str, tuple[str, Any]]:
    """tool id -> (tool name, input) for every tool call in ``messages``."""
    found: dict[str, tuple[str, Any]] = {}
    for message in messages:
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_id:
                found[block.tool_id] = (block.tool_name or "unknown tool", block.tool_input)
    return found


def _file_of(tool_input: Any, *, tools: ToolRoles) -> str | None:
    if isinstance(tool_input, dict):
        for key in tools.path_keys:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return value
    return None


@dataclass(slots=True)
class _Replays:
    """Replays of the session's own strategy, run once each and shared by the findings."""

    messages: list[Message]
    strategy: Strategy
    info: SessionInfo
    baseline: ReplayResult | None = None
    caps: dict[ToolCap, ReplayResult] = dataclasses.field(default_factory=dict)

    def base(self) -> ReplayResult:
        if self.baseline is None:
            self.baseline = replay(self.messages, strategy=self.strategy, info=self.info)
        return self.baseline

    def capped(self, cap: ToolCap) -> ReplayResult:
        if cap not in self.caps:
            capped, _ = cap_tool_results(self.messages, cap=cap, estimate=self.strategy.estimate)
            self.caps[cap] = replay(capped, strategy=self.strategy, info=self.info)
        return self.caps[cap]

    def with_parameters(self, overrides: dict[str, str]) -> ReplayResult:
        changed = build_strategy(self.strategy.name, info=self.info, overrides=overrides)
        return replay(self.messages, strategy=changed, info=self.info)


def tokens_sent(result: ReplayResult) -> int:
    """Every replayed request's context added up: the input tokens the session sends over its calls."""
    return sum(context for _, context in result.series)


def _first(result: ReplayResult, kind: str) -> int | None:
    return next((e.after_call for e in result.events if e.kind == kind), None)


def _proof(
    change: str, before: ReplayResult, after: ReplayResult, *, overrides: dict[str, str], cap: ToolCap | None
) -> ReplayProof:
    parts = [
        f"the replay's peak goes from {before.peak.tokens:,} to {after.peak.tokens:,} tokens"
        if after.peak.tokens != before.peak.tokens
        else f"the replay's peak stays at {before.peak.tokens:,} tokens"
    ]
    overflow = _first(before, "overflow")
    if before.overflows and not after.overflows:
        parts.append(f"the overflow after call {overflow} does not happen")
    elif before.overflows != after.overflows:
        parts.append(f"overflows go from {before.overflows} to {after.overflows}")
    if before.compactions != after.compactions:
        parts.append(f"compactions go from {before.compactions} to {after.compactions}")
    else:
        first_before, first_after = _first(before, "compaction"), _first(after, "compaction")
        if first_before is not None and first_after is not None and first_before != first_after:
            parts.append(f"the first compaction comes after call {first_after} instead of after call {first_before}")
    sent_before, sent_after = tokens_sent(before), tokens_sent(after)
    if sent_after < sent_before:
        parts.append(
            f"its requests send {sent_before - sent_after:,} fewer input tokens in all "
            f"({(sent_before - sent_after) / sent_before:.0%} of {sent_before:,})"
        )
    return ReplayProof(
        change=change,
        strategy=before.strategy,
        overrides=overrides,
        cap_tool=cap.tool if cap else None,
        cap_chars=cap.max_chars if cap else None,
        peak_before=before.peak.tokens,
        peak_after=after.peak.tokens,
        overflows_before=before.overflows,
        overflows_after=after.overflows,
        compactions_before=before.compactions,
        compactions_after=after.compactions,
        summary="With " + change + ", " + ", ".join(parts) + ".",
        tokens_sent_before=sent_before,
        tokens_sent_after=sent_after,
    )


def _improves(before: ReplayResult, after: ReplayResult) -> bool:
    """Fewer overflows or compactions, or the first compaction later."""
    if after.overflows != before.overflows or after.compactions != before.compactions:
        return after.overflows < before.overflows or (
            after.overflows == before.overflows and after.compactions < before.compactions
        )
    first_before, first_after = _first(before, "compaction"), _first(after, "compaction")
    return first_before is not None and (first_after is None or first_after > first_before)


def _fits(result: ReplayResult) -> bool:
    """No overflow, and below the compaction line when the strategy has one."""
    line = result.thresholds.autocompact
    return not result.overflows and (line is None or result.peak.tokens < line)


@dataclass(slots=True)
class _Rates:
    """Per recorded call, what one more prompt token cost on it: as a write (the first call that sends it) and as a
    cache read (every later one), by the one price table (``compaction.costs``); prefix sums make what a block cost
    over the calls that carried it one subtraction."""

    index: dict[int, int]  # call number -> position in chain.calls
    write: list[float | None]
    read_sums: list[float | None]  # read_sums[i]: the read rates of calls[:i] added up (None once one is unpriced)

    @classmethod
    def of(cls, chain: Chain, *, prices: PriceOverrides | None, policy: CachePolicy) -> _Rates:
        write: list[float | None] = []
        sums: list[float | None] = [0.0]
        for call in chain.calls:
            usage, model = _call_usage(chain, call)
            price = price_for(model or call.model, overrides=prices)
            if price is None:
                write.append(None)
                sums.append(None)
                continue
            recorded = usage or call.usage or Usage()
            rates = price.rates_for(recorded.context)
            # Written as the call wrote most of its cache entries: 1-hour writes cost more than 5-minute ones.
            long = recorded.cache_creation_1h_input_tokens * 2 > recorded.cache_creation_input_tokens
            first = (rates.cache_write_1h if long else rates.cache_write_5m) if policy.writes_recorded else rates.input
            write.append(float(first) / 1_000_000)
            last = sums[-1]
            sums.append(None if last is None else last + float(rates.cache_read) / 1_000_000)
        return cls(index={c.number: i for i, c in enumerate(chain.calls)}, write=write, read_sums=sums)

    def carried(self, calls: Sequence[ApiCall], tokens: int) -> float | None:
        """What ``tokens`` cost sent with ``calls`` (consecutive): written (or sent uncached) once, then read."""
        if not calls or tokens <= 0:
            return 0.0
        first, last = self.index[calls[0].number], self.index[calls[-1].number]
        write, before, after = self.write[first], self.read_sums[first + 1], self.read_sums[last + 1]
        if write is None or before is None or after is None:
            return None
        return tokens * (write + after - before)


def _add_cost(total: float | None, cost: float | None) -> float | None:
    return None if total is None or cost is None else total + cost


def _command_of(tool_input: Any, *, tools: ToolRoles) -> str | None:
    if isinstance(tool_input, dict):
        for key in tools.command_keys:
            value = tool_input.get(key)
            if isinstance(value, list):
                # An argv list; a shell's own "-c" / "-lc" wrapper is not the command anyone typed.
                value = str(value[-1]) if len(value) >= 3 and value[1] in ("-c", "-lc") else " ".join(map(str, value))
            if isinstance(value, str) and value.strip():
                line = value.strip().splitlines()[0]
                return line if len(line) <= SUBJECT_CHARS else line[: SUBJECT_CHARS - 1] + "…"
    return None


SUBJECT_CHARS = 80  # of a command, in a finding's table


def _output_topic(tool: str, *, tools: ToolRoles) -> FixTopic | None:
    if tool in tools.read:
        return "read_output"
    if tool in tools.shell:
        return "command_output"
    return None


@dataclass(frozen=True, slots=True)
class _Output:
    position: int
    chars: int
    tokens: int
    subject: str  # the command or file, else the tool
    cost_usd: float | None  # what sending it with every later call until a compaction cost


def tool_outputs(
    chain: Chain,
    *,
    thresholds: Thresholds,
    replays: _Replays | None,
    peak: SeriesPoint | None = None,
    prices: PriceOverrides | None = None,
    policy: CachePolicy = ANTHROPIC_CACHE,
) -> list[Finding]:
    """The largest tool outputs, one finding per tool (its commands or files in the details): a tool with one result
    over ``OVERSIZED_WINDOW_SHARE`` of the window, or whose results together took that share of the peak's context.

    Tokens at stake: the tool's results (the strategy's estimate); dollars at stake: what sending them again with every
    later request until a compaction cost. The replay proves a cap where it can: the cap that avoids the overflow or
    a compaction, else what the smallest cap of the ladder saves in peak and in input tokens sent.
    """
    uses = _tool_uses(chain.messages)
    limit = int(thresholds.window * OVERSIZED_WINDOW_SHARE * 4)  # characters, at 4 per token
    floor = int(thresholds.window * OVERSIZED_WINDOW_SHARE)  # tokens of one tool's results at the peak
    rates = _Rates.of(chain, prices=prices, policy=policy) if chain.calls else None
    peak_call = next((c for c in chain.calls if peak is not None and c.number == peak.call), None)
    peak_start = chain.segment_start(peak_call.first) if peak_call is not None else 0
    by_tool: dict[str, list[_Output]] = {}
    for position, message in enumerate(chain.messages):
        for block in message.blocks:
            if block.kind != "tool_result" or not block.text:
                continue
            name = block.tool_name or "unknown tool"
            tool_input = uses.get(block.tool_id or "", ("", None))[1]
            subject = _command_of(tool_input, tools=chain.tools) if name in chain.tools.shell else None
            subject = subject or _file_of(tool_input, tools=chain.tools) or name
            tokens = chain.block_tokens(message, block)
            cost = rates.carried(chain.carried_by(position), tokens) if rates is not None else None
            by_tool.setdefault(name, []).append(_Output(position, len(block.text), tokens, subject, cost))
    found: list[Finding] = []
    for tool, rows in by_tool.items():
        at_peak = sum(r.tokens for r in rows if peak_call is not None and peak_start <= r.position < peak_call.first)
        largest = max(rows, key=lambda r: r.chars)
        if largest.chars < limit and at_peak < floor:
            continue
        found.append(
            _tool_finding(
                chain, tool, rows, largest=largest, at_peak=at_peak, peak=peak, thresholds=thresholds, replays=replays
            )
        )
    found.sort(key=lambda f: (-(f.cost_usd or 0), -f.tokens))
    return found


def _tool_finding(
    chain: Chain,
    tool: str,
    rows: list[_Output],
    *,
    largest: _Output,
    at_peak: int,
    peak: SeriesPoint | None,
    thresholds: Thresholds,
    replays: _Replays | None,
) -> Finding:
    tokens = sum(r.tokens for r in rows)
    cost: float | None = 0.0
    for row in rows:
        cost = _add_cost(cost, row.cost_usd)
    if replays is None:
        cost = None
    subjects: dict[str, list[_Output]] = {}
    for row in rows:
        subjects.setdefault(row.subject, []).append(row)
    details: list[Detail] = []
    for subject, same in subjects.items():
        subject_cost: float | None = 0.0
        for row in same:
            subject_cost = _add_cost(subject_cost, row.cost_usd)
        details.append(
            Detail(
                subject=subject,
                tokens=sum(r.tokens for r in same),
                count=len(same),
                cost_usd=round(subject_cost, 6) if subject_cost is not None and replays is not None else None,
            )
        )
    details.sort(key=lambda d: (-(d.cost_usd or 0), -d.tokens))
    biggest = sorted(rows, key=lambda r: r.chars, reverse=True)[:REPEATED_LISTED]
    evidence = [
        Evidence(
            _seq(chain.messages[r.position], r.position),
            chain.messages[r.position].line,
            f"{tool} {r.subject}: {r.chars:,} characters",
        )
        for r in biggest
    ]
    share = (
        f"; {at_peak:,} of them were in the context at the {peak.tokens:,}-token peak ({at_peak / peak.tokens:.0%})"
        if peak is not None and peak.tokens and at_peak
        else ""
    )
    money = (
        f" Sent again with every later request until a compaction, they cost {format_usd(cost)}."
        if cost is not None
        else ""
    )
    finding = (
        f"{_plural(len(rows), tool + ' result')}, about {tokens:,} tokens in all (estimated){share}; the largest is "
        f"{largest.subject} ({largest.chars:,} characters).{money}"
    )
    topic = _output_topic(tool, tools=chain.tools)
    change = (
        "Read only the part of a file you need (search first, then read a range)."
        if topic == "read_output"
        else "Keep command output short (filter, page or tail it; write long logs to a file and search it)."
        if topic == "command_output"
        else f"Cap {tool} results so that one result stays small."
    )
    proof, effect = _cap_proof(chain, tool, largest=largest.chars, thresholds=thresholds, replays=replays)
    if proof is not None and proof.cap_chars:
        change += f" The replay caps {tool} results at {proof.cap_chars:,} characters to measure it."
    return Finding(
        kind="tool_outputs",
        title=f"Large {tool} outputs",
        finding=finding,
        change=change,
        effect=effect,
        evidence=evidence,
        tokens=tokens,
        cost_usd=round(cost, 6) if cost is not None else None,
        proof=proof,
        details=details,
        subject=tool,
        calls=[chain.after_call(r.position) + 1 for r in biggest],
        fixes=chain.fixes_for(topic) if topic is not None else [],
    )


def _cap_proof(
    chain: Chain, tool: str, *, largest: int, thresholds: Thresholds, replays: _Replays | None
) -> tuple[ReplayProof | None, str]:
    """The replayed cap on one tool's results and the effect in words: the cap that avoids an overflow or a
    compaction where one does, else what the smallest cap of the ladder saves."""
    if replays is None:
        return None, "Not replayed: the session records no usage."
    before = replays.base()
    recorded_overflow = next(((p, e) for p, e in chain.events_of("overflow") if e.pre_tokens), None)
    if not before.overflows and recorded_overflow is not None:
        # The overflowing request got no response, so the replay has no step for it (the agent gave up):
        # measure the cap on the size the error reported instead.
        proof = _capped_overflow(
            chain, recorded_overflow, tool=tool, largest=largest, strategy=replays.strategy, thresholds=thresholds
        )
        if proof is not None:
            return proof, proof.summary
        return None, (
            f"No cap down to {CAP_LADDER[-1]:,} characters would have kept the overflowing prompt within the window."
        )
    if before.overflows or before.compactions:
        tried: list[tuple[ToolCap, ReplayResult]] = []
        for size in CAP_LADDER:
            if size >= largest:
                continue
            cap = ToolCap(tool, size)
            after = replays.capped(cap)
            tried.append((cap, after))
            if _fits(after) or (before.overflows and not after.overflows and size == CAP_LADDER[-1]):
                break
        helping = [(c, r) for c, r in tried if _improves(before, r)]
        good = next(((c, r) for c, r in helping if _fits(r)), None) or (helping[0] if helping else None)
        if good is not None:
            proof = _proof(good[0].label, before, good[1], overrides={}, cap=good[0])
            return proof, proof.summary
    if largest > CAP_LADDER[-1]:
        cap = ToolCap(tool, CAP_LADDER[-1])
        after = replays.capped(cap)
        if after.peak.tokens < before.peak.tokens or tokens_sent(after) < tokens_sent(before):
            proof = _proof(cap.label, before, after, overrides={}, cap=cap)
            return proof, proof.summary
    if largest <= CAP_LADDER[-1]:
        return None, (
            f"Not replayed: no {tool} result is longer than {CAP_LADDER[-1]:,} characters, the smallest cap tried; "
            "it is their number that adds up."
        )
    return None, f"No cap down to {CAP_LADDER[-1]:,} characters changes the replay."


def _capped_overflow(
    chain: Chain,
    overflow: tuple[int, ContextEvent],
    *,
    tool: str,
    largest: int,
    strategy: Strategy,
    thresholds: Thresholds,
) -> ReplayProof | None:
    """The largest cap that brings a recorded overflowing prompt within the window (and under the line)."""
    position, event = overflow
    assert event.pre_tokens is not None
    start = chain.segment_start(position)
    window = thresholds.window
    line = thresholds.autocompact
    for size in CAP_LADDER:
        if size >= largest:
            continue
        cap = ToolCap(tool, size)
        capped, _ = cap_tool_results(chain.messages[start:position], cap=cap, estimate=strategy.estimate)
        saved = sum(strategy.estimate(m) for m in chain.messages[start:position]) - sum(
            strategy.estimate(m) for m in capped
        )
        after = event.pre_tokens - saved
        if after < window and (line is None or after < line or size == CAP_LADDER[-1]):
            call = chain.after_call(position)
            return ReplayProof(
                change=cap.label,
                strategy=strategy.name,
                overrides={},
                cap_tool=tool,
                cap_chars=size,
                peak_before=event.pre_tokens,
                peak_after=after,
                overflows_before=1,
                overflows_after=0,
                compactions_before=0,
                compactions_after=0,
                summary=(
                    f"With {cap.label}, the prompt that overflowed after call {call} ({event.pre_tokens:,} tokens) "
                    f"would have been about {after:,} tokens, within the {window:,}-token window "
                    f"({saved:,} tokens fewer by {strategy.short_label}'s own estimate; the log has no request after "
                    "the overflow for the replay to step on)."
                ),
            )
    return None


def _fresh_content(tokens: int, *, strategy: Strategy) -> str:
    """The effect of a finding about files read again: not replayed, and at most how many tokens."""
    return (
        f"Not replayed: the agent may have needed fresh content. At most {tokens:,} tokens "
        f"(estimated as {strategy.short_label} counts) would have stayed out of the context."
    )


def repeated_reads(
    chain: Chain,
    *,
    strategy: Strategy,
    prices: PriceOverrides | None = None,
    policy: CachePolicy = ANTHROPIC_CACHE,
) -> list[Finding]:
    """Files read more than once while an earlier read was still in context (no compaction between)."""
    uses = _tool_uses(chain.messages)
    compactions = sorted(chain.compaction_positions())
    reads: dict[tuple[int, str], list[tuple[int, int, str]]] = {}  # (segment, file) -> [(position, tokens, text)]
    for position, message in enumerate(chain.messages):
        for block in message.blocks:
            if block.kind != "tool_result" or block.is_error:
                continue
            name, tool_input = uses.get(block.tool_id or "", ("", None))
            path = _file_of(tool_input, tools=chain.tools)
            if path is None or name not in chain.tools.read:
                continue
            segment = bisect.bisect_left(compactions, position)
            reads.setdefault((segment, path), []).append((position, chain.block_tokens(message, block), block.text))
    rows: list[tuple[int, str, list[tuple[int, int, str]]]] = []
    for (_, path), found in reads.items():
        if len(found) < 2:
            continue
        wasted = sum(tokens for _, tokens, _ in found[1:])
        rows.append((wasted, path, found))
    if not rows:
        return []
    rows.sort(key=lambda row: row[0], reverse=True)
    wasted_total = sum(row[0] for row in rows)
    # Dollars at stake: each repeat sent again with every later request until a compaction.
    rates = _Rates.of(chain, prices=prices, policy=policy) if chain.calls else None
    costs: dict[str, float | None] = {}
    for _, path, found in rows:
        cost: float | None = 0.0 if rates is not None else None
        for position, tokens, _ in found[1:]:
            cost = _add_cost(cost, rates.carried(chain.carried_by(position), tokens) if rates is not None else None)
        costs[path] = cost
    total_cost: float | None = 0.0 if rates is not None else None
    for cost in costs.values():
        total_cost = _add_cost(total_cost, cost)
    evidence: list[Evidence] = []
    lines: list[str] = []
    for wasted, path, found in rows[:REPEATED_LISTED]:
        same = sum(1 for _, _, text in found[1:] if text == found[0][2])
        lines.append(
            f"{path} read {len(found)} times ({wasted:,} tokens in the repeats"
            + (f", {same} with identical content" if same else "")
            + ")"
        )
        evidence.extend(
            Evidence(_seq(chain.messages[p], p), chain.messages[p].line, f"read {i + 1} of {path}: {tokens:,} tokens")
            for i, (p, tokens, _) in enumerate(found[:3])
        )
    return [
        Finding(
            kind="repeated_reads",
            title="The same files read again and again",
            finding=(
                f"{_plural(len(rows), 'file')} read more than once while the earlier read was still in context, "
                f"{wasted_total:,} tokens (estimated) in the repeats: " + "; ".join(lines) + "."
            ),
            change=(
                "Keep the needed part of a file in the conversation (a note, an excerpt) instead of reading it again, "
                "or read only the changed range."
            ),
            effect=_fresh_content(wasted_total, strategy=strategy),
            evidence=evidence,
            tokens=wasted_total,
            cost_usd=round(total_cost, 6) if total_cost is not None else None,
            details=[
                Detail(
                    subject=path,
                    tokens=wasted,
                    count=len(found),
                    cost_usd=round(cost, 6) if (cost := costs[path]) is not None else None,
                )
                for wasted, path, found in rows
            ],
            subject="files",
            calls=[chain.after_call(p) + 1 for _, path, found in rows[:REPEATED_LISTED] for p, _, _ in found[1:2]],
            fixes=chain.fixes_for("repeated_reads"),
        )
    ]


def reads_after_compactions(
    chain: Chain, *, strategy: Strategy, prices: PriceOverrides | None = None, policy: CachePolicy = ANTHROPIC_CACHE
) -> list[Finding]:
    """Files read again in the calls after a real compaction that were read before it (``compaction.after_compaction``,
    over its ``DEFAULT_CALLS``): what the summary did not carry. Tokens at stake: the re-read results' tokens."""
    measured = measure_chain(chain, tools=chain.tools)
    repeats = [r for a in measured.compactions for r in a.reads_again]
    if not repeats:
        return []
    rates = _Rates.of(chain, prices=prices, policy=policy) if chain.calls else None
    by_path: dict[str, tuple[int, int, float | None]] = {}  # path -> (tokens, times, dollars)
    for repeat in repeats:
        cost: float | None = 0.0 if rates is not None else None
        for position, tokens in repeat.results:
            cost = _add_cost(cost, rates.carried(chain.carried_by(position), tokens) if rates is not None else None)
        tokens, times, before = by_path.get(repeat.subject, (0, 0, 0.0 if rates is not None else None))
        by_path[repeat.subject] = (tokens + repeat.tokens, times + repeat.times, _add_cost(before, cost))
    rows = sorted(by_path.items(), key=lambda item: item[1][0], reverse=True)
    total = sum(tokens for _, (tokens, _, _) in rows)
    total_cost: float | None = 0.0 if rates is not None else None
    for _, (_, _, cost) in rows:
        total_cost = _add_cost(total_cost, cost)
    listed = "; ".join(f"{path} ({times:,}×, {tokens:,} tokens)" for path, (tokens, times, _) in rows[:REPEATED_LISTED])
    evidence = [
        Evidence(_seq(chain.messages[p], p), chain.messages[p].line, f"{r.subject} read again: {t:,} tokens")
        for r in repeats[:REPEATED_LISTED]
        for p, t in r.results[:1]
    ]
    count = len(measured.compactions)
    return [
        Finding(
            kind="reads_after_compaction",
            title="Files read again after compactions",
            finding=(
                f"{_plural(len(rows), 'file')} read before a compaction read again in the {CALLS_AFTER_COMPACTION} "
                f"calls after it ({_plural(count, 'compaction')}), {total:,} tokens (estimated) in the reads again: "
                f"{listed}."
            ),
            change=(
                "Have the summary keep what was learned from these files (the instructions lab compares summary "
                "instructions on your own history), or read only the range needed."
            ),
            effect=_fresh_content(total, strategy=strategy),
            evidence=evidence,
            tokens=total,
            cost_usd=round(total_cost, 6) if total_cost is not None else None,
            details=[
                Detail(subject=path, tokens=tokens, count=times, cost_usd=round(cost, 6) if cost is not None else None)
                for path, (tokens, times, cost) in rows
            ],
            subject="files",
            calls=[r.call for r in repeats[:REPEATED_LISTED]],
        )
    ]


def late_arrivals(
    chain: Chain,
    *,
    thresholds: Thresholds,
    compactions: Sequence[CompactionRow],
    strategy: Strategy,
    replays: _Replays | None,
) -> list[Finding]:
    """Bursts of results after the last recorded usage that carried the context past a line unseen."""
    found: list[Finding] = []
    line = thresholds.autocompact
    candidates: list[tuple[int, ContextEvent]] = [
        (p, e) for p, e in chain.events if e.kind in ("overflow", "compaction") and e.pre_tokens
    ]
    seen_calls: set[int] = set()
    for position, event in candidates:
        last = chain.last_call_before(position)
        if last is None or event.pre_tokens is None or last.number in seen_calls:
            continue
        gap = event.pre_tokens - last.context
        target = line if line is not None else thresholds.window
        if gap < OVERSIZED_WINDOW_SHARE * thresholds.window or last.context >= target or event.pre_tokens < target:
            continue  # a small burst, the last request already past the line, or the burst did not cross it
        seen_calls.add(last.number)
        start = last.end or position
        burst = arrivals(
            chain.messages,
            start,
            position,
            limit=ARRIVALS_LISTED,
            estimate=chain.estimate,
            reaches_model=chain.reaches_model,
        )
        described = describe_arrivals(chain.messages[start:position], reaches_model=chain.reaches_model)
        what = "overflow" if event.kind == "overflow" else f"{event.trigger or 'auto'} compaction"
        finding = (
            f"{described} arrived after the last request ({last.context:,} tokens recorded at call {last.number}, "
            f"{target - last.context:,} below the {target:,} line); the next prompt was {event.pre_tokens:,} tokens "
            f"({gap:,} more than any request reported) and ended in an {what}."
        )
        proof: ReplayProof | None = None
        counts = strategy.replay_rules(thresholds=thresholds, summary_tokens=0, version=None).counts
        if line is None:
            change = (
                f"This {strategy.short_label} version does not compact, so nothing could make room: fewer parallel "
                "reads, capped results (see the oversized results) or a version that compacts."
            )
            effect = "See the cap under oversized results, where one applies."
        elif counts == "last_usage":
            # An agent that compares only the last usage with its line cannot see a burst coming: only a
            # larger reserve makes it compact before the burst.
            reserve_key = "reserve_tokens"
            needed = thresholds.window - last.context + 1
            reserve = -(-needed // 1000) * 1000
            change = (
                f"Compact earlier: {strategy.short_label} compares only the last recorded usage with its line, so "
                f"a burst of results is invisible to it. A reserve of {reserve:,} tokens (its compaction reserve "
                f"setting) would have compacted before call {last.number + 1}; fewer parallel reads would too."
            )
            effect = "Not replayed: the session records no usage."
            if replays is not None and reserve_key in EDITABLE.get(strategy.name, ()):
                before = replays.base()
                after = replays.with_parameters({reserve_key: str(reserve)})
                proof = _proof(
                    f"a compaction reserve of {reserve:,} tokens",
                    before,
                    after,
                    overrides={reserve_key: str(reserve)},
                    cap=None,
                )
                effect = proof.summary
        else:
            change = (
                f"{strategy.short_label} counts what arrived since the last request, but only when it sends the next "
                "one: fewer parallel tool calls per turn, or capped results (see the oversized results), keep a "
                "burst from jumping past the line."
            )
            effect = "See the replayed cap under oversized results, where one applies."
        found.append(
            Finding(
                kind="late_arrivals",
                title="A burst of results after the last recorded usage",
                finding=finding,
                change=change,
                effect=effect,
                evidence=[
                    Evidence(a.seq, a.line, f"{', '.join(a.tools) or a.kind}: {a.chars:,} characters") for a in burst
                ],
                tokens=gap,
                proof=proof,
            )
        )
    return found


def _call_cost(chain: Chain, call: ApiCall, *, prices: PriceOverrides | None) -> float | None:
    usage, model = _call_usage(chain, call)
    price = price_for(model, overrides=prices) if usage is not None else None
    return usage_cost(usage, price=price).total if usage is not None and price is not None else None


def miss_costs(
    chain: Chain, *, cache: CacheReading, prices: PriceOverrides | None, policy: CachePolicy = ANTHROPIC_CACHE
) -> dict[int, float | None]:
    """What each cache miss cost beyond reading the same tokens from a warm cache (USD, None without a price):
    the writes it made (Anthropic), or the input it sent uncached (a provider that bills no writes)."""
    by_index = {c.number: c for c in chain.calls}
    found: dict[int, float | None] = {}
    for miss in cache.misses:
        call = by_index.get(miss.call)
        usage, model = _call_usage(chain, call) if call is not None else (None, None)
        price = price_for(model, overrides=prices) if usage is not None else None
        if usage is None or price is None:
            found[miss.call] = None
            continue
        rates = price.rates_for(usage.context)
        as_read = miss.recreated_tokens * rates.cache_read / 1_000_000
        if not policy.writes_recorded:
            found[miss.call] = round(miss.recreated_tokens * rates.input / 1_000_000 - as_read, 6)
            continue
        written = usage_cost(usage, price=price)
        found[miss.call] = round(written.cache_write_5m + written.cache_write_1h - as_read, 6)
    return found


def _call_usage(chain: Chain, call: ApiCall) -> tuple[Usage | None, str | None]:
    position = call.first if call.end else -1  # a call not located in the messages has no records there
    if 0 <= position < len(chain.messages):
        message = chain.messages[position]
        return message.usage, message.model
    return None, None


_MISS_TITLES = {
    EXPIRY: "Cache misses after idle gaps (expiry)",
    "prefix_change": "Cache misses from a changed prompt prefix",
    MODEL_SWITCH: "Cache misses after a model switch",
}


def cache_misses(
    chain: Chain, *, cache: CacheReading, prices: PriceOverrides | None, policy: CachePolicy = ANTHROPIC_CACHE
) -> list[Finding]:
    """Full cache misses by cause (``CacheMiss.kind``: expiry with the lifetime the session's writes recorded, a
    changed prefix, a model switch), one finding per cause, with what re-sending the prefix cost beyond a cache read.

    Expiry needs a documented lifetime (``policy``): without one no gap can be said to be longer than it.
    """
    found: list[Finding] = []
    costs = miss_costs(chain, cache=cache, prices=prices, policy=policy)
    for kind in MISS_KINDS:
        misses = [m for m in cache.misses if m.kind == kind]
        if misses:
            found.append(_miss_finding(chain, kind, misses, costs=costs, cache=cache, policy=policy))
    return found


def _miss_finding(
    chain: Chain,
    kind: str,
    misses: list[CacheMiss],
    *,
    costs: dict[int, float | None],
    cache: CacheReading,
    policy: CachePolicy,
) -> Finding:
    by_index = {c.number: c for c in chain.calls}
    extra_total: float | None = 0.0
    evidence: list[Evidence] = []
    rows: list[str] = []
    details: list[Detail] = []
    for miss in misses:
        call = by_index.get(miss.call)
        extra = costs.get(miss.call)
        extra_total = _add_cost(extra_total, extra)
        details.append(
            Detail(
                subject=f"call {miss.call}",
                tokens=miss.recreated_tokens,
                minutes=round(miss.idle_minutes, 1) if miss.idle_minutes is not None else None,
                cost_usd=round(extra, 6) if extra is not None else None,
            )
        )
        when = (
            f"after {idle_minutes(miss.idle_seconds):,} idle minutes"
            if miss.idle_seconds is not None
            else "after a gap"
        )
        if kind == MODEL_SWITCH:
            when = miss.cause
        rows.append(
            f"call {miss.call} {when}: {policy.missed_words(miss.recreated_tokens)}"
            + (f" ({format_usd(extra)} more than a cache read)" if extra is not None else "")
        )
        if call is not None and call.end:
            message = chain.messages[call.first]
            evidence.append(Evidence(_seq(message, call.first), message.line, f"call {miss.call}"))
    recreated = sum(m.recreated_tokens for m in misses)
    lifetime = cache.lifetime.minutes
    long = policy.long_lifetime_minutes
    if kind == EXPIRY:
        minutes = sorted({m.lifetime_minutes for m in misses if m.lifetime_minutes is not None})
        lifetimes = " or ".join(lifetime_words(m) for m in minutes) or "cache"
        finding = (
            f"{_plural(len(misses), 'full cache miss')} after idle gaps longer than the {lifetimes} cache lifetime "
            f"({policy.provider}): " + "; ".join(rows) + f". The lifetime is the recorded one: {cache.lifetime.source}."
        )
        change = (
            f"Resume within the cache lifetime, or write {lifetime_words(long)} cache entries when pauses are usual "
            f"(a {lifetime_words(long)} write costs more, a miss costs the whole prefix again)."
            if long is not None and lifetime is not None and lifetime < long
            else f"The session already writes {lifetime_words(lifetime or 0)} entries: after a longer pause, a new "
            "session (or a compaction before the pause) re-writes a smaller prompt than the whole history."
            if long is not None
            else "Resume within the cache lifetime: after a longer pause, a new session (or a compaction before "
            "the pause) sends a smaller prompt than the whole history."
        )
    elif kind == MODEL_SWITCH:
        finding = f"{_plural(len(misses), 'full cache miss')} right after a switch of model: " + "; ".join(rows) + "."
        change = "Each model has its own cache: switch models at the start of a session or right after a compaction."
    else:
        finding = (
            f"{_plural(len(misses), 'full cache miss')} with no idle gap past the lifetime to explain them: the "
            "start of the prompt changed (a microcompact, edited instructions or tools) or the cache was evicted: "
            + "; ".join(rows)
            + "."
        )
        change = (
            "Keep the start of the prompt the same through a session: edit the instructions file and the tools "
            "between sessions, not during one."
        )
    return Finding(
        kind="cache_misses",
        title=_MISS_TITLES[kind],
        finding=finding,
        change=change,
        effect=(
            f"{policy.missed_words(recreated)}, {format_usd(extra_total)} more than reading them from the cache."
            if extra_total is not None
            else f"{policy.missed_words(recreated)}; no price is known for this model, so no cost is given."
        ),
        evidence=evidence,
        tokens=recreated,
        cost_usd=round(extra_total, 6) if extra_total is not None else None,
        details=details,
        subject=kind,
        calls=[m.call for m in misses],
    )


# A session crossed the warning line often: this many separate crossings (the context rose past it again after a
# compaction or a drop), or this many calls above it.
WARNING_CROSSINGS = 2
WARNING_CALLS = 10


def warning_line(
    chain: Chain, *, thresholds: Thresholds, prices: PriceOverrides | None, policy: CachePolicy = ANTHROPIC_CACHE
) -> list[Finding]:
    """A session that crossed its agent's warning line (the compaction line where the agent draws none) often:
    tokens at stake are what every call above the line sent past it, priced as cache reads."""
    line, name = (thresholds.warning, "warning") if thresholds.warning else (thresholds.autocompact, "compaction")
    if line is None or not chain.calls:
        return []
    above = [c for c in chain.calls if c.context >= line]
    crossings = [
        c
        for prev, c in zip([None, *chain.calls], chain.calls, strict=False)
        if c.context >= line and (prev is None or prev.context < line)
    ]
    if len(crossings) < WARNING_CROSSINGS and len(above) < WARNING_CALLS:
        return []
    past = sum(c.context - line for c in above)
    cost: float | None = 0.0
    for call in above:
        usage, model = _call_usage(chain, call)
        price = price_for(model or call.model, overrides=prices)
        rate = float(price.rates_for(call.context).cache_read) if price is not None else None
        cost = _add_cost(cost, (call.context - line) * rate / 1_000_000 if rate is not None else None)
    return [
        Finding(
            kind="warning_line",
            title=f"Often past the {name} line",
            finding=(
                f"The context crossed the {line:,}-token {name} line {_plural(len(crossings), 'time')} and "
                f"{_plural(len(above), 'call')} sent more than it, {past:,} tokens past the line in all"
                + (f" ({format_usd(cost)} at the cache-read price)." if cost is not None else ".")
            ),
            change=(
                "Compact earlier (a lower compaction line), compact at the end of each task, or start a new session "
                "for a new task: every call near the window re-sends the whole history."
            ),
            effect="See the settings simulator and the what-if replay for the effect of a lower line.",
            evidence=[],
            tokens=past,
            cost_usd=round(cost, 6) if cost is not None else None,
            subject=name,
            calls=[c.number for c in crossings],
            fixes=chain.fixes_for("warning_line"),
        )
    ]


def compaction_timing(
    chain: Chain, *, thresholds: Thresholds, compactions: Sequence[CompactionRow], growth: Growth
) -> list[Finding]:
    """Compactions that came too often or left little room, and a line set too close to the window."""
    found: list[Finding] = []
    line = thresholds.autocompact
    auto = [c for c in compactions if c.trigger != "manual"]
    by_call = {c.number: c for c in chain.calls}
    crowded: list[tuple[CompactionRow, int]] = []
    for row in auto:
        after = next((c for c in chain.calls if c.number > row.after_call), None)
        if after is not None and line is not None and after.context >= CROWDED_AFTER_SHARE * line:
            crowded.append((row, after.context))
    loops = [(a, b) for a, b in zip(auto, auto[1:], strict=False) if b.after_call - a.after_call < LOOP_CALLS]
    if crowded or loops:
        parts: list[str] = []
        if crowded:
            parts.append(
                "; ".join(
                    f"after the compaction after call {row.after_call} the context was still {after:,} tokens "
                    f"({after / line:.0%} of the {line:,} line)"
                    for row, after in crowded[:REPEATED_LISTED]
                    if line
                )
            )
        if loops:
            parts.append(
                f"{_plural(len(loops), 'compaction')} followed another within {LOOP_CALLS} calls "
                f"(after calls {', '.join(str(b.after_call) for _, b in loops[:REPEATED_LISTED])}): a compaction loop"
            )
        found.append(
            Finding(
                kind="compaction_timing",
                title="Compactions that leave little room",
                finding="; ".join(parts) + ".",
                change=(
                    "What survives a compaction (recent messages kept, files re-attached, the summary) is close to "
                    "the line: keep fewer recent messages, or start a new session for a new task."
                ),
                effect="Not replayed: what the agent keeps after a compaction is its own choice at the time.",
                evidence=[
                    Evidence(row.seq, row.line, f"compaction after call {row.after_call}")
                    for row, _ in crowded[:REPEATED_LISTED]
                    if row.seq is not None
                ],
                tokens=sum(after for _, after in crowded),
            )
        )
    if line is not None and growth.largest_jumps:
        jump = growth.largest_jumps[0]
        room = thresholds.window - line
        if jump.delta > room and by_call:
            found.append(
                Finding(
                    kind="compaction_timing",
                    title="The compaction line is close to the window",
                    finding=(
                        f"The largest growth between two requests was {jump.delta:,} tokens (call {jump.call}), "
                        f"more than the {room:,} tokens between the {line:,} compaction line and the "
                        f"{thresholds.window:,}-token window: one such turn can overflow before the agent compacts."
                    ),
                    change="Set the compaction line lower, by at least the largest turn, or keep turns smaller.",
                    effect="See the replays of the other findings for the effect of a change.",
                    evidence=[
                        Evidence(m.seq, m.line, f"{', '.join(m.tools) or m.kind}: {m.chars:,} characters")
                        for m in jump.messages
                    ],
                    tokens=jump.delta,
                )
            )
    return found


def subagent_candidates(chain: Chain, *, thresholds: Thresholds) -> list[Finding]:
    """One prompt's exploration (reads, searches, commands) large enough to have been a subagent's job.

    None for an agent without a tool that starts a subagent: there is nothing to ask it for.
    """
    if not chain.tools.spawn:
        return []
    limit = SUBAGENT_WINDOW_SHARE * thresholds.window
    uses = _tool_uses(chain.messages)
    turns: list[tuple[int, int, int]] = []  # (estimated tokens, first position, prompt position)
    prompt = 0
    tokens = 0
    first: int | None = None
    delegated = False

    def close() -> None:
        if tokens >= limit and not delegated and first is not None:
            turns.append((tokens, first, prompt))

    for position, message in enumerate(chain.messages):
        if message.kind == "prompt":
            close()
            prompt, tokens, first, delegated = position, 0, None, False
            continue
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_name in chain.tools.spawn:
                delegated = True
            if block.kind == "tool_result":
                name = uses.get(block.tool_id or "", (block.tool_name or "", None))[0]
                if name in chain.tools.exploration:
                    tokens += chain.block_tokens(message, block)
                    first = position if first is None else first
    close()
    if not turns:
        return []
    turns.sort(reverse=True)
    total = sum(t for t, _, _ in turns)
    return [
        Finding(
            kind="subagent",
            title="Exploration a subagent could have done",
            finding=(
                f"{_plural(len(turns), 'prompt')} led to reads, searches and commands of more than "
                f"{int(limit):,} tokens each in the main context ({total:,} tokens in all, estimated), with no "
                "subagent."
            ),
            change=(
                f"Ask for a subagent ({' or '.join(sorted(chain.tools.spawn))}) for broad exploration: it reads in its "
                "own context and returns a summary, so only the summary enters the main one."
            ),
            effect="Not replayed: a subagent's summary size cannot be known from this log.",
            evidence=[
                Evidence(
                    _seq(chain.messages[p], p),
                    chain.messages[p].line,
                    f"prompt followed by {t:,} tokens of tool results",
                )
                for t, _, p in turns[:REPEATED_LISTED]
            ],
            tokens=total,
        )
    ]


def recommendations(
    chain: Chain,
    *,
    info: SessionInfo,
    strategy: Strategy,
    thresholds: Thresholds,
    compactions: Sequence[CompactionRow],
    growth: Growth,
    cache: CacheReading,
    prices: PriceOverrides | None,
    peak: SeriesPoint | None = None,
) -> list[Finding]:
    """Every finding, ranked: those that avoid an overflow first, then by dollars, then by tokens at stake."""
    replays = _Replays(messages=chain.messages, strategy=strategy, info=info) if chain.calls else None
    found = [
        *late_arrivals(chain, thresholds=thresholds, compactions=compactions, strategy=strategy, replays=replays),
        *tool_outputs(
            chain, thresholds=thresholds, replays=replays, peak=peak, prices=prices, policy=strategy.cache_policy
        ),
        *repeated_reads(chain, strategy=strategy, prices=prices, policy=strategy.cache_policy),
        *reads_after_compactions(chain, strategy=strategy, prices=prices, policy=strategy.cache_policy),
        *cache_misses(chain, cache=cache, prices=prices, policy=strategy.cache_policy),
        *warning_line(chain, thresholds=thresholds, prices=prices, policy=strategy.cache_policy),
        *compaction_timing(chain, thresholds=thresholds, compactions=compactions, growth=growth),
        *subagent_candidates(chain, thresholds=thresholds),
    ]

    def weight(rec: Finding) -> tuple[int, float, int]:
        avoided = rec.proof is not None and rec.proof.overflows_before > rec.proof.overflows_after
        return (0 if avoided else 1, -(rec.cost_usd or 0), -rec.tokens)

    ranked = sorted(found, key=weight)
    return [dataclasses.replace(rec, rank=i + 1) for i, rec in enumerate(ranked)]


def data_limits(chain: Chain) -> list[str]:
    """What the log cannot support, said plainly."""
    if not chain.calls:
        return [
            "This log records no usage: no finding can be replayed against recorded numbers, cache misses and "
            "their cost cannot be read, and sizes are estimates."
        ]
    return []
