"""What filled the context at one API call: the recorded context split into parts that add up to it.

The logs never show the request itself, so the split is rebuilt from the records:

* **What the model still saw.** The records before the call's first record, minus what the agent had
  already removed: everything a compaction summarised away (Claude Code keeps nothing before its
  summary unless the boundary lists ``preservedMessages``, docs/formats/claude-code.md §8.1, §8.5;
  klaude-code keeps ``history[first_kept_index:]`` without leading tool results, docs/formats/klaude-code.md §3.12;
  KHAELOR replaces the events of ``cut {fromSeq, toSeq}`` by the checkpoint, docs/formats/khaelor.md),
  and the tool results a microcompact cleared (``compactedToolIds``, claude-code.md §9: still verbatim in
  the file, gone from the next request) or a prune replaced by a placeholder (KHAELOR ``toolUseIds``).
* **Inferred rows for what no record shows**: the system prompt and tool schemas, one number for the whole
  session so it does not jump from call to call; and, per stretch between compactions, what that stretch
  carried beside it (history from before a log that starts mid-session, files an agent re-attached after
  compacting). Both come from the recorded context at the first call of each stretch (``infer_unlogged``).
* **Scaling.** The conversation parts are estimates of another tokenizer; they are scaled together to fill
  exactly what the recorded context leaves beside the inferred rows. The total is recorded, the split is
  an estimate, and each part says so. Without recorded usage the context itself is the estimate.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from compaction.transcript import Block, ContextEvent, Message

BASELINE_PART = "system prompt and tools (inferred)"
EARLIER_PART = "not in the log: earlier history (inferred)"
REATTACHED_PART = "not in the log: attached after the compaction (inferred)"
# Records that never reach the model (the same rule as the timeline's estimated series).
_NOT_SENT_KINDS = frozenset({"bookkeeping", "unknown"})
# Blocks that a clearing removes with the result they belong to (Claude Code clears a result's images too).
_CLEARABLE_BLOCKS = frozenset({"tool_result", "image"})


@dataclass(frozen=True, slots=True)
class PlacedEvent:
    """A context event and where it happened: ``before`` records of the list preceded it."""

    before: int
    event: ContextEvent


@dataclass(frozen=True, slots=True)
class Part:
    part: str
    tokens: int
    estimated: bool

    def as_json(self) -> dict[str, Any]:
        return {"part": self.part, "kind": part_kind(self.part), "tokens": self.tokens, "estimated": self.estimated}


@dataclass(slots=True)
class Composition:
    call: int
    context: int  # the recorded context, or the estimate when the call recorded no usage
    estimated: bool  # True when ``context`` itself is an estimate
    parts: list[Part]  # their tokens add up to ``context``
    baseline: int  # the session's inferred system prompt + tools, the same at every call
    unlogged: int  # the segment's context that is in no record (earlier history, re-attached files)
    conversation_estimate: int  # the unscaled estimate of the records the model still saw
    scale: float | None  # conversation share of the recorded context / its estimate; None without usage
    cleared_results: int  # tool results no longer counted: cleared by a microcompact or pruned
    cleared_not_in_log: int  # cleared tool ids that no earlier record of this log holds
    compacted_records: int  # records a compaction had removed from the history
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "context": self.context,
            "estimated": self.estimated,
            "composition": [part.as_json() for part in self.parts],
            "baseline": self.baseline,
            "unlogged": self.unlogged,
            "conversation_estimate": self.conversation_estimate,
            "scale": round(self.scale, 4) if self.scale is not None else None,
            "cleared_results": self.cleared_results,
            "cleared_not_in_log": self.cleared_not_in_log,
            "compacted_records": self.compacted_records,
            "notes": self.notes,
        }


def part_label(message: Message, block: Block) -> str:
    """The row of "What filled the context" a block of a record counts in."""
    if message.kind == "compact_summary":
        return "compaction summary"
    if block.kind == "tool_result":
        return f"tool results: {block.tool_name or 'unknown tool'}"
    if block.kind == "tool_use":
        return "tool calls"
    if block.kind in ("thinking", "redacted_thinking"):
        return "thinking"
    if message.kind == "assistant":
        return "assistant text"
    if message.kind in ("injected", "system"):
        return "injected context"
    if block.kind == "image":
        return "images"
    return "user text"


# The colour family of each part (the palette's ``--part-<kind>``): one mapping for every chart, bar and legend.
PART_KINDS = ("system", "unlogged", "user", "assistant", "thinking", "tool-calls", "tool-results", "summary")


def part_kind(label: str) -> str:
    """The colour family a part of "What filled the context" belongs to (a ``PART_KINDS`` member)."""
    if label in (BASELINE_PART, "injected context"):
        return "system"
    if label in (EARLIER_PART, REATTACHED_PART):
        return "unlogged"
    if label == "compaction summary":
        return "summary"
    if label.startswith("tool results"):
        return "tool-results"
    if label == "tool calls":
        return "tool-calls"
    if label == "thinking":
        return "thinking"
    if label == "assistant text":
        return "assistant"
    return "user"  # user text, images


def is_sent(message: Message) -> bool:
    """Whether a record reaches the model at all."""
    return message.role != "meta" and message.kind not in _NOT_SENT_KINDS


# ----------------------------------------------------------------------------- what the model still saw


def _compaction_keeps(messages: Sequence[Message], placed: PlacedEvent, start: int) -> set[int]:
    """Positions from ``start`` to a compaction that its summary did not replace (see the module docstring)."""
    event = placed.event
    before = range(start, placed.before)
    first_kept = event.data.get("first_kept_index")
    if _is_int(first_kept):
        # Earlier summaries are folded into the new one; only conversation items stay.
        kept = [
            i
            for i in before
            if _int_or(messages[i].data.get("index"), -1) >= first_kept and messages[i].kind != "compact_summary"
        ]
        while kept and messages[kept[0]].kind == "tool_result":
            kept.pop(0)  # a kept list never starts with tool results
        return set(kept)
    cut = event.data.get("cut")
    if isinstance(cut, dict) and _is_int(cut.get("fromSeq")) and _is_int(cut.get("toSeq")):
        low, high = cut["fromSeq"], cut["toSeq"]
        return {i for i in before if not low <= _int_or(messages[i].data.get("seq"), low - 1) <= high}
    preserved = event.data.get("preservedMessages")
    uuids = preserved.get("uuids") if isinstance(preserved, dict) else None
    if isinstance(uuids, list):
        wanted = {u for u in uuids if isinstance(u, str)}
        return {i for i in before if messages[i].uuid in wanted}
    return set()


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any, default: int) -> int:
    return value if _is_int(value) else default


@dataclass(frozen=True, slots=True)
class _Clearing:
    """A microcompact or prune: how many of its tool ids no earlier record of the log holds."""

    before: int
    ids: int
    missing: int
    tokens_saved: int | None


@dataclass(slots=True)
class _View:
    live: list[bool]  # per position before the call: still in the history
    cleared: set[str]  # tool ids whose results no longer count
    clearings: list[_Clearing]
    cleared_results: int
    compacted_records: int

    @property
    def cleared_not_in_log(self) -> int:
        return sum(c.missing for c in self.clearings)


def _view(messages: Sequence[Message], events: Sequence[PlacedEvent], upto: int) -> _View:
    live = [is_sent(m) for m in messages[:upto]]
    compacted = 0
    low = 0  # nothing before it is live: later compactions need not look there again
    cleared: set[str] = set()
    pending: list[PlacedEvent] = []
    for placed in events:
        if placed.before > upto:
            continue
        if placed.event.kind == "compaction":
            keeps = _compaction_keeps(messages, placed, low)
            for position in range(low, placed.before):
                if live[position] and position not in keeps:
                    live[position] = False
                    compacted += 1
            while low < placed.before and not live[low]:
                low += 1
        elif placed.event.kind in ("microcompact", "prune"):
            cleared.update(placed.event.tool_ids)
            pending.append(placed)
    first_seen: dict[str, int] = {}
    results = 0
    if cleared:
        for position, message in enumerate(messages[:upto]):
            for block in message.blocks:
                if block.kind == "tool_result" and block.tool_id in cleared:
                    first_seen.setdefault(block.tool_id, position)
                    results += live[position]
    clearings = []
    for placed in pending:
        ids = set(placed.event.tool_ids)
        missing = sum(1 for i in ids if first_seen.get(i, placed.before) >= placed.before)
        clearings.append(_Clearing(placed.before, len(ids), missing, placed.event.tokens_saved))
    return _View(live, cleared, clearings, results, compacted)


def _record_parts(message: Message, tokens: int, cleared: set[str]) -> list[tuple[str, float]]:
    """A record's estimate shared among its blocks by their length, cleared results left out."""
    lengths = [len(b.text) for b in message.blocks]
    total = sum(lengths)
    if total == 0:
        lengths, total = [1] * len(message.blocks), len(message.blocks)
    return [
        (part_label(message, block), tokens * length / total)
        for block, length in zip(message.blocks, lengths, strict=True)
        if not (block.kind in _CLEARABLE_BLOCKS and block.tool_id in cleared)
    ]


