"""What-if replay: run one compaction strategy over a whole recorded session.

The session is walked call by call (each de-duplicated API call is a step; a log without usage uses
each assistant record as a step). A *simulated* context is kept next to the recorded one:

* while neither the strategy nor the real agent has changed the history, the simulated context is the
  recorded one (input + cache creation + cache read of the call);
* once they diverge (the simulation pruned or compacted, or the real agent did), it is the previous
  simulated value plus the growth since: the recorded delta between the two calls where both exist and
  no real compaction or prune lies between them, else the strategy's own estimate of what arrived.

At each step the strategy is asked, with the number the agent itself would count, whether it prunes or
compacts. A compaction drops the context to ``baseline + the strategy's estimate of what it keeps + the
summary`` (``summary_tokens``, default the strategy's own summary budget). A request above the window is
an overflow; strategies that compact reactively then compact on overflow. Invariant: every step whose
simulated context is above the window carries an overflow event.

What differs between agents (how each counts, when it acts, what its compaction leaves behind) is the
strategy's ``ReplayRules`` (``Strategy.replay_rules``); this module knows no agent.

Cost: every message is estimated once; the O(view) ``decide`` is called only at steps where the counted
context reaches one of the strategy's lines, and the view handed to it holds only what the simulated
context still contains. A ``decide`` that changed nothing is not repeated at the same line until the
view has grown by 1/8, so a long stretch above a line that cannot be acted on stays near-linear.
No LLM is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.calls import CallTracker
from compaction.formats.context_records import (
    COMPACTION_RECORD_TYPES,
    CONTEXT_RECORD_TYPES,
    PRUNE_RECORD_TYPES,
    is_compaction_record,
    is_context_record,
)
from compaction.strategies.base import (
    Cut,
    CutRefused,
    ReplayRules,
    Strategy,
    session_version,
)
from compaction.thresholds import Thresholds
from compaction.transcript import MAIN, Message, SessionInfo, parse_timestamp

__all__ = [
    "COMPACTION_RECORD_TYPES",
    "CONTEXT_RECORD_TYPES",
    "PRUNE_RECORD_TYPES",
    "ReplayEvent",
    "ReplayResult",
    "Step",
    "api_steps",
    "estimate_baseline",
    "is_compaction_record",
    "is_context_record",
    "main_agent",
    "position_after_call",
    "replay",
    "session_thresholds",
]

ReplayKind = Literal["prune", "compaction", "overflow"]

# A decide() that changed nothing is retried at the same line once the view grew by this share.
RETRY_GROWTH_DIVISOR = 8


# ----------------------------------------------------------------------------- steps (API calls)


@dataclass(slots=True)
class Step:
    """One API call (or, without usage, one assistant record) and where its records lie in ``messages``."""

    call: int  # ApiCall.index (CallTracker order), or the assistant record's ordinal without usage
    first: int  # position of the call's first record: the request holds messages[:first]
    end: int  # position after the call's last record
    recorded: int | None  # recorded context (input + cache creation + cache read); None without usage
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    timestamp: str | None = None


def main_agent(messages: Sequence[Message]) -> str:
    """MAIN when the list holds the main chain, else the agent of the first record."""
    if not messages or any(m.agent == MAIN for m in messages):
        return MAIN
    return messages[0].agent


def api_steps(messages: Sequence[Message]) -> list[Step]:
    """The de-duplicated API calls of the main agent in ``messages``, indexed like ``ApiCall.index``.

    Calls whose usage is all zero are kept (so indices match storage) but carry no recorded context.
    A log without any usage gets one step per assistant record the model wrote.
    """
    agent = main_agent(messages)
    tracker = CallTracker()
    steps: list[Step] = []
    by_index: dict[int, Step] = {}
    for position, message in enumerate(messages):
        if message.agent != agent or message.usage is None or message.call_key is None:
            continue
        new = tracker.add(message)
        if new is not None:
            usage = new.usage
            step = Step(
                call=new.index,
                first=position,
                end=position + 1,
                recorded=usage.context or None,
                output=usage.output_tokens,
                cache_read=usage.cache_read_input_tokens,
                cache_creation=usage.cache_creation_input_tokens,
                timestamp=new.timestamp,
            )
            steps.append(step)
            by_index[new.index] = step
            continue
        call = tracker.call_for(message)
        if call is not None and call.index in by_index:
            step = by_index[call.index]
            step.end = position + 1
            step.output = max(step.output, message.usage.output_tokens)
    if steps:
        return steps
    ordinal = 0
    for position, message in enumerate(messages):
        if message.agent == agent and message.kind == "assistant" and not message.synthetic:
            steps.append(Step(call=ordinal, first=position, end=position + 1, recorded=None, timestamp=None))
            ordinal += 1
    return steps


@dataclass(frozen=True, slots=True)
class AfterCall:
    """Where the session stands after one main-chain call: what the next request is built from."""

    call: int
    position: int  # past the call's last record and the tool results / prompts that followed it


def after_calls(messages: Sequence[Message]) -> list[AfterCall]:
    """ "After call N" for every main-chain call, in one pass.

    That is past the call's last record and the tool results / prompts that followed it, up to the next
    call's first record or the next compaction record.
    """
    steps = api_steps(messages)
    points: list[AfterCall] = []
    for number, step in enumerate(steps):
        stop = steps[number + 1].first if number + 1 < len(steps) else len(messages)
        position = step.end
        while position < stop and not is_context_record(messages[position]):
            position += 1
        points.append(AfterCall(call=step.call, position=position))
    return points


def position_after_call(messages: Sequence[Message], call: int) -> int:
    """The list position where the session stood after main-chain call ``call`` (for ``decide(at=...)``)."""
    points = after_calls(messages)
    for point in points:
        if point.call == call:
            return point.position
    raise ValueError(
        f"call {call} does not exist: the session has "
        + (f"calls 0 to {points[-1].call}" if points else "no API calls")
        + "."
    )


# ----------------------------------------------------------------------------- results


@dataclass(slots=True)
class ReplayEvent:
    kind: ReplayKind
    at_call: int
    tokens_before: int
    tokens_after: int
    removed_messages: int = 0  # recorded messages summarised away
    tool_ids: list[str] = field(default_factory=list)  # results pruned
    trigger: str = ""  # threshold | overflow | prune
    first_kept: int | None = None  # list position of the first message kept after the cut, when there is one
    reason: str = ""

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class ReplayResult:
    strategy: str
    series: list[tuple[int, int]]  # (call index, simulated context sent with that call)
    recorded: list[tuple[int, int | None]]  # (call index, recorded context) for the same steps
    events: list[ReplayEvent]
    peak: int  # the largest context sent or attempted (overflowing attempts included)
    peak_call: int | None
    compactions: int
    prunes: int
    overflows: int
    tokens_summarised: int  # the strategy's estimate of everything its compactions summarised
    window: int
    thresholds: Thresholds
    summary_tokens: int
    baseline: int  # estimated system prompt + tools (+ re-attached files) that no compaction removes
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "window": self.window,
            "thresholds": dataclasses.asdict(self.thresholds),
            "summary_tokens": self.summary_tokens,
            "baseline": self.baseline,
            "peak": self.peak,
            "peak_call": self.peak_call,
            "compactions": self.compactions,
            "prunes": self.prunes,
            "overflows": self.overflows,
            "tokens_summarised": self.tokens_summarised,
            "series": [list(point) for point in self.series],
            "recorded": [list(point) for point in self.recorded],
            "events": [event.as_json() for event in self.events],
            "notes": self.notes,
        }


# ----------------------------------------------------------------------------- session facts


def session_thresholds(
    strategy: Strategy, messages: Sequence[Message], *, info: SessionInfo | None = None
) -> Thresholds:
    """The strategy's lines for this session (model, version and observed maximum from the records)."""
    return strategy.session_thresholds(messages, info=info)


