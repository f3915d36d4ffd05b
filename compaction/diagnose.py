"""Overflow diagnosis: why a session's context grew, which lines it crossed, what (did not) compact.

Pure Python over the neutral model. Everything is read from the records: recorded usage per API call,
the context events the parser drew (compactions, microcompacts, API and overflow errors) and the messages
themselves. Sizes of messages are estimates (Claude Code's ``roughTokenCountEstimation``: round(chars/4),
2,000 per image; docs/compaction/claude-code.md §4.1) and are labelled as such; recorded usage wins where
it exists. Where the log cannot answer (no usage), the diagnosis says so instead of guessing.

The "why did it overflow" signal follows docs/formats/claude-code.md §13 step 6: attribute the growth
between successive recorded contexts to what arrived in between, and report the gap between a
compaction's ``preTokens`` and the last recorded context separately (output that no request reported).

``diagnose`` lays the main chain out once (``lay_out``) and hands it to one function per section of the
report; each section returns typed rows, and ``Diagnosis.as_json`` is the JSON twin the page and CLI show.
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compaction.prompt_cache import CachedCall, CacheReading, read_cache
from compaction.replay import api_steps, is_compaction_record, main_agent, session_thresholds
from compaction.strategies.claude_code import estimate_block
from compaction.strategies.registry import build_strategy, strategy_for_format
from compaction.thresholds import Thresholds
from compaction.transcript import ContextEvent, Message, SessionInfo
from compaction.windows import ONE_MILLION_CONTEXT_WINDOW

TOP = 10  # contributors and jumps listed
ARRIVALS_LISTED = 5  # messages listed under a jump or a compaction
# autoCompact.ts:70 MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES (claude_code strategy constant).
CIRCUIT_BREAKER_FAILURES = 3
NEARLY_FULL_SHARE = 0.9  # a peak this close to the window, with no compaction line below it, is told as a fill
# Texts agents write when a compaction could not run (klaude-code §3.5-3.6; Claude Code compact.ts
# "Not enough messages to compact." and ERROR_MESSAGE_PROMPT_TOO_LONG, compaction doc §2.6).
NOTHING_TO_COMPACT_TEXTS = (
    "Nothing to compact",
    "Not enough messages to compact",
    "Conversation too long. Press esc twice",
    "Error during compaction",
)
_SCANNED_TEXT_CHARS = 2_000  # only short notices are searched for those texts
_QUOTED_CHARS = 300  # of an error or notice, in a failure row
ESTIMATE_LABEL = "round(chars / 4), 2,000 per image (Claude Code roughTokenCountEstimation)"
DRIFT_MEANING = (
    "recorded context growth divided by the estimate of what arrived, over calls with no "
    "compaction between them (> 1: the estimate undercounts)"
)


# ----------------------------------------------------------------------------- inputs


@dataclass(slots=True)
class CallPoint:
    """One recorded main-chain API call."""

    index: int
    context: int  # input + cache creation + cache read
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    timestamp: str | None = None
    position: int | None = None  # position of its first record in the messages list
    end: int | None = None  # position after its last record


def call_points(messages: Sequence[Message]) -> list[CallPoint]:
    """The recorded calls of the main chain, with where their records lie in ``messages``."""
    return [
        CallPoint(
            index=s.call,
            context=s.recorded,
            output=s.output,
            cache_read=s.cache_read,
            cache_creation=s.cache_creation,
            timestamp=s.timestamp,
            position=s.first,
            end=s.end,
        )
        for s in api_steps(messages)
        if s.recorded is not None
    ]


@dataclass(slots=True)
class Chain:
    """The main chain laid out once: its messages, its recorded calls and where each event sits among them."""

    messages: list[Message]
    calls: list[CallPoint]
    events: list[tuple[int, ContextEvent]]  # (position among the messages, event), in order

    @property
    def call_starts(self) -> list[int]:
        return [c.position or 0 for c in self.calls]

    def calls_before(self, position: int) -> int:
        """How many recorded calls start before ``position`` (the number a section reports as "call")."""
        return bisect.bisect_left(self.call_starts, position)

    def last_call_before(self, position: int) -> CallPoint | None:
        index = self.calls_before(position) - 1
        return self.calls[index] if index >= 0 else None

    def events_of(self, kind: str) -> list[tuple[int, ContextEvent]]:
        return [(p, e) for p, e in self.events if e.kind == kind]

    def compaction_positions(self) -> list[int]:
        """Compaction events and the records that mark a compaction (summaries, boundaries)."""
        return [p for p, _ in self.events_of("compaction")] + [
            i for i, m in enumerate(self.messages) if is_compaction_record(m)
        ]

    def segment_start(self, position: int) -> int:
        """Where the stretch of history that ``position`` belongs to starts: after the last compaction."""
        return max((p + 1 for p in self.compaction_positions() if p < position), default=0)


def lay_out(
    messages: Sequence[Message], events: Sequence[ContextEvent], calls: Sequence[CallPoint] | None = None
) -> Chain:
    """The main agent's messages and events; ``calls`` replace the recorded numbers of the calls they name."""
    agent = main_agent(messages)
    own = [m for m in messages if m.agent == agent]
    steps = call_points(own)
    if calls is not None:
        given = {c.index: c for c in calls}
        for step in steps:
            if step.index in given:
                c = given[step.index]
                step.context, step.output = c.context, c.output
                step.cache_read, step.cache_creation = c.cache_read, c.cache_creation

    # Events carry the line of the record they came from; an event whose line is no message's sits where
    # its line would be (or at the end when the records are not in line order).
    lines = [m.line for m in own]
    ordered = all(a <= b for a, b in zip(lines, lines[1:], strict=False))
    first_of_line: dict[int, int] = {}
    for position, line in enumerate(lines):
        first_of_line.setdefault(line, position)

    def event_position(event: ContextEvent) -> int:
        if event.line in first_of_line:
            return first_of_line[event.line]
        return bisect.bisect_left(lines, event.line) if ordered else len(own)

    placed = sorted(
        ((event_position(e), i, e) for i, e in enumerate(events) if e.agent == agent), key=lambda t: (t[0], t[1])
    )
    return Chain(messages=own, calls=steps, events=[(p, e) for p, _, e in placed])


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
    estimate: str = ESTIMATE_LABEL


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
    estimate: str = ESTIMATE_LABEL
    meaning: str = DRIFT_MEANING