def _visible_parts(
    messages: Sequence[Message], tokens: Sequence[int], events: Sequence[PlacedEvent], upto: int
) -> tuple[dict[str, float], _View]:
    """Estimated tokens per part of the records before position ``upto`` that the model still saw."""
    view = _view(messages, events, upto)
    parts: dict[str, float] = {}
    for position in range(upto):
        if view.live[position] and tokens[position]:
            for label, share in _record_parts(messages[position], tokens[position], view.cleared):
                parts[label] = parts.get(label, 0.0) + share
    return parts, view


# ----------------------------------------------------------------------------- what the log never shows


@dataclass(frozen=True, slots=True)
class Segment:
    """The stretch of the log from its start or from a compaction up to the next compaction."""

    start: int  # position of the compaction that opened it (0: the log's start)
    first_call: int | None  # position of its first call with recorded usage
    unlogged: int  # context at that call that neither the baseline nor the segment's records explain


@dataclass(frozen=True, slots=True)
class Inferred:
    """What every request carried besides the records: the same baseline everywhere, one extra per segment."""

    baseline: int
    ratio: float  # recorded tokens per estimated token (``growth_ratio``)
    segments: tuple[Segment, ...]

    def segment_at(self, position: int) -> tuple[int, Segment]:
        index = max(0, bisect.bisect_right([s.start for s in self.segments], position) - 1)
        return index, self.segments[index]


