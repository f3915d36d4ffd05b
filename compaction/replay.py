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
from compaction.formats.khaelor import (
    CONTEXT_COMPACTED,
    CONTEXT_PRUNED,
    MODEL_TEXT_BLOCK,
    MODEL_THINKING_BLOCK,
    STEERING_INJECTED,
    TOOL_COMPLETED,
    TOOL_FAILED,
    TOOL_REQUESTED,
    USER_MESSAGE,
)
from compaction.strategies.base import Cut, CutRefused, Decision, Strategy
from compaction.strategies.claude_code import (
    LEGACY_MC_BEFORE,
    SYNTHETIC_MODEL,
    ClaudeCodeStrategy,
    apply_microcompact,
    estimate_message,
)
from compaction.strategies.khaelor import CONVERSATION_EVENT_TYPES as KHAELOR_CONVERSATION_TYPES
from compaction.strategies.khaelor import PRUNE_PLACEHOLDER, KhaelorStrategy
from compaction.strategies.klaude_code import COMPACTION as KLAUDE_COMPACTION
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from compaction.thresholds import Thresholds
from compaction.transcript import MAIN, Block, Message, SessionInfo, parse_timestamp
from compaction.windows import parse_version

ReplayKind = Literal["prune", "compaction", "overflow"]

# Records that say the *real* agent changed its history. The simulation makes its own decisions, so
# none of them enters the simulated view. Sources: Claude Code format doc §8-9, klaude-code format doc
# §1.2 (CompactionEntry), KHAELOR format doc (context.*).
# A real compaction replaces the history: from there on the recorded numbers describe a history the
# simulation does not have, so the simulation diverges.
COMPACTION_RECORD_TYPES = frozenset({"system/compact_boundary", KLAUDE_COMPACTION, CONTEXT_COMPACTED})
# A real prune is taken as given: its drop is in the recorded numbers, and what it cleared may not even be
# in the file (Entire checkpoint slices start mid-session: entirecli_7662d755ef9f-2's microcompact clears 42
# results from before its first line).
PRUNE_RECORD_TYPES = frozenset({"system/microcompact_boundary", CONTEXT_PRUNED})
CONTEXT_RECORD_TYPES = COMPACTION_RECORD_TYPES | PRUNE_RECORD_TYPES
# Records already in KHAELOR's shape (its parser keeps the event type as raw_type).
KHAELOR_EVENT_TYPES = KHAELOR_CONVERSATION_TYPES | {
    CONTEXT_PRUNED,
    "user.steering-queued",
    "process.started",
    "process.exited",
    "session.started",
    "model.usage",
}
# A decide() that changed nothing is retried at the same line once the view grew by this share.
RETRY_GROWTH_DIVISOR = 8


def is_context_record(message: Message) -> bool:
    """A record of the real agent's own compaction or prune (never part of the simulated view)."""
    return message.kind == "compact_summary" or message.raw_type in CONTEXT_RECORD_TYPES


def is_compaction_record(message: Message) -> bool:
    return message.kind == "compact_summary" or message.raw_type in COMPACTION_RECORD_TYPES


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
    A log without any usage gets one step per assistant record.
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
        if message.agent == agent and message.kind == "assistant" and message.model != SYNTHETIC_MODEL:
            steps.append(Step(call=ordinal, first=position, end=position + 1, recorded=None, timestamp=None))
            ordinal += 1
    return steps