@dataclass(frozen=True, slots=True)
class CompactionRow:
    call: int
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


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str  # overflow, api_error or nothing_to_compact
    call: int
    line: int
    tokens: int | None
    message: str
    followed_by: str  # compaction, call or nothing
    compaction_trigger: str | None
    failed: bool


@dataclass(frozen=True, slots=True)
class Failures:
    rows: list[Failure]
    breaker_call: int | None  # where consecutive failed overflows open Claude Code's circuit breaker


@dataclass(slots=True)
class Diagnosis:
    verdict: str
    window: int
    is_1m_window: bool
    overflowed: bool
    needed_compaction: bool
    has_usage: bool
    peak: int
    peak_call: int | None
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

    def as_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "window": self.window,
            "is_1m_window": self.is_1m_window,
            "overflowed": self.overflowed,
            "needed_compaction": self.needed_compaction,
            "has_usage": self.has_usage,
            "peak": self.peak,
            "peak_call": self.peak_call,
            "thresholds": dataclasses.asdict(self.thresholds),
            "crossings": [dataclasses.asdict(c) for c in self.crossings],
            "contributors_by_tool": [dataclasses.asdict(c) for c in self.contributors_by_tool],
            "contributors_by_message": [dataclasses.asdict(c) for c in self.contributors_by_message],
            "contributors_scope": dataclasses.asdict(self.contributors_scope),
            "growth": self.growth.as_json(),
            "compactions": [dataclasses.asdict(c) for c in self.compactions],
            "failures": [dataclasses.asdict(f) for f in self.failures],
            "cache": cache_json(self.cache),
            "drift": dataclasses.asdict(self.drift) if self.drift else {},
            "notes": list(self.notes),
        }


def cache_json(cache: CacheReading) -> dict[str, Any]:
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
            }
            for miss in cache.misses
        ],
        "recreated_tokens": cache.recreated_tokens,
    }


# ----------------------------------------------------------------------------- helpers


def _tokens(message: Message) -> int:
    return sum(estimate_block(b) for b in message.blocks)


def _chars(message: Message) -> int:
    return sum(len(b.text) for b in message.blocks)


def _seq(message: Message, position: int) -> int:
    # The stored record's seq (for links) when the session came from the database, else the agent's own.
    seq = message.data.get("row_seq", message.data.get("seq"))
    return seq if isinstance(seq, int) else position


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.0f}k"


def _reaches_model(message: Message) -> bool:
    return message.role != "meta" and message.kind not in ("system", "bookkeeping", "unknown")