def growth_ratio(
    messages: Sequence[Message],
    tokens: Sequence[int],
    events: Sequence[PlacedEvent],
    calls: Sequence[tuple[int, int | None]],
) -> float:
    """Recorded tokens per estimated token, measured on how the context grew between calls.

    Only pairs of recorded calls with no compaction, microcompact or prune between them count: there the
    context grew by exactly the records that arrived, so the ratio is the agent's tokenizer against ours.
    1.0 when the session gives no such growth.
    """
    sent = [0]
    for message, estimate in zip(messages, tokens, strict=True):
        sent.append(sent[-1] + (estimate if is_sent(message) else 0))
    changes = sorted(p.before for p in events)
    grown_recorded = grown_estimate = 0
    for (start, before), (end, after) in zip(calls, calls[1:], strict=False):
        if (
            before is None
            or after is None
            or bisect.bisect_left(changes, start + 1) < bisect.bisect_right(changes, end)
        ):
            continue
        grown_recorded += after - before
        grown_estimate += sent[end] - sent[start]
    return grown_recorded / grown_estimate if grown_recorded > 0 and grown_estimate > 0 else 1.0


def infer_unlogged(
    messages: Sequence[Message],
    tokens: Sequence[int],
    events: Sequence[PlacedEvent],
    calls: Sequence[tuple[int, int | None]],
) -> Inferred:
    """The session's inferred system prompt + tools, and what each segment carried beside it.

    ``calls`` are ``(position of the call's first record, recorded context or None)`` in order. At the
    first recorded call of each segment, the recorded context minus the (``growth_ratio``-scaled) estimate
    of the records the model still saw is what the log does not show there. The smallest of these is the
    baseline (never below 0): the log's first call holds little more than it, unless the log starts
    mid-session, where a later segment shows it. The rest of each is that segment's own: history from before
    a log that starts mid-session, or what the agent attached after compacting (claude-code.md §8.3: files
    and todos, sent but not written).
    """
    ratio = growth_ratio(messages, tokens, events, calls)
    starts = [0] + sorted(p.before for p in events if p.event.kind == "compaction")
    residuals: dict[int, tuple[int, int]] = {}
    for first, recorded in calls:
        if recorded is None:
            continue
        index = bisect.bisect_right(starts, first) - 1
        if index in residuals:
            continue
        parts, _ = _visible_parts(messages, tokens, events, first)
        residuals[index] = (first, recorded - round(ratio * sum(parts.values())))
    baseline = max(0, min(r for _, r in residuals.values())) if residuals else 0
    segments = []
    for index, start in enumerate(starts):
        first_call, residual = residuals.get(index, (None, baseline))
        segments.append(Segment(start=start, first_call=first_call, unlogged=max(0, residual - baseline)))
    return Inferred(baseline=baseline, ratio=ratio, segments=tuple(segments))


# ----------------------------------------------------------------------------- the split


def _round_to(values: dict[str, float], total: int) -> dict[str, int]:
    """Integers proportional to ``values`` that add up to ``total`` exactly (largest remainders)."""
    whole = sum(values.values())
    if total <= 0 or whole <= 0:
        return {}
    exact = {label: value * total / whole for label, value in values.items()}
    rounded = {label: int(value) for label, value in exact.items()}
    missing = total - sum(rounded.values())
    for label in sorted(exact, key=lambda k: (rounded[k] - exact[k], k))[:missing]:
        rounded[label] += 1
    return rounded


def composition(
    messages: Sequence[Message],
    *,
    tokens: Sequence[int],
    events: Sequence[PlacedEvent],
    inferred: Inferred,
    call: int,
    first: int,
    recorded: int | None,
) -> Composition:
    """What filled the context of the call whose first record is ``messages[first]``.

    ``tokens`` are per-record estimates, ``events`` the agent's own compactions, microcompacts and prunes,
    ``inferred`` what the log never shows (``infer_unlogged`` over the same inputs).
    """
    parts, view = _visible_parts(messages, tokens, events, first)
    return _compose(parts, view, inferred=inferred, call=call, first=first, recorded=recorded)