def position_after_call(messages: Sequence[Message], call: int) -> int:
    """The list position where the session stood after main-chain call ``call`` (for ``decide(at=...)``).

    That is past the call's last record and the tool results / prompts that followed it, up to the next
    call's first record or the next compaction record: what the next request would be built from.
    """
    steps = api_steps(messages)
    for number, step in enumerate(steps):
        if step.call == call:
            stop = steps[number + 1].first if number + 1 < len(steps) else len(messages)
            position = step.end
            while position < stop and not is_context_record(messages[position]):
                position += 1
            return position
    last = steps[-1].call if steps else None
    raise ValueError(
        f"call {call} does not exist: the session has "
        + (f"calls 0 to {last}" if last is not None else "no API calls")
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


# ----------------------------------------------------------------------------- per-strategy adapters


class _Adapter:
    """How one strategy counts, which lines make it act, and how its compactions reshape the view."""

    # "pending": the agent counts last usage + an estimate of what arrived since (Claude Code
    # tokenCountWithEstimation, compaction doc §4.1); "last_usage": only the last recorded usage (klaude
    # _get_last_context_tokens, klaude-code doc §3.3); "actual": the whole prompt (KHAELOR estimate).
    counts: Literal["pending", "last_usage", "actual"] = "actual"
    strict = False  # True: act when tokens > line (klaude, KHAELOR); False: tokens >= line (Claude Code)
    reactive = True  # compacts after a prompt-too-long error

    def __init__(self, strategy: Strategy, *, thresholds: Thresholds, summary_tokens: int) -> None:
        self.strategy = strategy
        self.thresholds = thresholds
        self.summary_tokens = summary_tokens
        self.reactive = thresholds.autocompact is not None

    def estimate(self, message: Message) -> int:
        return self.strategy.estimate(message)

    def admit(self, message: Message) -> list[Message]:
        """The record(s) the strategy sees for one recorded message."""
        return [message]

    def compacts(self, decision: Decision) -> bool:
        """Whether a decide() taken at the compaction line compacts."""
        return decision.should_compact and decision.cut is not None

    def _over(self, tokens: int, line: int | None) -> bool:
        if line is None:
            return False
        return tokens > line if self.strict else tokens >= line

    def level(self, counted: int, *, idle_minutes: float | None) -> int:
        """0 = nothing to do, 1 = a prune may be due, 2 = a compaction is due."""
        return 2 if self._over(counted, self.thresholds.autocompact) else 0

    def decide(self, view: list[Message], counted: int) -> Decision:
        return self.strategy.decide(view, context_tokens=counted)

    def reactive_cut(self, view: list[Message]) -> Cut | None:
        return self.strategy.select_cut(view)

    def is_synthetic(self, message: Message) -> bool:
        return bool(message.data.get("replay_synthetic"))

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            blocks=[Block("text", "x" * (4 * self.summary_tokens))],
            raw_type="replay/summary",
            data={"replay_synthetic": True},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        """The view once ``cut`` is replaced by ``summary``: the (real) head, the summary, the kept tail."""
        head = [i for i in range(cut.start) if not self.is_synthetic(view[i])]
        return (
            [view[i] for i in head] + [summary] + view[cut.end :],
            [origin[i] for i in head] + [None] + origin[cut.end :],
        )

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        """Make the pruned results count as what the agent replaces them with."""

    def view_tokens(self, view: list[Message]) -> int:
        return sum(self.estimate(m) for m in view)


class _ClaudeCodeAdapter(_Adapter):
    counts = "pending"
    strict = False

    def __init__(self, strategy: Strategy, *, thresholds: Thresholds, summary_tokens: int, version: str | None):
        super().__init__(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
        assert isinstance(strategy, ClaudeCodeStrategy)
        self.cc = strategy
        parsed = parse_version(version)
        # Legacy microcompact runs above the warning line before 2.1.88 (claude_code.LEGACY_MC_BEFORE, §2.4d).
        self.legacy_prune = parsed is not None and parsed < LEGACY_MC_BEFORE

    def estimate(self, message: Message) -> int:
        return estimate_message(message)

    def level(self, counted: int, *, idle_minutes: float | None) -> int:
        if self._over(counted, self.thresholds.autocompact):
            return 2
        if self.legacy_prune and self._over(counted, self.thresholds.warning):
            return 1
        params = self.cc.params
        if params.time_based_mc_enabled and idle_minutes is not None and idle_minutes >= params.gap_threshold_minutes:
            return 1
        return 0

    def reactive_cut(self, view: list[Message]) -> Cut | None:
        return self.cc.select_cut(view)

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        cleared = set(tool_ids)
        for index, message in enumerate(view):
            if any(b.tool_id in cleared for b in message.blocks if b.kind in ("tool_result", "image")):
                view[index] = apply_microcompact([message], tool_ids)[0]


class _KlaudeAdapter(_Adapter):
    counts = "last_usage"
    strict = True

    def admit(self, message: Message) -> list[Message]:
        # The view drops records (real CompactionEntries, summarised items), so list positions are no longer
        # klaude indices; clearing the recorded index tells the strategy not to insist on them.
        if message.data.get("index") is None:
            return [message]
        return [dataclasses.replace(message, data={**message.data, "index": None})]

    def compacts(self, decision: Decision) -> bool:
        # Without a configured context_limit klaude's decide() finds no limit in a foreign log (it reads
        # usage.context_limit, §3.3) while thresholds() resolves the model's builtin limit (§2); the replay
        # already checked that line, so the plan's cut is what klaude would compact.
        return decision.cut is not None

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        # A CompactionEntry whose first kept item is the next one in the new view.
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            raw_type=KLAUDE_COMPACTION,
            data={"replay_synthetic": True, "item": {"first_kept_index": 1, "summary": ""}},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        # klaude's summary replaces everything before first_kept (the previous summary is folded into it).
        return [summary] + view[cut.end :], [None] + origin[cut.end :]

    def view_tokens(self, view: list[Message]) -> int:
        synthetic = self.summary_tokens if any(self.is_synthetic(m) for m in view[:1]) else 0
        return sum(self.estimate(m) for m in view) + synthetic


class _KhaelorAdapter(_Adapter):
    counts = "actual"
    strict = True

    def __init__(self, strategy: Strategy, *, thresholds: Thresholds, summary_tokens: int) -> None:
        super().__init__(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
        assert isinstance(strategy, KhaelorStrategy)
        self.kh = strategy
        self.seq = 0  # seqs given to converted records of other agents

    def admit(self, message: Message) -> list[Message]:
        """KHAELOR events as they are; another agent's records as one KHAELOR-shaped event per block."""
        if message.raw_type in KHAELOR_EVENT_TYPES:
            return [message]
        converted: list[Message] = []
        for block in message.blocks:
            event_type = _khaelor_type(message, block)
            if event_type is None:
                continue
            self.seq += 1
            converted.append(
                dataclasses.replace(
                    message,
                    blocks=[block],
                    raw_type=event_type,
                    data={"seq": self.seq, "payload": {"toolUseId": block.tool_id} if block.tool_id else {}},
                )
            )
        return converted

    def _seq_of(self, view: list[Message], index: int) -> int:
        message = view[max(0, min(index, len(view) - 1))] if view else None
        seq = message.data.get("seq") if message is not None else None
        return seq if isinstance(seq, int) else (message.line if message is not None else 0)

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        filler = "x" * (4 * self.summary_tokens)
        # An empty cut range (no recorded seq is -1): the summarised events are already out of the view.
        payload = {"checkpointYaml": filler, "cut": {"fromSeq": -1, "toSeq": -1}, "trigger": "replay"}
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            raw_type=CONTEXT_COMPACTED,
            blocks=[Block("text", filler)],
            data={"replay_synthetic": True, "seq": self._seq_of(view, cut.end - 1), "payload": payload},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        # Prune records stay wherever they were: they keep the kept results' placeholders in force.
        prunes = [i for i in range(cut.start, cut.end) if view[i].raw_type == CONTEXT_PRUNED]
        return (
            view[: cut.start] + [view[i] for i in prunes] + [summary] + view[cut.end :],
            origin[: cut.start] + [origin[i] for i in prunes] + [None] + origin[cut.end :],
        )

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        payload = {"toolUseIds": list(tool_ids), "placeholder": PRUNE_PLACEHOLDER, "tokensReclaimedEstimate": 0}
        view.append(
            Message(
                line=0,
                role="system",
                kind="system",
                raw_type=CONTEXT_PRUNED,
                data={"replay_synthetic": True, "seq": self._seq_of(view, len(view) - 1), "payload": payload},
            )
        )

    def view_tokens(self, view: list[Message]) -> int:
        return self.kh.context_estimate(view)


def _khaelor_type(message: Message, block: Block) -> str | None:
    """The KHAELOR event type closest to one block of another agent's record (docs/formats/khaelor.md)."""
    if block.kind == "tool_use":
        return TOOL_REQUESTED
    if block.kind == "tool_result":
        return TOOL_FAILED if block.is_error else TOOL_COMPLETED
    if block.kind == "thinking" and message.role == "assistant":
        return MODEL_THINKING_BLOCK
    if block.kind != "text" or message.role == "meta" or message.kind in ("system", "bookkeeping", "unknown"):
        return None
    if message.role == "assistant":
        return MODEL_TEXT_BLOCK
    return USER_MESSAGE if message.kind == "prompt" else STEERING_INJECTED


def _adapter_for(strategy: Strategy, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> _Adapter:
    if isinstance(strategy, ClaudeCodeStrategy):
        return _ClaudeCodeAdapter(strategy, thresholds=thresholds, summary_tokens=summary_tokens, version=version)
    if isinstance(strategy, KlaudeCodeStrategy):
        return _KlaudeAdapter(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
    if isinstance(strategy, KhaelorStrategy):
        return _KhaelorAdapter(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
    return _Adapter(strategy, thresholds=thresholds, summary_tokens=summary_tokens)


# ----------------------------------------------------------------------------- session facts


def _session_model(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        if message.role == "assistant" and message.model and message.model != SYNTHETIC_MODEL:
            return message.model
    return None


def _session_version(messages: Sequence[Message]) -> str | None:
    for message in reversed(messages):
        version = message.data.get("version")
        if isinstance(version, str):
            return version
    return None


def session_thresholds(
    strategy: Strategy, messages: Sequence[Message], *, info: SessionInfo | None = None
) -> Thresholds:
    """The strategy's lines for this session (model, version and observed maximum from the records)."""
    if isinstance(strategy, ClaudeCodeStrategy):
        return strategy.session_thresholds(messages)
    observed = max((m.usage.context for m in messages if m.usage is not None), default=0)
    model = _session_model(messages) or (info.model if info else None)
    version = _session_version(messages) or (info.agent_version if info else None)
    return strategy.thresholds(model=model, version=version, observed_max=observed)


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


def replay(
    messages: Sequence[Message],
    *,
    strategy: Strategy,
    summary_tokens: int | None = None,
    info: SessionInfo | None = None,
) -> ReplayResult:
    """Walk the session call by call and record where ``strategy`` would prune, compact or overflow."""
    agent = main_agent(messages)
    messages = [m for m in messages if m.agent == agent]
    thresholds = session_thresholds(strategy, messages, info=info)
    summary = strategy.max_summary_tokens if summary_tokens is None else max(0, summary_tokens)
    version = _session_version(messages) or (info.agent_version if info else None)
    adapter = _adapter_for(strategy, thresholds=thresholds, summary_tokens=summary, version=version)
    steps = api_steps(messages)

    records = [is_context_record(m) for m in messages]
    compactions_real = [is_compaction_record(m) for m in messages]
    estimates = [0 if records[i] else adapter.estimate(m) for i, m in enumerate(messages)]
    prefix = [0]
    record_prefix = [0]
    for i, value in enumerate(estimates):
        prefix.append(prefix[-1] + value)
        record_prefix.append(record_prefix[-1] + (1 if compactions_real[i] else 0))
    baseline = estimate_baseline(steps, compactions_real, prefix)
    has_usage = any(step.recorded is not None for step in steps)

    view: list[Message] = []
    origin: list[int | None] = []
    cursor = 0
    diverged = False
    sim_prev = 0
    series: list[tuple[int, int]] = []
    recorded: list[tuple[int, int | None]] = []
    events: list[ReplayEvent] = []
    tokens_summarised = 0
    blocked_level = 0
    blocked_until = 0
    window = thresholds.window

    def admit(until: int) -> None:
        nonlocal cursor
        for position in range(cursor, until):
            if not records[position]:
                for admitted in adapter.admit(messages[position]):
                    view.append(admitted)
                    origin.append(position)
        cursor = max(cursor, until)

    def compact(at_call: int, cut: Cut, tokens_before: int, trigger: str, reason: str) -> int:
        nonlocal view, origin, tokens_summarised
        middle_tokens = adapter.view_tokens(view[cut.start : cut.end])
        removed = sum(1 for o in origin[cut.start : cut.end] if o is not None)
        first_kept = next((o for o in origin[cut.end :] if o is not None), None)
        view, origin = adapter.after_compaction(view, origin, cut, adapter.summary_message(view, cut))
        after = baseline + adapter.view_tokens(view)
        tokens_summarised += middle_tokens
        events.append(
            ReplayEvent(
                kind="compaction",
                at_call=at_call,
                tokens_before=tokens_before,
                tokens_after=after,
                removed_messages=removed,
                trigger=trigger,
                first_kept=first_kept,
                reason=reason,
            )
        )
        return after

    for k, step in enumerate(steps):
        admit(step.first)
        prev = steps[k - 1] if k else None
        since = prev.first if prev is not None else 0
        if record_prefix[step.first] - record_prefix[since] > 0:
            diverged = True  # the real agent compacted: recorded numbers no longer describe our history
        growth_estimate = prefix[step.first] - prefix[since]
        if prev is None:
            actual = step.recorded if step.recorded is not None else baseline + prefix[step.first]
        elif not diverged and step.recorded is not None:
            actual = step.recorded
        else:
            clean = record_prefix[step.first] - record_prefix[prev.first] == 0
            if step.recorded is not None and prev.recorded is not None and clean:
                actual = max(0, sim_prev + step.recorded - prev.recorded)
            else:
                actual = sim_prev + growth_estimate

        if prev is None:
            # Nothing recorded yet: klaude falls back to its estimate of the history (§3.3), the others see it all.
            counted = prefix[step.first] if adapter.counts == "last_usage" and has_usage else actual
        elif adapter.counts == "actual":
            counted = actual
        elif adapter.counts == "last_usage":
            counted = sim_prev if has_usage else actual
        else:  # last usage (+ its output) + an estimate of what arrived after the response
            output = prev.output if prev.recorded is not None else prefix[prev.end] - prefix[prev.first]
            counted = sim_prev + output + (prefix[step.first] - prefix[prev.end])

        idle = _idle_minutes(messages[prev.end - 1], messages[step.first - 1]) if prev is not None else None
        level = adapter.level(counted, idle_minutes=idle)
        if level and (level > blocked_level or len(view) >= blocked_until):
            acted = False
            counted_before = counted  # what the agent reports as its compaction's tokens before (preTokens)
            try:
                decision = adapter.decide(view, counted)
            except (CutRefused, ValueError):
                decision = None
            if decision is not None and decision.prune:
                before_tokens = adapter.view_tokens(view)
                adapter.apply_prune(view, decision.prune, decision)
                saved = max(0, before_tokens - adapter.view_tokens(view))
                events.append(
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
                diverged = acted = True
            if decision is not None and level == 2 and decision.cut is not None and adapter.compacts(decision):
                actual = compact(step.call, decision.cut, counted_before, "threshold", decision.reason)
                diverged = acted = True
            if acted:
                blocked_level = 0
            else:
                blocked_level = level
                blocked_until = len(view) + max(1, len(view) // RETRY_GROWTH_DIVISOR)

        if actual > window:
            overflow = ReplayEvent(
                kind="overflow",
                at_call=step.call,
                tokens_before=actual,
                tokens_after=actual,
                trigger="overflow",
                reason=f"the request ({actual:,} tokens) does not fit the {window:,}-token window",
            )
            events.append(overflow)
            if adapter.reactive and len(view) >= blocked_until:
                try:
                    cut = adapter.reactive_cut(view)
                except (CutRefused, ValueError):
                    cut = None
                if cut is not None:
                    actual = compact(step.call, cut, actual, "overflow", "reactive compaction after the overflow")
                    overflow.tokens_after = actual
                    diverged = True
                else:
                    blocked_until = len(view) + max(1, len(view) // RETRY_GROWTH_DIVISOR)

        series.append((step.call, actual))
        recorded.append((step.call, step.recorded))
        sim_prev = actual

    attempts = [(call, value) for call, value in series] + [
        (e.at_call, e.tokens_before) for e in events if e.kind == "overflow"
    ]
    peak_call, peak = max(attempts, key=lambda point: point[1]) if attempts else (None, 0)
    notes: list[str] = []
    if not has_usage:
        notes.append("No usage is recorded: every context value is the strategy's own estimate.")
    if thresholds.assumption:
        notes.append(f"The thresholds are partly assumed: {thresholds.source}")
    return ReplayResult(
        strategy=strategy.name,
        series=series,
        recorded=recorded,
        events=events,
        peak=peak,
        peak_call=peak_call,
        compactions=sum(1 for e in events if e.kind == "compaction"),
        prunes=sum(1 for e in events if e.kind == "prune"),
        overflows=sum(1 for e in events if e.kind == "overflow"),
        tokens_summarised=tokens_summarised,
        window=window,
        thresholds=thresholds,
        summary_tokens=summary,
        baseline=baseline,
        notes=notes,
    )


# ----------------------------------------------------------------------------- preview at one point


@dataclass(slots=True)
class Preview:
    """What a strategy would do with ``messages[:at]``: the cut, the prune, tokens, the summarizer's input."""

    strategy: str
    at: int
    should_compact: bool
    reason: str
    cut: Cut | None
    prune: list[str]
    tokens_before: int
    tokens_after_estimate: int
    transcript: str
    from_seq: int | None = None
    to_seq: int | None = None

    def as_json(self) -> dict[str, Any]:
        cut = None
        if self.cut is not None:
            cut = {
                "first_kept": self.cut.first_kept,
                "from": self.cut.start,
                "to": self.cut.end,
                "from_seq": self.from_seq,
                "to_seq": self.to_seq,
                "reason": self.cut.reason,
            }
        return {
            "strategy": self.strategy,
            "at": self.at,
            "should_compact": self.should_compact,
            "reason": self.reason,
            "cut": cut,
            "prune": self.prune,
            "tokens_before": self.tokens_before,
            "tokens_after_estimate": self.tokens_after_estimate,
            "transcript_chars": len(self.transcript),
        }


def _stored_seq(message: Message) -> int | None:
    seq = message.data.get("row_seq", message.data.get("seq"))
    return seq if isinstance(seq, int) else None


def preview(messages: Sequence[Message], *, strategy: Strategy, at: int | None = None) -> Preview:
    """The strategy's decision at ``at`` (a list position; None = the whole session) and its transcript.

    The cut is shown even when the strategy would not compact yet, so a reviewer sees where it would land.
    """
    end = len(messages) if at is None else max(0, min(at, len(messages)))
    decision = strategy.decide(messages, at=end)
    cut = decision.cut if decision.cut is not None else strategy.select_cut(messages, at=end)
    transcript = ""
    if cut is not None:
        if isinstance(strategy, KhaelorStrategy):
            middle = strategy.extract_middle(messages[:end], cut, also_pruned=decision.prune)
            transcript = strategy.render_transcript(middle)
        elif isinstance(strategy, KlaudeCodeStrategy):
            # klaude sends one or two requests (history, task prefix): their text is the transcript (§3.8).
            plan = strategy.plan(messages, at=end)
            transcript = "\n\n".join(request.text for request in plan.requests)
        else:
            transcript = strategy.render_transcript(messages[cut.start : cut.end])
    from_seq = to_seq = None
    if cut is not None and cut.start < cut.end <= len(messages):
        from_seq, to_seq = _stored_seq(messages[cut.start]), _stored_seq(messages[cut.end - 1])
    return Preview(
        strategy=strategy.name,
        at=end,
        should_compact=decision.should_compact,
        reason=decision.reason,
        cut=cut,
        prune=list(decision.prune),
        tokens_before=decision.tokens_before,
        tokens_after_estimate=decision.tokens_after_estimate,
        transcript=transcript,
        from_seq=from_seq,
        to_seq=to_seq,
    )