def _tool_names(message: Message) -> list[str]:
    return [b.tool_name or "unknown tool" for b in message.blocks if b.kind == "tool_result"]


def describe_arrivals(messages: Sequence[Message]) -> str:
    """ "9 tool results (Read ×4, Bash ×5; 110k characters)" for what reached the model in ``messages``."""
    tools: Counter[str] = Counter()
    prompts = 0
    chars = 0
    for message in messages:
        if not _reaches_model(message) or message.role == "assistant":
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


def arrivals(messages: Sequence[Message], start: int, end: int, *, limit: int = ARRIVALS_LISTED) -> list[Arrival]:
    """The largest of the user-side messages in ``messages[start:end]`` that reached the model."""
    rows = [
        Arrival(
            seq=_seq(messages[p], p),
            line=messages[p].line,
            kind=messages[p].kind,
            tools=_tool_names(messages[p]),
            chars=_chars(messages[p]),
            tokens_estimate=_tokens(messages[p]),
        )
        for p in range(start, end)
        if _reaches_model(messages[p]) and messages[p].role != "assistant"
    ]
    rows.sort(key=lambda r: r.chars, reverse=True)
    return rows[:limit]


# ----------------------------------------------------------------------------- the diagnosis


def diagnose(
    messages: Sequence[Message],
    events: Sequence[ContextEvent],
    calls: Sequence[CallPoint] | None = None,
    *,
    info: SessionInfo,
    thresholds: Thresholds | None = None,
) -> Diagnosis:
    """Diagnose one session's main chain.

    ``events`` are the ContextEvents its parser drew (other agents' events are ignored); ``calls``
    replace the numbers recorded in ``messages`` for the calls they name (``call_points``); ``thresholds``
    defaults to the lines of the session's own agent.
    """
    chain = lay_out(messages, events, calls)
    if thresholds is None:
        thresholds = own_thresholds(chain, info=info)
    series = context_series(chain)
    peak = max(series, key=lambda point: point.tokens) if series else None
    contributors = largest_contributors(chain, peak=peak)
    compaction_rows = fired_compactions(chain, thresholds=thresholds)
    failure_report = compaction_failures(chain)
    overflowed = bool(chain.events_of("overflow")) or (peak.tokens if peak else 0) > thresholds.window
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
        peak=peak.tokens if peak else 0,
        peak_call=peak.call if peak else None,
        thresholds=thresholds,
        crossings=threshold_crossings(series, thresholds=thresholds),
        contributors_by_tool=contributors.by_tool,
        contributors_by_message=contributors.by_message,
        contributors_scope=contributors.scope,
        growth=growth_per_call(chain),
        compactions=compaction_rows,
        failures=failure_report.rows,
        cache=cache_reading(chain),
        drift=estimator_drift(chain),
        notes=report_notes(chain, thresholds=thresholds, breaker_call=failure_report.breaker_call),
    )


def own_thresholds(chain: Chain, *, info: SessionInfo) -> Thresholds:
    """The lines of the strategy that models the session's own format (the first registered one otherwise)."""
    name = strategy_for_format(info.format)
    return session_thresholds(build_strategy(name, info=info, overrides={}), chain.messages, info=info)


def context_series(chain: Chain) -> list[SeriesPoint]:
    """Recorded contexts, plus the sizes compactions (preTokens) and overflow errors reported, in order."""
    points = [SeriesPoint(c.position or 0, c.index, c.context, "recorded usage") for c in chain.calls]
    for position, event in chain.events:
        if event.pre_tokens and event.kind in ("compaction", "overflow"):
            source = "compaction preTokens" if event.kind == "compaction" else "overflow error"
            points.append(SeriesPoint(position, chain.calls_before(position), event.pre_tokens, source))
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
        if not _reaches_model(message):
            continue
        sized.append((_chars(message), position))
        for block in message.blocks:
            if block.kind != "tool_result":
                continue
            name = block.tool_name or "unknown tool"
            row = by_tool.setdefault(name, ToolContribution(tool=name))
            row.results += 1
            row.chars += len(block.text)
            row.tokens_estimate += estimate_block(block)
    by_message = [
        MessageContribution(
            seq=_seq(messages[p], p),
            line=messages[p].line,
            kind=messages[p].kind,
            role=messages[p].role,
            tools=_tool_names(messages[p]) or [b.tool_name for b in messages[p].blocks if b.tool_name],
            chars=chars,
            tokens_estimate=_tokens(messages[p]),
        )
        for chars, p in sorted(sized, reverse=True)[:TOP]
    ]
    scope = ContributorScope(
        from_seq=_seq(messages[start], start) if start < len(messages) else None,
        to_call=peak.call if peak else None,
        tokens=peak.tokens if peak else 0,
    )
    return Contributors(
        by_tool=sorted(by_tool.values(), key=lambda r: r.chars, reverse=True)[:TOP],
        by_message=by_message,
        scope=scope,
    )


