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
summary`` (``summary_tokens``, default the strategy's own summary budget); a kept tail of the session's newest
records counts as the session recorded it (``_kept_in_real_tokens``). The baseline is measured from the first call
and the first call after each real compaction (less that compaction's summary and kept tail); a log without usage
takes it from the agent's own count at its first compaction, where the record keeps one (``_count_anchor``).
A request above the window is an overflow; strategies that compact reactively then compact on overflow. A request
the agent refuses to send (``ReplayRules.blocks``: Claude Code's blocking check) is a ``blocked`` event instead.
Invariant: every step whose simulated context is above the window carries an overflow or a blocked event.

The real agent's own prune records (a microcompact) are applied to the view once the call they precede has been
decided: the recorded numbers already show their drop, so a replayed prune of the same results saves nothing
more, and a result the replay cleared earlier gives back what it subtracted. Following what really happened
(``follow_reality``, on by default for the session's own agent with its own parameters, ``follows_by_default``),
each real compaction is taken up where it happened, whether or not the rules fired there: the view becomes the
real summary and what really came after it, and the recorded context is used again. Without it every compaction
is modelled: the summary's size is the mean of the session's own real summaries (else the agent's typical one),
and what the agent keeps and re-attaches is its ``ReplayRules.after_compaction``. Each event carries
``context_before`` / ``context_after`` as the session's events do. ``ReplayResult.comparison`` lists each real
event beside the replayed one.

What differs between agents (how each counts, when it acts, what its compaction leaves behind) is the
strategy's ``ReplayRules`` (``Strategy.replay_rules``); this module knows no agent.

Cost: every message is estimated once; the O(view) ``decide`` is called only at steps where the counted
context reaches one of the strategy's lines, and the view handed to it holds only what the simulated
context still contains. A ``decide`` that changed nothing is not repeated at the same line until the
view has grown by 1/8, so a long stretch above a line that cannot be acted on stays near-linear.
No LLM is called.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.calls import CallTracker, Peak, peak_of
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
    Decision,
    ReplayRules,
    Strategy,
    session_model,
    session_version,
)
from compaction.thresholds import Thresholds
from compaction.transcript import MAIN, ApiCall, Message, SessionInfo, parse_timestamp

__all__ = [
    "COMPACTION_RECORD_TYPES",
    "CONTEXT_RECORD_TYPES",
    "PRUNE_RECORD_TYPES",
    "ReplayEvent",
    "ReplayResult",
    "api_steps",
    "estimate_baseline",
    "is_compaction_record",
    "is_context_record",
    "main_agent",
    "position_after_call",
    "replay",
    "session_thresholds",
]

ReplayKind = Literal["prune", "compaction", "overflow", "blocked"]

# A decide() that changed nothing is retried at the same line once the view grew by this share.
RETRY_GROWTH_DIVISOR = 8


# ----------------------------------------------------------------------------- steps (API calls)


def main_agent(messages: Sequence[Message]) -> str:
    """MAIN when the list holds the main chain, else the agent of the first record."""
    if not messages or any(m.agent == MAIN for m in messages):
        return MAIN
    return messages[0].agent


def api_steps(messages: Sequence[Message]) -> list[ApiCall]:
    """The de-duplicated API calls of the main agent in ``messages``, numbered like storage (``ApiCall.number``),
    each located in ``messages`` (``ApiCall.first`` and ``ApiCall.end``).

    Calls whose usage is all zero are kept (so numbers match storage) but carry no recorded context
    (``ApiCall.context`` 0). A log without any usage has one call per assistant record the model wrote, numbered
    from 1, without usage (``usage`` None) and without a timestamp.
    """
    agent = main_agent(messages)
    tracker = CallTracker()
    steps: list[ApiCall] = []
    for position, message in enumerate(messages):
        if message.agent != agent or message.usage is None or message.call_key is None:
            continue
        new = tracker.add(message)  # raises the output of the call a later record of the response belongs to
        if new is not None:
            new.first, new.end = position, position + 1
            steps.append(new)
            continue
        call = tracker.call_for(message)
        if call is not None:
            call.end = position + 1
    if steps:
        return steps
    for position, message in enumerate(messages):
        if message.agent == agent and message.kind == "assistant" and not message.synthetic:
            steps.append(
                ApiCall(
                    agent=agent,
                    number=len(steps) + 1,
                    key=message.call_key or "",
                    line=message.line,
                    usage=None,
                    model=message.model,
                    first=position,
                    end=position + 1,
                )
            )
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
        points.append(AfterCall(call=step.number, position=position))
    return points


def position_after_call(messages: Sequence[Message], call: int) -> int:
    """The list position where the session stood after main-chain call ``call`` (for ``decide(at=...)``)."""
    points = after_calls(messages)
    for point in points:
        if point.call == call:
            return point.position
    raise ValueError(
        f"call {call} does not exist: the session has "
        + (f"calls 1 to {points[-1].call}" if points else "no API calls")
        + "."
    )


# ----------------------------------------------------------------------------- results


@dataclass(slots=True)
class ReplayEvent:
    kind: ReplayKind
    after_call: int  # calls sent before it: it happened between call N and call N+1 (the request it shaped)
    tokens_before: int
    tokens_after: int
    removed_messages: int = 0  # recorded messages summarised away
    tool_ids: list[str] = field(default_factory=list)  # results pruned
    trigger: str = ""  # threshold | overflow | prune | blocking
    first_kept: int | None = None  # list position of the first message kept after the cut, when there is one
    reason: str = ""
    # As the session's own events say it ("One session, one story"), for the replay's path: the context the replay
    # sent with call N, and the context it sends with call N+1 after the event (modelled, or recorded where the
    # replay follows a real compaction). None: the replay sent no call N (an event before the first call).
    context_before: int | None = None
    context_after: int | None = None
    followed: bool = False  # a real compaction the replay took up (its summary and the recorded context after it)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class RealEvent:
    """One change the real agent made to its own history, as its record says."""

    kind: Literal["compaction", "prune"]
    after_call: int  # calls sent before it
    position: int  # list position of the record
    trigger: str
    tokens_before: int | None  # the agent's own count (compaction preTokens); None for a prune
    tokens_saved: int | None
    tool_ids: tuple[str, ...]
    summary_tokens: int | None  # the strategy's estimate of the real summary that followed a compaction


@dataclass(slots=True)
class Comparison:
    """A real event beside the replayed one (either may be missing), with the difference and its reason."""

    kind: str
    real_after_call: int | None
    real_tokens_before: int | None
    real_trigger: str | None
    replayed_after_call: int | None
    replayed_tokens_before: int | None
    replayed_trigger: str | None
    counted_at_real: int | None  # what the replay counted before the real event's call
    call_difference: int | None
    tokens_difference: int | None
    reason: str
    # The context the next call sent after the real compaction (recorded; None: no call recorded after it), and the
    # one the replay sends after its own (modelled, or recorded where it follows the real one).
    real_context_after: int | None = None
    replayed_context_after: int | None = None

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class ReplayResult:
    strategy: str
    series: list[tuple[int, int]]  # (call, simulated context sent with that call)
    recorded: list[tuple[int, int | None]]  # (call, recorded context) for the same steps
    events: list[ReplayEvent]
    peak: Peak  # the largest context sent or attempted (overflowing attempts included)
    compactions: int
    prunes: int
    overflows: int
    tokens_summarised: int  # the strategy's estimate of everything its compactions summarised
    window: int
    thresholds: Thresholds
    summary_tokens: int
    baseline: int  # estimated system prompt + tools (+ re-attached files) that no compaction removes
    notes: list[str] = field(default_factory=list)
    blocked: int = 0  # requests the agent refused to send (its blocking check)
    counted: list[tuple[int, int]] = field(default_factory=list)  # (call, what the agent counted before it)
    reproduces: bool = False  # kept for older readers: the same as follow_reality
    follow_reality: bool = False  # each real compaction was taken up where it happened
    # What a modelled compaction adds for what the agent re-attaches without a record, measured from the session's
    # real compactions (None: not measured; the rules model it per compaction, or the agent re-attaches nothing).
    reattached_tokens: int | None = None
    # Compactions that freed too little (the line reached again within a few calls): how many, the longest run, and
    # the call after which the agent's own rule stopped compacting (None: it did not stop).
    thrashing: dict[str, Any] | None = None
    comparison: list[Comparison] = field(default_factory=list)  # each real event beside the replayed one

    def as_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "reproduces": self.reproduces,
            "follow_reality": self.follow_reality,
            "reattached_tokens": self.reattached_tokens,
            "thrashing": self.thrashing,
            "window": self.window,
            "thresholds": dataclasses.asdict(self.thresholds),
            "summary_tokens": self.summary_tokens,
            "baseline": self.baseline,
            "peak": self.peak.as_json(),
            "compactions": self.compactions,
            "prunes": self.prunes,
            "overflows": self.overflows,
            "blocked": self.blocked,
            "tokens_summarised": self.tokens_summarised,
            "series": [list(point) for point in self.series],
            "recorded": [list(point) for point in self.recorded],
            "events": [event.as_json() for event in self.events],
            "counted": [list(point) for point in self.counted],
            "recorded_vs_replayed": [row.as_json() for row in self.comparison],
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


def _segment_candidates(
    steps: Sequence[ApiCall],
    compactions: Sequence[bool],
    prefix: Sequence[int],
    carried: Mapping[int, int] | None = None,
) -> list[tuple[int, int]]:
    """(segment start, recorded context minus the live messages' estimate) for the first call of the session and
    the first call after each real compaction (segment start: the position of the compaction's first record, 0 for
    the first segment).

    ``carried``: by the position of a real compaction's first record, what it put back in the context that
    ``prefix`` does not count (its summary, a tail kept in place): the context the first call after it sent holds
    them, so they are live messages too, not part of what every request carries.
    """
    candidates: list[tuple[int, int]] = []
    segment_start = 0
    open_segment = True
    in_run = False  # a compaction's records (a boundary and its summary) open one segment
    next_step = 0
    for position in range(len(compactions) + 1):
        while next_step < len(steps) and steps[next_step].first == position:
            step = steps[next_step]
            in_run = False
            if open_segment and step.context:
                live = prefix[position] - prefix[segment_start] + (carried or {}).get(segment_start, 0)
                candidates.append((segment_start, step.context - live))
                open_segment = False
            next_step += 1
        if position < len(compactions) and compactions[position] and not in_run:
            segment_start = position
            open_segment = True
            in_run = True
    return candidates


def estimate_baseline(
    steps: Sequence[ApiCall],
    compactions: Sequence[bool],
    prefix: Sequence[int],
    carried: Mapping[int, int] | None = None,
) -> int:
    """What every request carries besides the conversation: system prompt, tools.

    For the first call of the session and the first call after each real compaction: recorded context minus
    the estimate of the live messages before it (after a compaction: what it kept and its summary, ``carried``,
    and what came after it); the smallest of these (never negative). 0 without usage.
    """
    candidates = _segment_candidates(steps, compactions, prefix, carried)
    return max(0, min(c for _, c in candidates)) if candidates else 0


# ----------------------------------------------------------------------------- the replay


@dataclass(slots=True)
class _Recording:
    """What the session recorded, measured once: its calls (``api_steps``) and the strategy's running estimates."""

    messages: list[Message]
    steps: list[ApiCall]
    # The output of each call with a recorded context, by its number, as the strategy counts it (recorded or, where
    # the record kept a placeholder, estimated: ``ReplayRules.response_output``).
    outputs: dict[int, int]
    context_records: list[bool]  # the real agent's own compaction or prune records (never in the view)
    prefix: list[int]  # prefix[i]: the strategy's estimate of messages[:i] (context records count 0)
    pruned_prefix: list[int]  # pruned_prefix[i]: what the real prunes in messages[:i] say they reclaimed
    compaction_prefix: list[int]  # compaction_prefix[i]: real compaction records in messages[:i]
    baseline: int
    has_usage: bool
    # A log without usage: (after call, the agent's own count there, what it adds to the log's estimate, the call
    # where that would contradict the record), from the first real compaction that records the count
    # (``_count_anchor``); None: the log holds no such number.
    count_anchor: tuple[int, int, int, int | None] | None
    real_events: list[RealEvent]
    real_at: dict[int, RealEvent]  # by the position of the record that opens it
    estimated_outputs: int  # responses whose output is the strategy's estimate (the record kept a placeholder)
    measured_reattached: int | None = None  # what real compactions re-attached without a record, on average

    def estimate(self, start: int, end: int) -> int:
        return self.prefix[end] - self.prefix[start]

    def grown(self, start: int, end: int) -> int:
        """What the records between ``start`` and ``end`` added to the real context where no usage says it: their
        estimate, less what the agent's own prunes among them reclaimed (its records say how much)."""
        return self.estimate(start, end) - (self.pruned_prefix[end] - self.pruned_prefix[start])

    def compacted_between(self, start: int, end: int) -> bool:
        return self.compaction_prefix[end] - self.compaction_prefix[start] > 0


@dataclass(slots=True)
class _Walk:
    """The simulation's state while it walks the steps, and what it has produced so far."""

    view: list[Message] = field(default_factory=list)  # what the simulated context holds
    origin: list[int | None] = field(default_factory=list)  # each view record's session position (None: ours)
    cursor: int = 0  # session records before this position are admitted
    diverged: bool = False  # the simulated history is no longer the recorded one
    from_recorded: bool = True  # this step's context comes from recorded numbers (which show real prunes)
    previous: int = 0  # the simulated context of the previous step
    series: list[tuple[int, int]] = field(default_factory=list)
    recorded: list[tuple[int, int | None]] = field(default_factory=list)
    counted: list[tuple[int, int]] = field(default_factory=list)
    events: list[ReplayEvent] = field(default_factory=list)
    tokens_summarised: int = 0
    # After a decide() that changed nothing: the level it was taken at and the view size to wait for.
    blocked_level: int = 0
    blocked_until: int = 0
    # Real prunes: the ones recorded since the previous call (applied once this call's decision is taken), the
    # tokens the replay itself subtracted per result it cleared, and what a later real prune of those results
    # gives back (the recorded numbers subtract it once more).
    pending_prunes: list[RealEvent] = field(default_factory=list)
    cleared_by_replay: dict[str, int] = field(default_factory=dict)
    credit: int = 0
    # Following what really happened: the step of a replayed compaction no real one has met yet.
    follow: bool = False
    window_cap: int | None = None  # the session's model's real limit, for another agent's strategy
    # Compactions that freed too little (the line reached again within ``rules.refill_calls`` calls), in a row; the
    # longest such run; and the call after which the agent's own rule stopped compacting (None: it did not).
    rapid: int = 0
    rapid_longest: int = 0
    rapid_total: int = 0
    stopped_after: int | None = None
    real_prunes: bool = False  # the session has real prune records (only then is a replayed prune given back)
    unmet_replayed: int | None = None

    def block(self) -> None:
        self.blocked_until = len(self.view) + max(1, len(self.view) // RETRY_GROWTH_DIVISOR)

    def adopt_appended(self) -> None:
        """After a rule changed the view in place (``ReplayRules.apply_prune``, ``apply_recorded_prune``): the records
        it appended (a strategy whose prune is a record of its own, KHAELOR's ``context.pruned``) are the replay's, so
        ``origin`` stays aligned with ``view``. Such a rule changes and appends records, never removes one."""
        appended = len(self.view) - len(self.origin)
        if appended < 0:
            raise RuntimeError(f"a prune removed {-appended} record(s) from the replay's view; it may only append")
        self.origin.extend([None] * appended)


def _calls_before(steps: Sequence[ApiCall], firsts: Sequence[int], position: int) -> int:
    """The number of the last call sent before list position ``position`` (0 before the first call)."""
    index = bisect.bisect_right(firsts, position)
    return steps[index - 1].number if index else 0


def _real_events(messages: list[Message], steps: list[ApiCall], rules: ReplayRules) -> list[RealEvent]:
    """The real agent's own compactions and prunes, from its records (a boundary and its summary are one)."""
    firsts = [step.first for step in steps]
    events: list[RealEvent] = []
    open_compaction: dict[str, Any] | None = None

    def close() -> None:
        nonlocal open_compaction
        if open_compaction is not None:
            events.append(RealEvent(kind="compaction", tool_ids=(), tokens_saved=None, **open_compaction))
        open_compaction = None

    for position, message in enumerate(messages):
        data = message.data
        if is_compaction_record(message):
            summary = rules.summary_size(message) if message.kind == "compact_summary" else None
            trigger, tokens_before = rules.real_facts(message)
            if open_compaction is None:
                open_compaction = {
                    "after_call": _calls_before(steps, firsts, position),
                    "position": position,
                    "trigger": trigger,
                    "tokens_before": tokens_before,
                    "summary_tokens": summary,
                }
            else:
                if summary is not None and open_compaction["summary_tokens"] is None:
                    open_compaction["summary_tokens"] = summary
                open_compaction["trigger"] = open_compaction["trigger"] or trigger
                if open_compaction["tokens_before"] is None:
                    open_compaction["tokens_before"] = tokens_before
            continue
        if message.raw_type in PRUNE_RECORD_TYPES:
            close()
            saved = rules.real_prune_saving(message)
            events.append(
                RealEvent(
                    kind="prune",
                    after_call=_calls_before(steps, firsts, position),
                    position=position,
                    trigger=str(data.get("trigger") or ""),
                    tokens_before=None,
                    tokens_saved=saved if isinstance(saved, int) else None,
                    tool_ids=rules.real_prune_ids(message),
                    summary_tokens=None,
                )
            )
            continue
        if message.kind not in ("system", "bookkeeping"):
            close()
    close()
    return events


def _carried_by_real(
    messages: list[Message],
    rules: ReplayRules,
    context_records: Sequence[bool],
    admitted: _AdmittedWeights,
    *,
    position: int,
) -> int:
    """What the real compaction opening at ``position`` put in the context that the running estimate counts as 0:
    the tail it kept in place (``rules.kept_by_real``) and its summary records, as ``_take_up_real`` admits them."""
    kept = admitted.total(rules.kept_by_real(messages, position))
    summaries = 0
    for message in messages[position:]:
        if not is_compaction_record(message):
            if message.kind in ("system", "bookkeeping"):
                continue
            break
        if message.kind == "compact_summary":
            summaries += sum(rules.estimate(m) for m in rules.admit(message))
    return kept + summaries


class _AdmittedWeights:
    """The strategy's estimate of each recorded message as ``_take_up_real`` admits it (0 for the agent's own context
    records but its summaries), computed once per position: an agent that keeps its tail in place
    (``ReplayRules.kept_by_real``, KHAELOR: every earlier record) asks for all of them at each real compaction."""

    def __init__(self, messages: list[Message], rules: ReplayRules, context_records: Sequence[bool]) -> None:
        self.messages, self.rules, self.context_records = messages, rules, context_records
        self.weights: dict[int, int] = {}
        self.prefix: list[int] | None = None  # over all positions, built on the first range asked for

    def weight(self, position: int) -> int:
        weight = self.weights.get(position)
        if weight is None:
            message = self.messages[position]
            counted = not self.context_records[position] or message.kind == "compact_summary"
            weight = sum(self.rules.estimate(m) for m in self.rules.admit(message)) if counted else 0
            self.weights[position] = weight
        return weight

    def total(self, positions: Sequence[int]) -> int:
        if isinstance(positions, range) and positions.step == 1 and len(positions) > 1:
            if self.prefix is None:
                prefix = [0]
                for position in range(len(self.messages)):
                    prefix.append(prefix[-1] + self.weight(position))
                self.prefix = prefix
            return self.prefix[positions.stop] - self.prefix[positions.start]
        return sum(self.weight(p) for p in positions)


def _count_anchor(
    real_events: Sequence[RealEvent],
    prefix: Sequence[int],
    pruned_prefix: Sequence[int],
    *,
    steps: Sequence[ApiCall],
    rules: ReplayRules,
) -> tuple[int, int, int, int | None] | None:
    """For a log without usage: (after call, the agent's count, what the log does not show) at its first real
    compaction whose record carries the agent's own count (``RealEvent.tokens_before``; an agent that counts from its
    usage accounting but does not log the usage writes it there), when nothing changed the history before it but
    prunes whose savings it records.

    That count is the only number of the real context such a log holds: what it is above the strategy's estimate
    of what the log shows there (system prompt, tool definitions, content the log abridges) is carried by every
    request, as a baseline measured from usage is. The fourth item is the first call before the compaction after
    which that offset would put the count at the agent's line, where the agent did not compact: then the log's
    numbers contradict each other, and the offset is not used (None: they agree). None: no such record, so that part
    is not known."""
    for event in real_events:
        if event.kind == "prune":
            if event.tokens_saved is None:
                return None
            continue
        if event.tokens_before is None:
            return None
        shown = prefix[event.position] - pruned_prefix[event.position]
        unseen = max(0, event.tokens_before - shown)
        contradicted = next(
            (
                step.number - 1
                for step in steps
                if 0 < step.number - 1 < event.after_call
                and rules.over(unseen + prefix[step.first] - pruned_prefix[step.first], rules.thresholds.autocompact)
            ),
            None,
        )
        return event.after_call, event.tokens_before, unseen, contradicted
    return None


def _measure(messages: list[Message], rules: ReplayRules) -> _Recording:
    steps = api_steps(messages)
    context_records = [is_context_record(m) for m in messages]
    compactions = [is_compaction_record(m) for m in messages]
    prefix = [0]
    compaction_prefix = [0]
    for position, message in enumerate(messages):
        prefix.append(prefix[-1] + (0 if context_records[position] else rules.estimate(message)))
        compaction_prefix.append(compaction_prefix[-1] + (1 if compactions[position] else 0))
    estimated = 0
    outputs: dict[int, int] = {}
    for step in steps:
        if step.usage is None or not step.usage.context:
            continue
        key = messages[step.first].call_key
        response = [m for m in messages[step.first : step.end] if m.role == "assistant" and m.call_key == key]
        outputs[step.number], guessed = rules.response_output(response, recorded=step.usage.output_tokens)
        estimated += guessed
    real_events = _real_events(messages, steps, rules)
    saved_at = {e.position: e.tokens_saved or 0 for e in real_events if e.kind == "prune"}
    pruned_prefix = [0]
    for position in range(len(messages)):
        pruned_prefix.append(pruned_prefix[-1] + saved_at.get(position, 0))
    admitted = _AdmittedWeights(messages, rules, context_records)
    carried = {
        event.position: _carried_by_real(messages, rules, context_records, admitted, position=event.position)
        for event in real_events
        if event.kind == "compaction"
    }
    has_usage = any(step.context for step in steps)
    baseline = estimate_baseline(steps, compactions, prefix, carried)
    anchor = None if has_usage else _count_anchor(real_events, prefix, pruned_prefix, steps=steps, rules=rules)
    if anchor is not None and anchor[3] is None:
        baseline = anchor[2]
    # What an agent that re-attaches context without a record (``rules.reattaches``) really put back after its
    # compactions: the first call after each one, above the baseline and what its records show.
    hidden = [c - baseline for start, c in _segment_candidates(steps, compactions, prefix, carried) if start > 0]
    measured = round(sum(hidden) / len(hidden)) if hidden and rules.reattaches else None
    return _Recording(
        messages=messages,
        steps=steps,
        outputs=outputs,
        context_records=context_records,
        prefix=prefix,
        pruned_prefix=pruned_prefix,
        compaction_prefix=compaction_prefix,
        baseline=baseline,
        measured_reattached=measured,
        has_usage=has_usage,
        count_anchor=anchor,
        real_events=real_events,
        real_at={event.position: event for event in real_events},
        estimated_outputs=estimated,
    )


def _admit(walk: _Walk, recording: _Recording, rules: ReplayRules, *, until: int) -> None:
    """Bring the session's records before ``until`` into the view, as the strategy sees them.

    A real prune is held until this call's decision is taken; results the replay already cleared itself give
    back what it subtracted, because the recorded numbers after the real prune subtract them again.
    """
    for position in range(walk.cursor, until):
        if not recording.context_records[position]:
            for admitted in rules.admit(recording.messages[position]):
                walk.view.append(admitted)
                walk.origin.append(position)
            continue
        real = recording.real_at.get(position)
        if real is not None and real.kind == "prune":
            walk.credit += sum(walk.cleared_by_replay.pop(i, 0) for i in real.tool_ids)
            walk.pending_prunes.append(real)
    walk.cursor = max(walk.cursor, until)


def _actual_context(walk: _Walk, recording: _Recording, *, step: ApiCall, prev: ApiCall | None) -> int:
    """The simulated context sent with ``step``: the recorded one until the histories diverge, then grown."""
    since = prev.first if prev is not None else 0
    credit, walk.credit = walk.credit, 0
    walk.from_recorded = True
    if recording.compacted_between(since, step.first):
        walk.diverged = True  # the real agent compacted: recorded numbers no longer describe our history
    recorded = step.context  # 0: none recorded
    if prev is None:
        if recorded:
            return recorded
        walk.from_recorded = False
        return recording.baseline + recording.grown(0, step.first)
    if not walk.diverged and recorded:
        return recorded
    clean = not recording.compacted_between(prev.first, step.first)
    previously = prev.context
    if recorded and previously and clean:
        return max(0, walk.previous + recorded - previously + credit)
    walk.from_recorded = False
    return walk.previous + recording.grown(since, step.first)


def _recorded_count(walk: _Walk, recording: _Recording, *, number: int) -> int | None:
    """The agent's own count before call ``number`` where a log without usage records it (a real compaction's
    ``tokens_before`` right before that call: KHAELOR's ``tokensBefore``, "from real usage accounting",
    docs/formats/khaelor.md §4) and the replay's history is still the recorded one (it has compacted or pruned
    nothing of its own, the real prunes it applied are the agent's, and no real compaction came before). Reality
    first: that number is what the agent compared with its line there, so the replay's decision there uses it;
    elsewhere the count stays modelled. With usage, the count is already the recorded usage's."""
    if recording.has_usage or any(e.kind in ("compaction", "prune") for e in walk.events):
        return None
    # Only the first real compaction: after it the real history is no longer the replay's (unless the replay
    # compacted too, and then it has changed the history itself).
    first = next((e for e in recording.real_events if e.kind == "compaction"), None)
    if first is None or first.after_call != number - 1:
        return None
    return first.tokens_before


def _counted_context(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: ApiCall, prev: ApiCall | None, actual: int
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
    output = recording.outputs[prev.number] if prev.context else recording.estimate(prev.first, prev.end)
    return walk.previous + output + recording.estimate(prev.end, step.first)


def _compact(
    walk: _Walk,
    recording: _Recording,
    rules: ReplayRules,
    *,
    after_call: int,
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
    walk.cleared_by_replay.clear()  # what the replay cleared is summarised away with the rest
    event = ReplayEvent(
        kind="compaction",
        after_call=after_call,
        tokens_before=tokens_before,
        tokens_after=recording.baseline + rules.view_tokens(walk.view) + _kept_in_real_tokens(walk, recording, rules),
        removed_messages=removed,
        trigger=trigger,
        first_kept=first_kept,
        reason=reason,
    )
    walk.events.append(event)
    return event


def _recorded_scale(recording: _Recording, *, start: int, end: int) -> float | None:
    """Real tokens per estimated token over the recorded calls between list positions ``start`` and ``end``: the
    growth of the recorded context from the first call at or after ``start`` to the last one before ``end`` with no
    real compaction or prune between them, over the strategy's estimate of the same records. None: no such span.

    The agent's estimate (chars / 4 and the like) is not the model's tokenizer; a compaction's kept tail was really
    sent, so the session's own usage says what it weighs."""
    calls = [s for s in recording.steps if start <= s.first < end and s.context]
    if len(calls) < 2:
        return None
    first = calls[0]
    changes = [e.position for e in recording.real_events if e.position >= first.first]
    last = first
    for call in calls[1:]:
        if any(first.first <= p < call.first for p in changes):
            break
        last = call
    estimated = recording.estimate(first.first, last.first)
    grown = last.context - first.context
    if last is first or estimated <= 0 or grown <= 0:
        return None
    return grown / estimated


def _kept_in_real_tokens(walk: _Walk, recording: _Recording, rules: ReplayRules) -> int:
    """What a modelled compaction's kept tail weighs beyond the strategy's estimate of it: when the compaction keeps
    the session's newest records as they were sent (klaude-code's and KHAELOR's tail, a reactive compaction's
    preserved segment), they count at the session's own tokens per estimated token over them (``_recorded_scale``).
    0 when nothing recorded is kept, when what is kept is a selection (Codex's retained user messages: the span's
    tool output says nothing of them), or when no recorded span measures it."""
    kept = [(m, o) for m, o in zip(walk.view, walk.origin, strict=True) if o is not None]
    if not kept or not recording.has_usage:
        return 0
    start = min(o for _, o in kept)
    # A record between the first kept one and the last admitted that the view no longer holds (but the agent's own
    # context records and what estimates 0): the view is a selection, not the session's tail. Estimates are never
    # negative, so the span's estimate above what the view holds of it says so (prefix sums, no record estimated).
    prefix = recording.prefix
    held = sum(prefix[o + 1] - prefix[o] for o in {o for _, o in kept})
    if recording.estimate(start, walk.cursor) > held:
        return 0
    scale = _recorded_scale(recording, start=start, end=walk.cursor)
    if scale is None:
        return 0
    # What the kept records weigh in the context as the strategy counts it (an agent whose log keeps replaced events
    # in place counts them 0): the whole view less the replay's own records (summary, attachments).
    ours = [m for m, o in zip(walk.view, walk.origin, strict=True) if o is None]
    estimated = rules.view_tokens(walk.view) - rules.view_tokens(ours)
    return round(max(0, estimated) * (scale - 1))


def _result_tokens(view: list[Message], rules: ReplayRules, tool_ids: list[str]) -> dict[str, int]:
    """What clearing each of ``tool_ids`` saves in ``view``, by the strategy's estimate."""
    wanted = set(tool_ids)
    saved: dict[str, int] = {}
    for message in view:
        for block in message.blocks:
            if block.tool_id in wanted and block.kind in ("tool_result", "image"):
                copy = [message]
                rules.apply_recorded_prune(copy, [block.tool_id])
                saved[block.tool_id] = saved.get(block.tool_id, 0) + rules.estimate(message) - rules.estimate(copy[0])
    return saved


def _prune(walk: _Walk, rules: ReplayRules, *, step: ApiCall, decision: Decision, actual: int) -> int:
    """Apply the strategy's prune; the simulated context after it (a real prune's saving is never taken twice)."""
    ids = list(decision.prune)
    real_now = {i for real in walk.pending_prunes for i in real.tool_ids}
    # The recorded numbers of this call already show a real prune recorded just before it: results it cleared
    # save nothing more.
    taken = [i for i in ids if i in real_now] if walk.from_recorded else []
    reason = decision.reason
    if taken:
        rules.apply_recorded_prune(walk.view, taken)
        walk.adopt_appended()
        reason += f"; the real prune before this call cleared {len(taken)} of them, its saving is in the recorded usage"
    own = [i for i in ids if i not in set(taken)]
    per_result = _result_tokens(walk.view, rules, own) if walk.real_prunes else {}
    before_tokens = rules.view_tokens(walk.view)
    if own:
        rules.apply_prune(walk.view, own, decision)
        walk.adopt_appended()
    saved = max(0, before_tokens - rules.view_tokens(walk.view))
    for tool_id in own:
        walk.cleared_by_replay[tool_id] = per_result.get(tool_id, 0)
    walk.events.append(
        ReplayEvent(
            kind="prune",
            after_call=step.number - 1,
            tokens_before=actual,
            tokens_after=max(0, actual - saved),
            tool_ids=ids,
            trigger="prune",
            reason=reason,
        )
    )
    walk.diverged = True
    return max(0, actual - saved)


def _act_at_line(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: ApiCall, level: int, counted: int, actual: int
) -> int:
    """Let the strategy prune and/or compact at a line its count reached; the simulated context after."""
    acted = False
    try:
        decision = rules.decide(walk.view, counted)
    except (CutRefused, ValueError):
        decision = None
    if decision is not None and decision.prune:
        actual = _prune(walk, rules, step=step, decision=decision, actual=actual)
        acted = True
    if decision is not None and level == 2 and decision.cut is not None and rules.fires(decision):
        # The count the agent compared with its line is what it reports as the compaction's tokens before.
        compaction = _compact(
            walk,
            recording,
            rules,
            after_call=step.number - 1,
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


def _overflow(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, step: ApiCall, actual: int, window: int
) -> int:
    """Record a request above the window and, for a reactive strategy, compact; the simulated context after."""
    overflow = ReplayEvent(
        kind="overflow",
        after_call=step.number - 1,
        tokens_before=actual,
        tokens_after=actual,
        trigger="overflow",
        reason=rules.overflow_reason(actual, window),
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
        after_call=step.number - 1,
        cut=cut,
        tokens_before=actual,
        trigger="overflow",
        reason="reactive compaction after the overflow" + (f"; {cut.reason}" if cut.reason else ""),
    )
    overflow.tokens_after = compaction.tokens_after
    return compaction.tokens_after


def _admit_records(walk: _Walk, recording: _Recording, rules: ReplayRules, *, positions: Iterable[int]) -> None:
    """The records at ``positions`` into the walk's view as the agent sends them (``rules.admit``); the agent's own
    context records stay out, but a compaction's summary goes in."""
    for position in positions:
        message = recording.messages[position]
        if recording.context_records[position] and message.kind != "compact_summary":
            continue
        for admitted in rules.admit(message):
            walk.view.append(admitted)
            walk.origin.append(position)


def _take_up_real(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, real: RealEvent, step: ApiCall, actual: int
) -> int:
    """Continue from a real compaction: the real summary and what really followed it (what the agent kept is in
    its records after the compaction record, or, for an agent that keeps its tail in place, ``rules.kept_by_real``).
    """
    walk.view, walk.origin = [], []
    _admit_records(walk, recording, rules, positions=rules.kept_by_real(recording.messages, real.position))
    _admit_records(walk, recording, rules, positions=range(real.position, step.first))
    walk.cleared_by_replay.clear()
    walk.pending_prunes.clear()
    walk.credit = 0
    recorded = step.context
    if not recorded:
        # No usage recorded: the context after it is the strategy's estimate of what really stayed.
        walk.diverged = True
        return recording.baseline + rules.view_tokens(walk.view)
    walk.diverged = False
    return recorded


def _follow_real(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, number: int, compacted: bool, actual: int
) -> int:
    """Following what really happened: each real compaction is taken up where it happened.

    A replayed compaction in the same gap, or one call before it, is the same compaction (the replay's count
    reached the line a call early); otherwise the real one (a manual one, or one the rules did not reach) is added
    as a followed event. Either way the view becomes the real summary and what followed it, and the recorded
    context is used again.
    """
    step = recording.steps[number]
    prev = recording.steps[number - 1] if number else None
    since = prev.first if prev is not None else 0
    real_here = next(
        (
            e
            for e in recording.real_events
            if e.kind == "compaction" and since <= e.position < step.first and e.after_call == step.number - 1
        ),
        None,
    )
    if real_here is None:
        if compacted:
            walk.unmet_replayed = number
        return actual
    met = compacted or walk.unmet_replayed == number - 1
    walk.unmet_replayed = None
    before = actual
    event: ReplayEvent | None = None
    if met:
        event = next((e for e in reversed(walk.events) if e.kind == "compaction"), None)
    if event is None or event.after_call < step.number - 2:
        counted = walk.counted[-1][1] if walk.counted else before
        trigger = real_here.trigger or "real"
        event = ReplayEvent(
            kind="compaction",
            after_call=step.number - 1,
            tokens_before=counted,
            tokens_after=before,
            trigger="followed",
            reason=(
                f"the agent really compacted here ({trigger}"
                + (f", at its count {real_here.tokens_before:,}" if real_here.tokens_before is not None else "")
                + f"); the replay's count was {counted:,}, and it follows what really happened"
            ),
        )
        walk.events.append(event)
    event.followed = True
    after = _take_up_real(walk, recording, rules, real=real_here, step=step, actual=actual)
    summary = f"~{real_here.summary_tokens:,}-token" if real_here.summary_tokens is not None else "real"
    sent = f"{after:,} tokens sent with call {step.number}" if step.context else f"~{after:,} tokens, estimated"
    event.reason += (
        f"; from here the replay continues from the real compaction after call {real_here.after_call} "
        f"(its {summary} summary, {sent})"
    )
    if event.after_call == step.number - 1:
        event.tokens_after = after
    return after


def _user_compaction(walk: _Walk, recording: _Recording, rules: ReplayRules, *, number: int, actual: int) -> int:
    """A real compaction the user asked for (``/compact``) right before this call, modelled: the user would have
    typed it in the replay too, and no rule of the strategy fires it."""
    step = recording.steps[number]
    since = recording.steps[number - 1].first if number else 0
    real = next(
        (
            e
            for e in recording.real_events
            if e.kind == "compaction" and since <= e.position < step.first and rules.user_asked(e.trigger)
        ),
        None,
    )
    if real is None:
        return actual
    cut = rules.user_cut(walk.view, walk.origin, recording.messages, real.position)
    how = f"modelled as its record says: {cut.reason}" if cut is not None else "modelled by the strategy's own cut"
    if cut is None:
        try:
            cut = rules.strategy.select_cut(walk.view)
        except (CutRefused, ValueError):
            cut = None
    if cut is None:
        return actual
    event = _compact(
        walk,
        recording,
        rules,
        after_call=step.number - 1,
        cut=cut,
        tokens_before=walk.counted[-1][1] if walk.counted else actual,
        trigger=real.trigger,
        reason=f"the user asked for this compaction ({real.trigger}); {how}",
    )
    return event.tokens_after


def _count_refill(walk: _Walk, rules: ReplayRules, event: ReplayEvent) -> None:
    """A compaction soon after the previous one freed too little; the agent's rule may stop it (``thrash_stop``)."""
    previous = [e for e in walk.events if e.kind == "compaction" and e is not event]
    if previous and event.after_call - previous[-1].after_call <= rules.refill_calls:
        walk.rapid += 1
        walk.rapid_total += 1
    else:
        walk.rapid = 0
    walk.rapid_longest = max(walk.rapid_longest, walk.rapid)
    stop = rules.thrash_stop()
    if stop is not None and walk.stopped_after is None and walk.rapid >= stop[0]:
        walk.stopped_after = event.after_call
        event.reason += f"; {stop[2]}: it stops here"


def _pending_call(recording: _Recording, *, follow: bool) -> ApiCall | None:
    """The call the agent was about to make where the session ends (a live session, seen before its next call is
    written): its records after the last call hold what that request carries and say the agent decided there: its
    own compaction record, or, for a modelled replay, a prompt or tool results (what the strategy would do before
    the next call). A replay that follows what really happened takes it only where the agent's record says it
    compacted: a session that simply ends there (its user left) made no further decision. None: the session ends on
    a call, or nothing that asks for one follows it.

    The agent decides before it sends, so a compaction it made there (its record is the session's last) is decided,
    and compared, as at any other call; the request itself is never sent, so it gets no point of the series."""
    if not recording.steps:
        return None
    last = recording.steps[-1]
    after = range(last.end, len(recording.messages))
    asks = any(
        is_compaction_record(recording.messages[p])
        or (
            not follow
            and not recording.context_records[p]
            and recording.messages[p].role == "user"
            and recording.messages[p].kind not in ("system", "bookkeeping")
        )
        for p in after
    )
    if not asks:
        return None
    end = len(recording.messages)
    return dataclasses.replace(last, number=last.number + 1, key="", usage=None, timestamp=None, first=end, end=end)


def _step(
    walk: _Walk, recording: _Recording, rules: ReplayRules, *, number: int, window: int, pending: bool = False
) -> None:
    """One API call: what the simulation would send, what the strategy does before sending it. ``pending``: the
    call the session has not sent yet (``_pending_call``): decided, never sent, so no overflow and no point."""
    step = recording.steps[number]
    prev = recording.steps[number - 1] if number else None
    _admit(walk, recording, rules, until=step.first)
    actual = _actual_context(walk, recording, step=step, prev=prev)
    messages = recording.messages
    rules.upcoming_call(messages[step.first : step.end])
    window = rules.call_window(window)
    if walk.window_cap is not None:
        window = min(window, walk.window_cap)  # another agent's strategy: the session's model takes no more
    counted = rules.count(_counted_context(walk, recording, rules, step=step, prev=prev, actual=actual))
    own = _recorded_count(walk, recording, number=step.number)
    if own is not None:
        counted = own
    walk.counted.append((step.number, counted))
    idle = _idle_minutes(messages[prev.end - 1], messages[step.first - 1]) if prev is not None else None
    level = rules.level(counted, idle_minutes=idle)
    if walk.stopped_after is not None and level == 2:
        level = 0  # the agent stopped autocompacting (its thrash-loop rule)
    compactions_before = len(walk.events)
    if level and (level > walk.blocked_level or len(walk.view) >= walk.blocked_until):
        actual = _act_at_line(walk, recording, rules, step=step, level=level, counted=counted, actual=actual)
    blocked = None if pending else rules.blocks(counted)  # a call never sent neither blocks nor overflows
    if blocked is not None:
        walk.events.append(
            ReplayEvent(
                kind="blocked",
                after_call=step.number - 1,
                tokens_before=counted,
                tokens_after=actual,
                trigger="blocking",
                reason=blocked,
            )
        )
    elif actual > window and not pending:
        actual = _overflow(walk, recording, rules, step=step, actual=actual, window=window)
    for real in walk.pending_prunes:
        rules.apply_recorded_prune(walk.view, list(real.tool_ids))
        walk.adopt_appended()
    walk.pending_prunes.clear()
    if walk.follow:
        compacted = any(e.kind == "compaction" for e in walk.events[compactions_before:])
        actual = _follow_real(walk, recording, rules, number=number, compacted=compacted, actual=actual)
    elif not any(e.kind == "compaction" for e in walk.events[compactions_before:]):
        actual = _user_compaction(walk, recording, rules, number=number, actual=actual)
    for event in walk.events[compactions_before:]:
        event.context_before = walk.previous if prev is not None else None
        event.context_after = actual
        if event.kind == "compaction" and not event.followed:
            _count_refill(walk, rules, event)
    if pending:
        return
    walk.series.append((step.number, actual))
    walk.recorded.append((step.number, step.context or None))
    walk.previous = actual


# ----------------------------------------------------------------------------- recorded vs replayed


def _compare(
    recording: _Recording,
    events: Sequence[ReplayEvent],
    counted: dict[int, int],
    thresholds: Thresholds,
    *,
    summary_tokens: int | None,
) -> list[Comparison]:
    """``summary_tokens``: the simulated summary's size, None when the replay follows the real summaries."""
    """Each real compaction and prune beside the replayed one within one call, with why they differ."""
    kinds = {"compaction": "compaction", "prune": "prune"}
    used: set[int] = set()
    rows: list[Comparison] = []
    for real in recording.real_events:
        candidates = [
            (abs(e.after_call - real.after_call), index)
            for index, e in enumerate(events)
            if index not in used and e.kind == kinds[real.kind] and abs(e.after_call - real.after_call) <= 1
        ]
        at_real = counted.get(real.after_call + 1)
        if not candidates:
            rows.append(
                Comparison(
                    kind=real.kind,
                    real_after_call=real.after_call,
                    real_tokens_before=real.tokens_before,
                    real_trigger=real.trigger or None,
                    replayed_after_call=None,
                    replayed_tokens_before=None,
                    replayed_trigger=None,
                    counted_at_real=at_real,
                    call_difference=None,
                    tokens_difference=None,
                    reason=_missing_reason(real, at_real, thresholds),
                )
            )
            continue
        _, index = min(candidates)
        used.add(index)
        event = events[index]
        rows.append(_matched(real, event, at_real, summary_tokens=summary_tokens))
        if real.kind == "compaction":
            rows[-1].replayed_context_after = event.context_after
    firsts = [step.first for step in recording.steps]
    for row, real in zip(rows, recording.real_events, strict=True):
        if real.kind == "compaction":
            index = bisect.bisect_right(firsts, real.position)  # the first call after it
            after = recording.steps[index] if index < len(recording.steps) else None
            row.real_context_after = (after.context or None) if after is not None else None
    for index, event in enumerate(events):
        if index in used or event.kind not in ("compaction", "prune"):
            continue
        rows.append(
            Comparison(
                kind=event.kind,
                real_after_call=None,
                real_tokens_before=None,
                real_trigger=None,
                replayed_after_call=event.after_call,
                replayed_tokens_before=event.tokens_before,
                replayed_trigger=event.trigger,
                counted_at_real=None,
                call_difference=None,
                tokens_difference=None,
                reason=f"no real {event.kind} within one call: {event.reason}",
                replayed_context_after=event.context_after if event.kind == "compaction" else None,
            )
        )
    rows.sort(key=lambda row: row.real_after_call if row.real_after_call is not None else row.replayed_after_call or 0)
    return rows


def _missing_reason(real: RealEvent, counted: int | None, thresholds: Thresholds) -> str:
    if real.kind == "compaction" and real.trigger == "manual":
        return "a manual compaction: the user asked for it, no rule of the strategy fires it"
    if real.kind == "compaction":
        line = thresholds.autocompact
        if line is None:
            return "the strategy has no compaction line for this session"
        count = f"{counted:,}" if counted is not None else "nothing"
        real_count = f" (the real count was {real.tokens_before:,})" if real.tokens_before is not None else ""
        return (
            f"the replay counted {count} after call {real.after_call}, below the compaction line {line:,}{real_count}"
        )
    return "the strategy's rules chose no prune here (see the notes for which prune rules applied)"


def _matched(real: RealEvent, event: ReplayEvent, counted: int | None, *, summary_tokens: int | None) -> Comparison:
    difference = event.after_call - real.after_call
    tokens_difference = event.tokens_before - real.tokens_before if real.tokens_before is not None else None
    if difference < 0:
        reason = f"one call earlier: the replay's count {event.tokens_before:,} reached the line before the real one"
    elif difference > 0:
        reason = f"one call later: the replay's count after call {real.after_call} was {counted or 0:,}"
    else:
        reason = "same call"
    if real.kind == "prune":
        same = set(event.tool_ids) == set(real.tool_ids)
        reason += (
            f"; the same {len(real.tool_ids)} results cleared"
            if same
            else f"; {len(set(event.tool_ids) & set(real.tool_ids))} of {len(real.tool_ids)} real results cleared"
        )
    elif tokens_difference is not None and real.tokens_before:
        share = 100 * tokens_difference / real.tokens_before
        reason += f"; count {tokens_difference:+,} tokens ({share:+.1f}%) from the real one"
    if real.kind == "compaction" and summary_tokens is not None and real.summary_tokens is not None:
        gap = summary_tokens - real.summary_tokens
        if gap:
            longer = "longer" if gap > 0 else "shorter"
            reason += (
                f"; the simulated summary (~{summary_tokens:,} tokens, estimated) is {abs(gap):,} tokens "
                f"{longer} than the real one (~{real.summary_tokens:,}), so what follows differs"
            )
    return Comparison(
        kind=real.kind,
        real_after_call=real.after_call,
        real_tokens_before=real.tokens_before,
        real_trigger=real.trigger or None,
        replayed_after_call=event.after_call,
        replayed_tokens_before=event.tokens_before,
        replayed_trigger=event.trigger,
        counted_at_real=counted,
        call_difference=difference,
        tokens_difference=tokens_difference,
        reason=reason,
    )


def _result(
    walk: _Walk,
    recording: _Recording,
    rules: ReplayRules,
    *,
    strategy: Strategy,
    thresholds: Thresholds,
    summary_tokens: int,
) -> ReplayResult:
    events = walk.events
    # What it attempted counts too: an overflowing request, and the context a compaction was taken at (the request
    # it would have sent), so the peak is never below a context the replay compacts at.
    attempts = list(walk.series) + [
        (e.after_call + 1, e.tokens_before) for e in events if e.kind in ("overflow", "compaction")
    ]
    peak = peak_of(sorted(attempts, key=lambda point: point[0]))
    notes: list[str] = []
    anchor = recording.count_anchor
    if not recording.has_usage and anchor is not None and anchor[3] is None:
        call, count, unseen, _ = anchor
        notes.append(
            f"No usage is recorded: every context value is the strategy's own estimate of what the log shows, plus "
            f"~{unseen:,} tokens it does not show (system prompt, tool definitions, content the log abridges), "
            f"measured from the agent's own count before its compaction after call {call} ({count:,})."
        )
    elif not recording.has_usage and anchor is not None:
        call, count, unseen, contradicted = anchor
        notes.append(
            f"No usage is recorded, and the log's numbers contradict each other: the agent's own count before its "
            f"compaction after call {call} ({count:,}) is ~{unseen:,} tokens above what the log shows there, but "
            f"that much more would have put its count at its line after call {contradicted}, where it did not "
            "compact. What every request carries besides what the log shows is therefore not known: every context "
            "value is the strategy's estimate of the log alone, and the agent's lines may be reached later than the "
            f"agent reached them, or not at all. Where the record gives the agent's own count (before call "
            f"{call + 1}: {count:,}) and the replay has changed nothing yet, its decision there uses that count."
        )
    elif not recording.has_usage:
        notes.append(
            "No usage is recorded, and the log records no count of the agent's own: every context value is the "
            "strategy's estimate of what the log shows, without what every request carries besides (system prompt, "
            "tool definitions), which is not known. The agent's lines may be reached later than the agent reached "
            "them, or not at all."
        )
    if thresholds.assumption:
        notes.append(f"The thresholds are partly assumed: {thresholds.source}")
    if recording.estimated_outputs:
        notes.append(
            f"{recording.estimated_outputs} responses kept the streaming placeholder as their output tokens: their "
            "output is estimated from their content."
        )
    if walk.rapid_longest:
        compactions = sum(1 for e in events if e.kind == "compaction")
        stop = rules.thrash_stop()
        notes.append(
            f"Compactions that free too little: {walk.rapid_total:,} of the {compactions:,} compactions came "
            f"within {rules.refill_calls} calls of the previous one ({walk.rapid_longest + 1:,} in a row at most): "
            "the context refills to the line right after each. "
            + (
                f"{stop[2]}: this replay stops after call {walk.stopped_after}."
                if stop is not None and walk.stopped_after is not None
                else (
                    f"{strategy.short_label} has no rule that stops it in this version: it keeps compacting."
                    if stop is None
                    else "Not enough in a row for the agent's rule to stop it."
                )
            )
        )
    if walk.follow:
        notes.append(
            "Following what really happened: at each real compaction the replay continues from the real summary "
            "and the recorded context after it (switch it off to model every compaction)."
        )
    notes.extend(rules.notes)
    return ReplayResult(
        strategy=strategy.name,
        series=walk.series,
        recorded=walk.recorded,
        events=events,
        peak=peak,
        compactions=sum(1 for e in events if e.kind == "compaction"),
        prunes=sum(1 for e in events if e.kind == "prune"),
        overflows=sum(1 for e in events if e.kind == "overflow"),
        blocked=sum(1 for e in events if e.kind == "blocked"),
        tokens_summarised=walk.tokens_summarised,
        window=thresholds.window,
        thresholds=thresholds,
        summary_tokens=summary_tokens,
        baseline=recording.baseline,
        notes=notes,
        counted=walk.counted,
        reproduces=walk.follow,
        follow_reality=walk.follow,
        reattached_tokens=rules.measured_reattached,
        thrashing=(
            {
                "rapid_compactions": walk.rapid_total,
                "longest_run": walk.rapid_longest + 1,
                "stopped_after_call": walk.stopped_after,
            }
            if walk.rapid_longest
            else None
        ),
        comparison=_compare(
            recording, events, dict(walk.counted), thresholds, summary_tokens=None if walk.follow else summary_tokens
        ),
    )


def follows_by_default(strategy: Strategy, info: SessionInfo | None) -> bool:
    """Whether a replay follows the real compactions when not told: the session's own agent with the parameters it
    would use for the session. Values are compared, so a parameter set to its default value keeps it on."""
    from compaction.strategies.registry import default_parameters, editable_parameters

    if info is None or info.format != strategy.name:
        return False
    return editable_parameters(strategy) == default_parameters(strategy.name, info=info)


def _model_limit(
    messages: Sequence[Message], *, strategy: Strategy, info: SessionInfo | None
) -> tuple[int, str] | None:
    """The real limit of the session's model when the strategy is another agent's: the window the session's own
    agent gives that model (None: the strategy is the session's own, or the session names no agent)."""
    from compaction.strategies.registry import STRATEGY_NAMES, build_strategy

    if info is None or info.format == strategy.name or info.format not in STRATEGY_NAMES:
        return None
    own = build_strategy(info.format, info=info, overrides={})
    window = own.session_thresholds(messages, info=info).window
    model = session_model(messages) or info.model or "its model"
    return window, f"{model}, as {own.short_label} gives it"


def _session_summary_tokens(recording: _Recording) -> int | None:
    """The mean size of the session's own real summaries by the strategy's estimate (None: it has none)."""
    sizes = [e.summary_tokens for e in recording.real_events if e.kind == "compaction" and e.summary_tokens]
    return round(sum(sizes) / len(sizes)) if sizes else None


def _prepare(
    own: list[Message],
    *,
    strategy: Strategy,
    info: SessionInfo | None,
    session_info: SessionInfo | None,
    summary_tokens: int | None,
) -> tuple[Thresholds, ReplayRules, _Recording, int]:
    """The replay's rules and its measure of the session, and the simulated summary's size: what the replay and a
    modelled compaction at one point (``modelled_context_after``) share, so they model a compaction alike."""
    thresholds = strategy.session_thresholds(own, info=info)
    typical = int(getattr(strategy, "typical_summary_tokens", strategy.max_summary_tokens))
    summary = typical if summary_tokens is None else max(0, summary_tokens)
    version = session_version(own) or (info.agent_version if info else None)
    if session_info is not None and session_info.format != strategy.name:
        version = None
    rules = strategy.replay_rules(thresholds=thresholds, summary_tokens=summary, version=version)
    recording = _measure(own, rules)
    if rules.reattaches:
        rules.measured_reattached = recording.measured_reattached
        rules.notes.append(rules.reattached_note())
    if summary_tokens is None:
        real_size = _session_summary_tokens(recording)
        summary = real_size if real_size is not None else typical
        rules.summary_tokens = summary
    return thresholds, rules, recording, summary


def modelled_context_after(
    messages: Sequence[Message],
    *,
    strategy: Strategy,
    info: SessionInfo | None,
    end: int,
    cut: Cut,
    decision: Decision | None = None,
) -> int | None:
    """The context after compacting ``cut`` (list positions of ``messages``) at list position ``end``, as the replay
    models a compaction it makes (``_compact``): the baseline, what the strategy keeps and re-attaches, its summary
    (the session's own real summaries' size, else the agent's typical one), a kept tail at the session's recorded
    weight; ``decision``'s prune first. The context at the point is the one the session really had there: the
    records since the agent's last real compaction before it, as a replay following what really happened holds
    them, with its real prunes applied.

    The preview asks this, so its context after is the number a replay compacting at the same point gives. None: the
    cut holds none of the context at the point."""
    agent = main_agent(messages)
    # The replay reads the main chain alone; positions of ``messages`` map onto it.
    positions = [p for p, m in enumerate(messages) if m.agent == agent]
    own = [messages[p] for p in positions]
    end = bisect.bisect_left(positions, end)
    cut = dataclasses.replace(
        cut, start=bisect.bisect_left(positions, cut.start), end=bisect.bisect_left(positions, cut.end)
    )
    session_info = info
    if info is not None and info.format != strategy.name:
        info = dataclasses.replace(info, agent_version=None)
    _, rules, recording, _ = _prepare(own, strategy=strategy, info=info, session_info=session_info, summary_tokens=None)
    walk = _Walk()
    last = max(
        (e for e in recording.real_events if e.kind == "compaction" and e.position < end),
        key=lambda e: e.position,
        default=None,
    )
    prunes = [e for e in recording.real_events if e.kind == "prune" and e.position < end]
    if last is not None:
        _admit_records(walk, recording, rules, positions=rules.kept_by_real(recording.messages, last.position))
        walk.cursor = last.position
        prunes = [e for e in prunes if e.position > last.position]
    _admit_records(walk, recording, rules, positions=range(walk.cursor, end))
    walk.cursor = end
    for real in prunes:
        rules.apply_recorded_prune(walk.view, list(real.tool_ids))
        walk.adopt_appended()
    if decision is not None and decision.prune:
        rules.apply_prune(walk.view, list(decision.prune), decision)  # the prune comes first, as in ``_act_at_line``
        walk.adopt_appended()
    inside = [i for i, o in enumerate(walk.origin) if o is not None and cut.start <= o < cut.end]
    if not inside:
        return None
    view_cut = dataclasses.replace(cut, start=inside[0], end=inside[-1] + 1)
    walk.view, walk.origin = rules.after_compaction(
        walk.view, walk.origin, view_cut, rules.summary_message(walk.view, view_cut)
    )
    return recording.baseline + rules.view_tokens(walk.view) + _kept_in_real_tokens(walk, recording, rules)


def replay(
    messages: Sequence[Message],
    *,
    strategy: Strategy,
    summary_tokens: int | None = None,
    info: SessionInfo | None = None,
    follow_reality: bool | None = None,
) -> ReplayResult:
    """Walk the session call by call and record where ``strategy`` would prune, compact or overflow.

    ``follow_reality``: take up each real compaction where it happened (its summary, the recorded context after
    it); None: ``follows_by_default``. ``summary_tokens``: the simulated summary's size; None: the mean of the
    session's own real summaries, else the strategy's typical summary (both estimates, said in the notes).
    """
    agent = main_agent(messages)
    own = [m for m in messages if m.agent == agent]
    session_info = info
    if info is not None and info.format != strategy.name:
        # Another agent's version means nothing to this strategy's version rules: they take their defaults.
        info = dataclasses.replace(info, agent_version=None)
    thresholds, rules, recording, summary = _prepare(
        own, strategy=strategy, info=info, session_info=session_info, summary_tokens=summary_tokens
    )
    if summary_tokens is None:
        real_size = _session_summary_tokens(recording)
        rules.notes.append(
            f"Simulated summaries take ~{summary:,} tokens (estimated): "
            + (
                "the mean of this session's own real summaries."
                if real_size is not None
                else (
                    f"{getattr(strategy, 'summary_size_note', '')}."
                    if getattr(strategy, "summary_size_note", None)
                    else f"{strategy.short_label}'s summary budget, an upper bound (its sources give no typical size; "
                    "the session has no real summary to measure)."
                )
            )
        )
    cap = _model_limit(own, strategy=strategy, info=session_info)
    window = thresholds.window
    window_cap = None
    if cap is not None and cap[0] < window:
        limit, why = cap
        rules.notes.append(
            f"{strategy.short_label}'s own window for this session would be {window:,} tokens, but the session's "
            f"model accepts at most {limit:,} ({why}): a request above {limit:,} overflows."
        )
        window = window_cap = limit
        thresholds = dataclasses.replace(thresholds, window=limit)
    walk = _Walk(
        follow=follows_by_default(strategy, info) if follow_reality is None else follow_reality,
        window_cap=window_cap,
        real_prunes=any(e.kind == "prune" for e in recording.real_events),
    )
    for number in range(len(recording.steps)):
        _step(walk, recording, rules, number=number, window=window)
    pending = _pending_call(recording, follow=walk.follow)
    if pending is not None:
        recording.steps.append(pending)
        _step(walk, recording, rules, number=len(recording.steps) - 1, window=window, pending=True)
    return _result(walk, recording, rules, strategy=strategy, thresholds=thresholds, summary_tokens=summary)