def compositions(
    messages: Sequence[Message],
    *,
    tokens: Sequence[int],
    events: Sequence[PlacedEvent],
    inferred: Inferred,
    calls: Sequence[tuple[int, int, int | None]],
) -> Iterator[Composition]:
    """``composition`` at every call of ``calls`` (``(call, first, recorded)`` in order), the same numbers.

    A call-by-call pass would read the whole history again at each call. Between two calls with no
    compaction, microcompact or prune between them, the model saw the same records plus the ones that
    arrived, so only those are added to the running sums, in the order a full pass adds them: the sums are
    the same floats, hence the same rounded parts. At an event the history is read again whole.
    """
    changes = sorted(p.before for p in events)
    parts: dict[str, float] = {}
    view: _View | None = None
    upto = 0
    for call, first, recorded in calls:
        if view is None or first < upto or bisect.bisect_right(changes, first) != bisect.bisect_right(changes, upto):
            parts, view = _visible_parts(messages, tokens, events, first)
        else:
            for position in range(upto, first):
                message = messages[position]
                sent = is_sent(message)
                view.live.append(sent)
                if view.cleared:
                    view.cleared_results += sent * sum(
                        1 for b in message.blocks if b.kind == "tool_result" and b.tool_id in view.cleared
                    )
                if sent and tokens[position]:
                    for label, share in _record_parts(message, tokens[position], view.cleared):
                        parts[label] = parts.get(label, 0.0) + share
        upto = first
        yield _compose(parts, view, inferred=inferred, call=call, first=first, recorded=recorded)


def _compose(
    parts: dict[str, float], view: _View, *, inferred: Inferred, call: int, first: int, recorded: int | None
) -> Composition:
    whole = sum(parts.values())
    estimate = round(whole)
    index, segment = inferred.segment_at(first)
    unlogged_part = EARLIER_PART if index == 0 else REATTACHED_PART
    unlogged = segment.unlogged
    notes: list[str] = []
    unnamed = sum(1 for clearing in view.clearings if not clearing.ids)
    if unnamed:
        notes.append(
            f"{unnamed} clearing(s) recorded no tool ids: the results they cleared are still in the estimate, "
            "so the split of the recorded context is rougher."
        )
    for clearing in view.clearings:
        if not clearing.missing or segment.first_call is None or not segment.first_call < clearing.before <= first:
            continue  # cleared results of the log are out of the estimate; earlier clearings are in the residual
        if clearing.tokens_saved is None:
            notes.append(
                f"{clearing.missing} cleared tool result(s) are not in this log and the agent recorded no saving: "
                "the rows not in the log may still count them."
            )
            continue
        # What the agent saved on results the log does not hold came out of what the log does not show.
        unlogged -= round(clearing.tokens_saved * clearing.missing / clearing.ids)
    baseline = inferred.baseline
    if unlogged < 0:
        # Only the baseline can have held those results: the log starts mid-session and no later stretch
        # told the system prompt apart from the history before the log.
        baseline, unlogged = max(0, baseline + unlogged), 0
        notes.append(
            "This log starts mid-session: the system prompt row also held earlier history, "
            "and a clearing removed part of it."
        )
    if recorded is None:
        context, scale = baseline + unlogged + estimate, None
        conversation = _round_to(parts, estimate)
        notes.insert(0, "No usage recorded for this call: the context is an estimate.")
    else:
        context = recorded
        baseline = min(baseline, recorded)
        unlogged = min(unlogged, recorded - baseline)
        rest = recorded - baseline - unlogged
        if whole <= 0:
            unlogged, rest = unlogged + rest, 0  # no record to share the rest with
        conversation = _round_to(parts, rest)
        scale = rest / whole if whole > 0 else None
        if inferred.baseline > recorded and unlogged == 0:
            notes.append("The recorded context is below the session's inferred system prompt and tools.")
    rows = [Part(BASELINE_PART, baseline, True), Part(unlogged_part, unlogged, True)]
    rows += sorted((Part(k, v, True) for k, v in conversation.items()), key=lambda p: (-p.tokens, p.part))
    return Composition(
        call=call,
        context=context,
        estimated=recorded is None,
        parts=[p for p in rows if p.tokens > 0],
        baseline=baseline,
        unlogged=unlogged,
        conversation_estimate=estimate,
        scale=scale,
        cleared_results=view.cleared_results,
        cleared_not_in_log=view.cleared_not_in_log,
        compacted_records=view.compacted_records,
        notes=notes,
    )