def _intervals(chain: Chain) -> list[tuple[CallPoint, CallPoint, bool]]:
    """Successive recorded calls, and whether a real compaction lies between them (then it is not growth)."""
    compacted_before = [0]
    for message in chain.messages:
        compacted_before.append(compacted_before[-1] + (1 if is_compaction_record(message) else 0))
    return [
        (prev, cur, compacted_before[cur.position or 0] != compacted_before[prev.position or 0])
        for prev, cur in zip(chain.calls, chain.calls[1:], strict=False)
    ]


def growth_per_call(chain: Chain) -> Growth:
    """Growth per call: the median and the largest jumps with what arrived before each."""
    deltas: list[int] = []
    candidates: list[tuple[int, CallPoint, CallPoint]] = []
    for prev, cur, compacted in _intervals(chain):
        delta = cur.context - prev.context
        deltas.append(delta)
        if not compacted and delta > 0:
            candidates.append((delta, prev, cur))
    # Only the largest jumps are described: describing every interval costs more than the rest of the report.
    candidates.sort(key=lambda candidate: candidate[0], reverse=True)
    jumps: list[Jump] = []
    for delta, prev, cur in candidates[:TOP]:
        arrived_from = prev.end or prev.position or 0
        arrived_to = cur.position or 0
        jumps.append(
            Jump(
                call=cur.index,
                from_context=prev.context,
                to_context=cur.context,
                delta=delta,
                arrived=describe_arrivals(chain.messages[arrived_from:arrived_to]),
                messages=arrivals(chain.messages, arrived_from, arrived_to),
            )
        )
    return Growth(
        calls=len(chain.calls),
        median_delta=int(statistics.median(deltas)) if deltas else None,
        largest_jumps=jumps,
    )


def estimator_drift(chain: Chain) -> Drift | None:
    """Recorded growth per estimated token over the intervals with no compaction; None without both."""
    recorded = 0
    estimated = 0
    for prev, cur, compacted in _intervals(chain):
        if compacted:
            continue
        delta = cur.context - prev.context
        start, end = prev.position or 0, cur.position or 0
        estimate = sum(_tokens(m) for m in chain.messages[start:end] if _reaches_model(m))
        if delta > 0 and estimate > 0:
            recorded += delta
            estimated += estimate
    if not estimated:
        return None
    return Drift(
        recorded_per_estimated_token=round(recorded / estimated, 3),
        recorded_growth=recorded,
        estimated_growth=estimated,
    )


def fired_compactions(chain: Chain, *, thresholds: Thresholds) -> list[CompactionRow]:
    """Each compaction that fired, against the last recorded context before it."""
    messages = chain.messages
    rows: list[CompactionRow] = []
    for position, event in chain.events_of("compaction"):
        last = chain.last_call_before(position)
        arrived_from = (last.end or position) if last is not None else chain.segment_start(position)
        rows.append(
            CompactionRow(
                call=chain.calls_before(position),
                seq=_seq(messages[position], position) if position < len(messages) else None,
                line=event.line,
                trigger=event.trigger,
                pre_tokens=event.pre_tokens,
                post_tokens=event.post_tokens,
                last_call=last.index if last else None,
                last_context=last.context if last else None,
                last_output=last.output if last else None,
                gap=(event.pre_tokens - last.context) if (last and event.pre_tokens) else None,
                arrived_after_last_call=describe_arrivals(messages[arrived_from:position]),
                arrived=arrivals(messages, arrived_from, position),
                past_threshold=(
                    event.pre_tokens - thresholds.autocompact
                    if event.pre_tokens and thresholds.autocompact is not None
                    else None
                ),
            )
        )
    return rows