def _idle_minutes(before: Message | None, now: Message | None) -> float | None:
    start = parse_timestamp(before.timestamp) if before is not None else None
    end = parse_timestamp(now.timestamp) if now is not None else None
    if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None):
        return None
    return (end - start).total_seconds() / 60


def estimate_baseline(steps: Sequence[Step], compactions: Sequence[bool], prefix: Sequence[int]) -> int:
    """What every request carries besides the conversation: system prompt, tools, re-attached files.

    For the first call of the session and the first call after each real compaction: recorded context minus
    the estimate of the live messages before it; the smallest of these (never negative). 0 without usage.
    """
    candidates: list[int] = []
    segment_start = 0
    open_segment = True
    next_step = 0
    for position in range(len(compactions) + 1):
        while next_step < len(steps) and steps[next_step].first == position:
            step = steps[next_step]
            if open_segment and step.recorded is not None:
                candidates.append(step.recorded - (prefix[position] - prefix[segment_start]))
                open_segment = False
            next_step += 1
        if position < len(compactions) and compactions[position]:
            segment_start = position
            open_segment = True
    return max(0, min(candidates)) if candidates else 0


# ----------------------------------------------------------------------------- the replay


@dataclass(slots=True)
class _Recording:
    """What the session recorded, measured once: its steps and the strategy's running estimates."""

    messages: list[Message]
    steps: list[Step]
    context_records: list[bool]  # the real agent's own compaction or prune records (never in the view)
    prefix: list[int]  # prefix[i]: the strategy's estimate of messages[:i] (context records count 0)
    compaction_prefix: list[int]  # compaction_prefix[i]: real compaction records in messages[:i]
    baseline: int
    has_usage: bool

    def estimate(self, start: int, end: int) -> int:
        return self.prefix[end] - self.prefix[start]

    def compacted_between(self, start: int, end: int) -> bool:
        return self.compaction_prefix[end] - self.compaction_prefix[start] > 0


