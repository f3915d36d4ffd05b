"""What a strategy would do at one point of a session: the one preview every interface asks.

The web page, its JSON twin, ``manage.py preview``, ``manage.py compact``, the worker that runs a compaction
and the export all call ``plan_preview``; nothing else decides a cut, a summarizer request or a token count
for a preview, so they cannot disagree.

A point is always a main-chain API call: "after call N" is the call, its response and the tool results and
prompts that followed it, up to the next call's request (``compaction.replay.position_after_call``). A cut
placed by hand is two such points: it summarises what came after call ``cut_start`` up to after call
``cut_end``; either may be left out to keep the strategy's own edge. List positions appear only as details.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.formats.context_records import PRUNE_RECORD_TYPES, is_compaction_record, is_context_record
from compaction.replay import AfterCall, after_calls, api_steps, modelled_context_after
from compaction.strategies.base import (
    Cut,
    CutRefused,
    Decision,
    ReplayRules,
    Strategy,
    SummarizerPlan,
    context_estimates,
    recorded_thresholds,
)
from compaction.transcript import Message, SessionInfo


class PreviewError(ValueError):
    """The point or the cut names no call of the session; the message says why."""


def _position_of(points: Sequence[AfterCall], call: int, *, name: str) -> int:
    for point in points:
        if point.call == call:
            return point.position
    span = f"calls {points[0].call} to {points[-1].call}" if points else "no API calls"
    raise PreviewError(f"{name} {call} does not exist: the main chain has {span}.")


def call_before(points: Sequence[AfterCall], position: int) -> int | None:
    """The last call the session had answered at ``position`` (None: before the first call)."""
    found = None
    for point in points:
        if point.position > position:
            break
        found = point.call
    return found


@dataclass(frozen=True, slots=True)
class RealCompaction:
    """What the agent really did at a point where it compacted, as its records say (estimates are labelled)."""

    trigger: str  # the agent's own word: auto, manual, threshold, overflow, remote, ...
    tokens_before: int | None  # the agent's own count when it compacted (a record's preTokens), None: not recorded
    context_before: int | None  # the recorded context of the call before it
    context_after: int | None  # the recorded context of the first call after it (None: no usage recorded)
    context_after_call: int | None  # that call
    summary_tokens: int | None  # the summary's size by the agent's own estimate
    cut_from: int | None  # list positions of what it summarised (None: nothing before the point was summarised)
    cut_to: int | None
    cut_messages: int  # records summarised
    cut_tokens: int  # their estimate as they stood in the context


@dataclass(frozen=True, slots=True)
class RealPrune:
    """The tool results the agent really cleared at a point (a microcompact, KHAELOR's ``context.pruned``)."""

    trigger: str
    tool_ids: tuple[str, ...]
    tokens_saved: int | None  # by the agent's own estimate, as its record says (None: not recorded)


def _own_rules(messages: Sequence[Message], *, end: int, strategy: Strategy, info: SessionInfo | None) -> ReplayRules:
    """The replay rules of the session's own agent (how it writes its records), whatever strategy is previewed."""
    from compaction.strategies.registry import build_strategy, strategy_for_format

    own = build_strategy(strategy_for_format(info.format), info=info, overrides={}) if info is not None else strategy
    return own.replay_rules(
        thresholds=recorded_thresholds(own, messages[:end], info=info), summary_tokens=0, version=None
    )


def _real_prune(
    messages: Sequence[Message], *, end: int, strategy: Strategy, info: SessionInfo | None
) -> RealPrune | None:
    """The real prune recorded at list position ``end`` (before any compaction record there), or None."""
    position = end
    records = []
    while position < len(messages) and is_context_record(messages[position]):
        if is_compaction_record(messages[position]):
            break
        if messages[position].raw_type in PRUNE_RECORD_TYPES:
            records.append(messages[position])
        position += 1
    if not records:
        return None
    rules = _own_rules(messages, end=end, strategy=strategy, info=info)
    ids: list[str] = []
    saved: int | None = None
    for record in records:
        ids.extend(i for i in rules.real_prune_ids(record) if i not in ids)
        count = rules.real_prune_saving(record)
        if count is not None:
            saved = (saved or 0) + count
    return RealPrune(trigger=str(records[0].data.get("trigger") or ""), tool_ids=tuple(ids), tokens_saved=saved)


def _real_compaction(
    messages: Sequence[Message], *, end: int, strategy: Strategy, info: SessionInfo | None
) -> RealCompaction | None:
    """The real compaction recorded at list position ``end`` (a point stops at the first of the agent's own
    records, a prune may come first), or None."""
    first = end
    while first < len(messages) and is_context_record(messages[first]) and not is_compaction_record(messages[first]):
        first += 1
    if first >= len(messages) or not is_compaction_record(messages[first]):
        return None
    records = [first]
    while records[-1] + 1 < len(messages) and is_compaction_record(messages[records[-1] + 1]):
        records.append(records[-1] + 1)
    # What the agent kept and how it writes its record are its own rules: the session's agent, not the previewed
    # strategy.
    rules = _own_rules(messages, end=end, strategy=strategy, info=info)
    trigger, pre_tokens = "", None
    for position in records:
        said, count = rules.real_facts(messages[position])
        trigger, pre_tokens = trigger or said, pre_tokens if pre_tokens is not None else count
    summary = next((messages[p] for p in records if messages[p].kind == "compact_summary"), None)
    kept = set(rules.kept_by_real(messages, records[-1]))
    start = max((p + 1 for p in range(end) if is_compaction_record(messages[p]) and p not in kept), default=0)
    summarised = [p for p in range(start, end) if p not in kept and not is_context_record(messages[p])]
    estimates = context_estimates(strategy, messages[:end])
    steps = api_steps(messages)
    before = next((s for s in reversed(steps) if s.first < end), None)
    after = next((s for s in steps if s.first > first), None)
    return RealCompaction(
        trigger=trigger,
        tokens_before=pre_tokens,
        context_before=(before.context or None) if before is not None else None,
        context_after=(after.context or None) if after is not None else None,
        context_after_call=after.number if after is not None and after.context else None,
        summary_tokens=rules.summary_size(summary) if summary is not None else None,
        cut_from=summarised[0] if summarised else None,
        cut_to=summarised[-1] + 1 if summarised else None,
        cut_messages=len(summarised),
        cut_tokens=sum(estimates[p] for p in summarised),
    )


@dataclass(slots=True)
class PreviewPlan:
    """Everything a strategy decides at one point, and the numbers that follow from the cut actually used."""

    strategy: Strategy
    messages: list[Message]  # the conversation view up to the point
    total: int  # messages in the whole conversation view
    at: int  # the point as a list position (a detail)
    after_call: int | None  # the point as a call; None when the session has no call at all
    decision: Decision
    auto_cut: Cut | None  # where the strategy itself would cut (shown even when it would not compact yet)
    cut: Cut | None  # the cut asked for: the strategy's own, or the hand cut
    by_hand: bool
    refused: str  # why the hand cut is refused; a refused cut is never applied
    summarizer: SummarizerPlan
    tokens_before: int
    # After the prune and the cut actually used, with what the agent puts back of the summarised range; the
    # summary itself comes on top.
    tokens_after_estimate: int
    estimates: list[int]  # the strategy's estimate of every message in ``messages`` as it stands in the context
    # The context the next call would send after the applied cut is compacted, as the what-if replay models a
    # compaction (baseline, what the agent keeps and re-attaches, the summary): the number a replay compacting here
    # gives (``compaction.replay.modelled_context_after``). None: no cut applied.
    context_after_estimate: int | None
    points: Sequence[AfterCall] = field(default_factory=list)
    following_line: int | None = None  # source line of the first record after the point
    real: RealCompaction | None = None  # what the agent really did at the point, when it compacted there
    real_prune: RealPrune | None = None  # the tool results it really cleared at the point
    rule_should_compact: bool = False  # the strategy's own rule at the point, whatever really happened

    @property
    def applied_cut(self) -> Cut | None:
        return None if self.refused else self.cut

    @property
    def runnable(self) -> bool:
        return self.applied_cut is not None and bool(self.summarizer.requests)

    @property
    def transcript(self) -> str:
        """Every user message the summarizer would receive, in order (one per request)."""
        requests = self.summarizer.requests
        if len(requests) == 1:
            return requests[0].user_content
        return "\n\n".join(f"===== request {i + 1}: {r.kind} =====\n{r.user_content}" for i, r in enumerate(requests))

    def final_summary(self, replies: Mapping[str, str]) -> str:
        return self.strategy.final_summary(replies, plan=self.summarizer, messages=self.messages)

    def cut_json(self, cut: Cut | None, *, by_hand: bool, refused: str) -> dict[str, Any] | None:
        if cut is None:
            return None
        return {
            "first_kept": cut.first_kept,
            "from": cut.start,
            "to": cut.end,
            "from_after_call": call_before(self.points, cut.start),
            "to_after_call": call_before(self.points, cut.end),
            "by_hand": by_hand,
            "refused": refused or None,
            "reason": cut.reason,
            # What the cut holds that is still in the context at the point (what compacting it takes out).
            "tokens_in_context": sum(self.estimates[cut.start : cut.end]),
        }

    def as_json(self) -> dict[str, Any]:
        """The preview's answer, identical for the web JSON twin and ``manage.py preview --json``."""
        requests = self.summarizer.requests
        return {
            "strategy": self.strategy.name,
            "after_call": self.after_call,
            "at": self.at,
            "messages": self.total,
            "should_compact": self.decision.should_compact,
            "reason": self.decision.reason,
            "cut": self.cut_json(self.cut, by_hand=self.by_hand, refused=self.refused),
            "auto_cut": self.cut_json(self.auto_cut, by_hand=False, refused=""),
            "prune": list(self.decision.prune),
            "tokens_before": self.tokens_before,
            "tokens_after_estimate": self.tokens_after_estimate,
            "context_after_estimate": self.context_after_estimate,
            "requests": [
                {
                    "kind": r.kind,
                    "system": r.system,
                    # The system prompt as the agent's client sends it, block by block (klaude-code puts an
                    # identity block first); None: the one string above.
                    "system_blocks": None if r.system_blocks is None else [b["text"] for b in r.system_blocks],
                    "user_blocks": None if r.user_blocks is None else len(r.user_blocks),
                    "user_chars": len(r.user_content),
                    "sha256": SummarizerPlan(requests=[r]).sha256,
                    "max_tokens": r.max_tokens,
                    "rounds": len(r.rounds) if r.rounds else 1,
                    # How the conversation travels: as the agent's own turns (Claude Code) or one text message.
                    "sent_as": "messages" if r.round_messages is not None else "text",
                    "api_messages": len(r.api_messages),
                }
                for r in requests
            ],
            "transcript_sha256": self.summarizer.sha256 if requests else None,
            "runnable": self.runnable,
            "rule_should_compact": self.rule_should_compact,
            "real": self.real_json(),
            "real_prune": (
                None
                if self.real_prune is None
                else {
                    "trigger": self.real_prune.trigger or None,
                    "tool_ids": list(self.real_prune.tool_ids),
                    "tokens_saved": self.real_prune.tokens_saved,
                }
            ),
        }

    def real_json(self) -> dict[str, Any] | None:
        """What really happened at the point (None: the agent did not compact there)."""
        real = self.real
        if real is None:
            return None
        return {
            "trigger": real.trigger or None,
            "tokens_before": real.tokens_before,
            "context_before": real.context_before,
            "cut": {
                "from": real.cut_from,
                "to": real.cut_to,
                "from_after_call": call_before(self.points, real.cut_from) if real.cut_from is not None else None,
                "to_after_call": call_before(self.points, real.cut_to) if real.cut_to is not None else None,
                "messages": real.cut_messages,
                "tokens_in_context": real.cut_tokens,
            },
            # The agent's own estimate of the real summary (labelled: the agent records no size).
            "summary_tokens": real.summary_tokens,
            "summary_tokens_estimated": True,
            "context_after": real.context_after,
            "context_after_call": real.context_after_call,
        }


def _pruned_tokens(strategy: Strategy, messages: Sequence[Message], tool_ids: Sequence[str], skip: range) -> int:
    """The strategy's estimate of the tool results a prune clears, outside the summarised range ``skip``."""
    wanted = set(tool_ids)
    if not wanted:
        return 0
    total = 0
    for position, message in enumerate(messages):
        if position in skip:
            continue
        blocks = [b for b in message.blocks if b.kind == "tool_result" and b.tool_id in wanted]
        if blocks:
            total += strategy.estimate(dataclasses.replace(message, blocks=blocks))
    return total


def plan_preview(
    messages: Sequence[Message],
    *,
    strategy: Strategy,
    after_call: int | None = None,
    cut_start: int | None = None,
    cut_end: int | None = None,
    points: Sequence[AfterCall] | None = None,
    info: SessionInfo | None = None,
) -> PreviewPlan:
    """What ``strategy`` would do after main-chain call ``after_call`` (None: the end of the session).

    ``cut_start`` / ``cut_end`` (calls) move the cut by hand. A hand cut the strategy refuses, or one that
    does not start before it ends, is reported in ``refused`` and never applied. Raises ``PreviewError``
    for a call the session does not have. ``points`` is ``after_calls(messages)`` when the caller has it already.

    Where the agent really compacted at the point, ``real`` says what it did; for the session's own agent
    (``info.format``) the decision is then to compact, as the replay that follows what really happened does, and
    ``rule_should_compact`` keeps what the rule alone said.
    """
    if points is None:
        points = after_calls(messages)
    end = len(messages) if after_call is None else _position_of(points, after_call, name="call")
    shown_call = after_call if after_call is not None else (points[-1].call if points else None)
    view = list(messages[:end])
    # Each message as it stands in the context at the point: one an earlier compaction replaced counts 0, so a
    # cut over it reclaims nothing (KHAELOR's log keeps replaced events; base.context_estimates).
    estimates = context_estimates(strategy, view)
    decision = strategy.decide(view)
    rule_should_compact = decision.should_compact
    real = _real_compaction(messages, end=end, strategy=strategy, info=info) if after_call is not None else None
    real_prune = _real_prune(messages, end=end, strategy=strategy, info=info) if after_call is not None else None
    cleared = real_prune.tool_ids if real_prune is not None else ()
    missing = [i for i in cleared if i not in decision.prune]
    if missing and info is not None and info.format == strategy.name:
        # The agent's own strategy clears what the agent really cleared there, as the replay applies a real prune.
        decision = dataclasses.replace(
            decision,
            prune=[*decision.prune, *missing],
            reason=f"{decision.reason}; {strategy.short_label} really cleared {len(cleared):,} tool result(s) here",
        )
    if real is not None and info is not None and info.format == strategy.name and not decision.should_compact:
        count = f" at its count {real.tokens_before:,}" if real.tokens_before is not None else ""
        cut = decision.cut or strategy.select_cut(view)
        decision = dataclasses.replace(
            decision,
            should_compact=cut is not None,
            cut=cut,
            reason=f"{strategy.short_label} really compacted here ({real.trigger or 'recorded'}{count}); "
            f"the rule alone: {decision.reason}",
        )
    auto = decision.cut or strategy.select_cut(view)

    cut, by_hand, refused = auto, False, ""
    if cut_start is not None or cut_end is not None:
        start = auto.start if auto else 0
        stop = auto.end if auto else len(view)
        if cut_start is not None:
            start = _position_of(points, cut_start, name="cut_start: call")
        if cut_end is not None:
            stop = _position_of(points, cut_end, name="cut_end: call")
        hand = Cut(start=start, end=stop, first_kept=strategy.first_kept_id(view, stop), reason="placed by hand")
        by_hand = auto is None or (hand.start, hand.end) != (auto.start, auto.end)
        if by_hand:
            cut = hand
            if stop > len(view):
                refused = f"the cut ends after call {cut_end}, past the point (after call {shown_call})"
            elif start >= stop:
                refused = (
                    f"the cut must start before it ends: it starts at message {start} and ends at message {stop}"
                    + (
                        f" (cut_start {cut_start} is not before cut_end {cut_end})"
                        if cut_start is not None and cut_end is not None
                        else ""
                    )
                )
            else:
                try:
                    strategy.check_cut(view, hand)
                except CutRefused as exc:
                    refused = str(exc)

    applied = None if refused else cut
    summarised = range(applied.start, applied.end) if applied is not None else range(0)
    tokens_before = decision.tokens_before
    tokens_after = max(
        0,
        tokens_before
        - sum(estimates[summarised.start : summarised.stop])
        - _pruned_tokens(strategy, view, decision.prune, summarised)
        + (strategy.carried_over(view, applied) if applied is not None else 0),
    )
    context_after = (
        modelled_context_after(messages, strategy=strategy, info=info, end=end, cut=applied, decision=decision)
        if applied is not None
        else None
    )
    summarizer = (
        strategy.summarizer_plan(view, applied, prune=decision.prune, by_hand=by_hand)
        if applied is not None
        else SummarizerPlan()
    )
    return PreviewPlan(
        strategy=strategy,
        messages=view,
        total=len(messages),
        at=end,
        after_call=shown_call,
        decision=decision,
        auto_cut=auto,
        cut=cut,
        by_hand=by_hand,
        refused=refused,
        summarizer=summarizer,
        tokens_before=tokens_before,
        tokens_after_estimate=tokens_after,
        estimates=estimates,
        context_after_estimate=context_after,
        points=points,
        following_line=messages[end].line if end < len(messages) else None,
        real=real,
        real_prune=real_prune,
        rule_should_compact=rule_should_compact,
    )