def compaction_failures(chain: Chain) -> Failures:
    """Errors and what followed them, "nothing to compact" notices, and where the circuit breaker opens."""
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
        next_call = chain.calls_before(position + 1)
        next_call_position = call_starts[next_call] if next_call < len(call_starts) else len(chain.messages) + 1
        followed = next(
            (e for p, e in compaction_events if position <= p < next_call_position and e is not event), None
        )
        if followed is not None:
            outcome = "compaction"
        elif next_call < len(call_starts):
            outcome = "call"
        else:
            outcome = "nothing"
        failed = event.kind == "overflow" and followed is None
        consecutive = consecutive + 1 if failed else 0
        if consecutive >= CIRCUIT_BREAKER_FAILURES and breaker_call is None:
            breaker_call = chain.calls_before(position)
        rows.append(
            Failure(
                kind=event.kind,
                call=chain.calls_before(position),
                line=event.line,
                tokens=event.pre_tokens,
                message=event.message[:_QUOTED_CHARS],
                followed_by=outcome,
                compaction_trigger=followed.trigger if followed is not None else None,
                failed=failed,
            )
        )
    for position, message in enumerate(chain.messages):
        if message.role == "user" and message.kind == "tool_result":
            continue  # a tool's output may quote these texts; only the agent's own notices count
        text = message.text
        if len(text) <= _SCANNED_TEXT_CHARS and any(t in text for t in NOTHING_TO_COMPACT_TEXTS):
            rows.append(
                Failure(
                    kind="nothing_to_compact",
                    call=chain.calls_before(position),
                    line=message.line,
                    tokens=None,
                    message=text[:_QUOTED_CHARS],
                    followed_by="nothing",
                    compaction_trigger=None,
                    failed=True,
                )
            )
    rows.sort(key=lambda f: (f.call, f.line))
    return Failures(rows=rows, breaker_call=breaker_call)


def cache_reading(chain: Chain) -> CacheReading:
    """Cache lifetime and misses of the recorded calls (``compaction.prompt_cache``, shared with the timeline)."""
    call_starts = chain.call_starts
    microcompacted: list[int] = []
    for position, _ in chain.events_of("microcompact"):
        # The call a microcompact changed the prefix of: the first one starting after it.
        following = bisect.bisect_right(call_starts, position)
        if following < len(chain.calls):
            microcompacted.append(chain.calls[following].index)
    return read_cache(
        [CachedCall(c.index, c.context, c.cache_read, c.cache_creation, c.timestamp) for c in chain.calls],
        microcompacted=microcompacted,
    )


def needed_compaction(chain: Chain, *, thresholds: Thresholds, peak: SeriesPoint | None, overflowed: bool) -> bool:
    return (
        bool(chain.events_of("compaction"))
        or overflowed
        or (thresholds.autocompact is not None and peak is not None and peak.tokens >= thresholds.autocompact)
    )


def report_notes(chain: Chain, *, thresholds: Thresholds, breaker_call: int | None) -> list[str]:
    """What the reader must know to trust the numbers: missing usage, assumed lines, the window, the breaker."""
    found: list[str] = []
    if not chain.calls:
        found.append(
            "No usage is recorded in this log: threshold crossings, growth per call, cache behaviour and "
            "estimator drift cannot be read from it; message sizes are estimates."
        )
    if thresholds.assumption:
        found.append(f"Thresholds are partly assumed: {thresholds.source}")
    if thresholds.window >= ONE_MILLION_CONTEXT_WINDOW:
        found.append(f"1M-token window ({thresholds.window:,}): from the model or a recorded context above 200k.")
    if breaker_call is not None:
        found.append(
            f"{CIRCUIT_BREAKER_FAILURES} consecutive overflows without a compaction by call {breaker_call}: "
            "Claude Code's circuit breaker stops autocompact at this point (autoCompact.ts, 2.1.76+)."
        )
    return found


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
    text = f"The prompt overflowed before call {chain.calls_before(position)}: {size}"
    arrived = describe_arrivals(chain.messages[arrived_from:position])
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
        return f"A manual compaction ran before call {worst.call}{pre}; no automatic compaction was needed{more}."
    line = thresholds.autocompact
    pre_tokens = worst.pre_tokens
    if line is None or pre_tokens is None:
        return f"Context was compacted ({worst.trigger or 'auto'}) before call {worst.call}{more}."
    text = f"Context crossed the {_k(line)} autocompact threshold before call {worst.call}"
    if worst.gap is not None and worst.gap > 0.01 * line and worst.last_context is not None:
        text += (
            f" after {worst.arrived_after_last_call} arrived after the last request "
            f"({worst.last_context:,} tokens recorded)"
        )
    text += f"; compaction fired at {pre_tokens:,} tokens"
    past = pre_tokens - line
    text += f", {past:,} past the threshold" if past > 0 else ""
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