@dataclass(slots=True)
class _Walk:
    """The simulation's state while it walks the steps, and what it has produced so far."""

    view: list[Message] = field(default_factory=list)  # what the simulated context holds
    origin: list[int | None] = field(default_factory=list)  # each view record's session position (None: ours)
    cursor: int = 0  # session records before this position are admitted
    diverged: bool = False  # the simulated history is no longer the recorded one
    previous: int = 0  # the simulated context of the previous step
    series: list[tuple[int, int]] = field(default_factory=list)
    recorded: list[tuple[int, int | None]] = field(default_factory=list)
    events: list[ReplayEvent] = field(default_factory=list)
    tokens_summarised: int = 0
    # After a decide() that changed nothing: the level it was taken at and the view size to wait for.
    blocked_level: int = 0
    blocked_until: int = 0

    def block(self) -> None:
        self.blocked_until = len(self.view) + max(1, len(self.view) // RETRY_GROWTH_DIVISOR)


def _measure(messages: list[Message], rules: ReplayRules) -> _Recording:
    steps = api_steps(messages)
    context_records = [is_context_record(m) for m in messages]
    compactions = [is_compaction_record(m) for m in messages]
    prefix = [0]
    compaction_prefix = [0]
    for position, message in enumerate(messages):
        prefix.append(prefix[-1] + (0 if context_records[position] else rules.estimate(message)))
        compaction_prefix.append(compaction_prefix[-1] + (1 if compactions[position] else 0))
    return _Recording(
        messages=messages,
        steps=steps,
        context_records=context_records,
        prefix=prefix,
        compaction_prefix=compaction_prefix,
        baseline=estimate_baseline(steps, compactions, prefix),
        has_usage=any(step.recorded is not None for step in steps),
    )


def _admit(walk: _Walk, recording: _Recording, rules: ReplayRules, *, until: int) -> None:
    """Bring the session's records before ``until`` into the view, as the strategy sees them."""
    for position in range(walk.cursor, until):
        if not recording.context_records[position]:
            for admitted in rules.admit(recording.messages[position]):
                walk.view.append(admitted)
                walk.origin.append(position)
    walk.cursor = max(walk.cursor, until)


def _actual_context(walk: _Walk, recording: _Recording, *, step: Step, prev: Step | None) -> int:
    """The simulated context sent with ``step``: the recorded one until the histories diverge, then grown."""
    since = prev.first if prev is not None else 0
    if recording.compacted_between(since, step.first):
        walk.diverged = True  # the real agent compacted: recorded numbers no longer describe our history
    if prev is None:
        return step.recorded if step.recorded is not None else recording.baseline + recording.prefix[step.first]
    if not walk.diverged and step.recorded is not None:
        return step.recorded
    clean = not recording.compacted_between(prev.first, step.first)
    if step.recorded is not None and prev.recorded is not None and clean:
        return max(0, walk.previous + step.recorded - prev.recorded)
    return walk.previous + recording.estimate(since, step.first)


def _counted_context(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: Step, prev: Step | None, actual: int
) -> int:
    """The number the agent itself compares with its lines before sending ``step``."""
    if prev is None:
        # No usage before the first call: an agent that counts the last usage falls back to its estimate of
        # the history (klaude-code doc §3.3); the others count the whole request.
        return recording.prefix[step.first] if rules.counts == "last_usage" and recording.has_usage else actual
    if rules.counts == "actual":
        return actual
    if rules.counts == "last_usage":
        return walk.previous if recording.has_usage else actual
    # last usage (+ its output) + an estimate of what arrived after the response
    output = prev.output if prev.recorded is not None else recording.estimate(prev.first, prev.end)
    return walk.previous + output + recording.estimate(prev.end, step.first)


def _compact(
    walk: _Walk,
    recording: _Recording,
    rules: ReplayRules,
    *,
    at_call: int,
    cut: Cut,
    tokens_before: int,
    trigger: str,
    reason: str,
) -> ReplayEvent:
    """Replace the cut by the strategy's summary; the event carries the context after it."""
    view, origin = walk.view, walk.origin
    middle_tokens = rules.view_tokens(view[cut.start : cut.end])
    removed = sum(1 for o in origin[cut.start : cut.end] if o is not None)
    first_kept = next((o for o in origin[cut.end :] if o is not None), None)
    walk.view, walk.origin = rules.after_compaction(view, origin, cut, rules.summary_message(view, cut))
    walk.tokens_summarised += middle_tokens
    walk.diverged = True
    event = ReplayEvent(
        kind="compaction",
        at_call=at_call,
        tokens_before=tokens_before,
        tokens_after=recording.baseline + rules.view_tokens(walk.view),
        removed_messages=removed,
        trigger=trigger,
        first_kept=first_kept,
        reason=reason,
    )
    walk.events.append(event)
    return event


def _act_at_line(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: Step, level: int, counted: int, actual: int
) -> int:
    """Let the strategy prune and/or compact at a line its count reached; the simulated context after."""
    acted = False
    try:
        decision = rules.decide(walk.view, counted)
    except (CutRefused, ValueError):
        decision = None
    if decision is not None and decision.prune:
        before_tokens = rules.view_tokens(walk.view)
        rules.apply_prune(walk.view, decision.prune, decision)
        saved = max(0, before_tokens - rules.view_tokens(walk.view))
        walk.events.append(
            ReplayEvent(
                kind="prune",
                at_call=step.call,
                tokens_before=actual,
                tokens_after=max(0, actual - saved),
                tool_ids=list(decision.prune),
                trigger="prune",
                reason=decision.reason,
            )
        )
        actual = max(0, actual - saved)
        walk.diverged = acted = True
    if decision is not None and level == 2 and decision.cut is not None and rules.compacts(decision):
        # The count the agent compared with its line is what it reports as the compaction's tokens before.
        compaction = _compact(
            walk,
            recording,
            rules,
            at_call=step.call,
            cut=decision.cut,
            tokens_before=counted,
            trigger="threshold",
            reason=decision.reason,
        )
        actual = compaction.tokens_after
        acted = True
    if acted:
        walk.blocked_level = 0
    else:
        walk.blocked_level = level
        walk.block()
    return actual


def _overflow(walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: Step, actual: int, window: int) -> int:
    """Record a request above the window and, for a reactive strategy, compact; the simulated context after."""
    overflow = ReplayEvent(
        kind="overflow",
        at_call=step.call,
        tokens_before=actual,
        tokens_after=actual,
        trigger="overflow",
        reason=f"the request ({actual:,} tokens) does not fit the {window:,}-token window",
    )
    walk.events.append(overflow)
    if not rules.reactive or len(walk.view) < walk.blocked_until:
        return actual
    try:
        cut = rules.reactive_cut(walk.view)
    except (CutRefused, ValueError):
        cut = None
    if cut is None:
        walk.block()
        return actual
    compaction = _compact(
        walk,
        recording,
        rules,
        at_call=step.call,
        cut=cut,
        tokens_before=actual,
        trigger="overflow",
        reason="reactive compaction after the overflow",
    )
    overflow.tokens_after = compaction.tokens_after
    return compaction.tokens_after


def _step(walk: _Walk, recording: _Recording, rules: ReplayRules, *, number: int, window: int) -> None:
    """One API call: what the simulation would send, what the strategy does before sending it."""
    step = recording.steps[number]
    prev = recording.steps[number - 1] if number else None
    _admit(walk, recording, rules, until=step.first)
    actual = _actual_context(walk, recording, step=step, prev=prev)
    counted = _counted_context(walk, recording, rules, step=step, prev=prev, actual=actual)
    messages = recording.messages
    idle = _idle_minutes(messages[prev.end - 1], messages[step.first - 1]) if prev is not None else None
    level = rules.level(counted, idle_minutes=idle)
    if level and (level > walk.blocked_level or len(walk.view) >= walk.blocked_until):
        actual = _act_at_line(walk, recording, rules, step=step, level=level, counted=counted, actual=actual)
    if actual > window:
        actual = _overflow(walk, recording, rules, step=step, actual=actual, window=window)
    walk.series.append((step.call, actual))
    walk.recorded.append((step.call, step.recorded))
    walk.previous = actual


def _result(
    walk: _Walk, recording: _Recording, *, strategy: Strategy, thresholds: Thresholds, summary_tokens: int
) -> ReplayResult:
    events = walk.events
    attempts = list(walk.series) + [(e.at_call, e.tokens_before) for e in events if e.kind == "overflow"]
    peak_call, peak = max(attempts, key=lambda point: point[1]) if attempts else (None, 0)
    notes: list[str] = []
    if not recording.has_usage:
        notes.append("No usage is recorded: every context value is the strategy's own estimate.")
    if thresholds.assumption:
        notes.append(f"The thresholds are partly assumed: {thresholds.source}")
    return ReplayResult(
        strategy=strategy.name,
        series=walk.series,
        recorded=walk.recorded,
        events=events,
        peak=peak,
        peak_call=peak_call,
        compactions=sum(1 for e in events if e.kind == "compaction"),
        prunes=sum(1 for e in events if e.kind == "prune"),
        overflows=sum(1 for e in events if e.kind == "overflow"),
        tokens_summarised=walk.tokens_summarised,
        window=thresholds.window,
        thresholds=thresholds,
        summary_tokens=summary_tokens,
        baseline=recording.baseline,
        notes=notes,
    )


def replay(
    messages: Sequence[Message],
    *,
    strategy: Strategy,
    summary_tokens: int | None = None,
    info: SessionInfo | None = None,
) -> ReplayResult:
    """Walk the session call by call and record where ``strategy`` would prune, compact or overflow."""
    agent = main_agent(messages)
    own = [m for m in messages if m.agent == agent]
    thresholds = strategy.session_thresholds(own, info=info)
    summary = strategy.max_summary_tokens if summary_tokens is None else max(0, summary_tokens)
    version = session_version(own) or (info.agent_version if info else None)
    rules = strategy.replay_rules(thresholds=thresholds, summary_tokens=summary, version=version)
    recording = _measure(own, rules)
    walk = _Walk()
    for number in range(len(recording.steps)):
        _step(walk, recording, rules, number=number, window=thresholds.window)
    return _result(walk, recording, strategy=strategy, thresholds=thresholds, summary_tokens=summary)
