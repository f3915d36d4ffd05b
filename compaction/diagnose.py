"""Overflow diagnosis: why a session's context grew, which lines it crossed, what (did not) compact.

Pure Python over the neutral model. Everything is read from the records: recorded usage per API call,
the context events the parser drew (compactions, microcompacts, API and overflow errors) and the messages
themselves. Sizes of messages are estimates (Claude Code's ``roughTokenCountEstimation``: round(chars/4),
2,000 per image; docs/compaction/claude-code.md §4.1) and are labelled as such; recorded usage wins where
it exists. Where the log cannot answer (no usage), the diagnosis says so instead of guessing.

The "why did it overflow" signal follows docs/formats/claude-code.md §13 step 6: attribute the growth
between successive recorded contexts to what arrived in between, and report the gap between a
compaction's ``preTokens`` and the last recorded context separately (output that no request reported).
"""

from __future__ import annotations

import bisect
import dataclasses
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.replay import api_steps, is_compaction_record, main_agent, session_thresholds
from compaction.strategies.claude_code import estimate_block
from compaction.strategies.registry import STRATEGY_NAMES, build_strategy
from compaction.thresholds import Thresholds
from compaction.transcript import ContextEvent, Message, SessionInfo, parse_timestamp
from compaction.windows import ONE_MILLION_CONTEXT_WINDOW

TOP = 10  # contributors and jumps listed
# Anthropic prompt caching: the default cache lifetime is 5 minutes; writes with ttl "1h" live an hour
# (docs/formats/claude-code.md §7: misses after 5.5-57 min gaps in 5m sessions, none in 1h sessions).
CACHE_TTL_MINUTES = 5
CACHE_TTL_1H_MINUTES = 60
# A read below this share of the previous call's read, at a context that did not shrink much, is a miss.
CACHE_COLLAPSE_SHARE = 0.2
CONTEXT_UNCHANGED_SHARE = 0.8
# Prompts shorter than this are never cached by the API (Anthropic prompt-caching minimum for most models).
MIN_CACHEABLE_TOKENS = 1024
# autoCompact.ts:70 MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES (claude_code strategy constant).
CIRCUIT_BREAKER_FAILURES = 3
# Texts agents write when a compaction could not run (klaude-code §3.5-3.6; Claude Code compact.ts
# "Not enough messages to compact." and ERROR_MESSAGE_PROMPT_TOO_LONG, compaction doc §2.6).
NOTHING_TO_COMPACT_TEXTS = (
    "Nothing to compact",
    "Not enough messages to compact",
    "Conversation too long. Press esc twice",
    "Error during compaction",
)
_SCANNED_TEXT_CHARS = 2_000  # only short notices are searched for those texts


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


# ----------------------------------------------------------------------------- results


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
    crossings: list[dict[str, Any]] = field(default_factory=list)
    contributors_by_tool: list[dict[str, Any]] = field(default_factory=list)
    contributors_by_message: list[dict[str, Any]] = field(default_factory=list)
    contributors_scope: dict[str, Any] = field(default_factory=dict)
    growth: dict[str, Any] = field(default_factory=dict)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict)
    drift: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["thresholds"] = dataclasses.asdict(self.thresholds)
        return data


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


def _arrival_rows(messages: Sequence[Message], start: int, end: int, *, limit: int = 5) -> list[dict[str, Any]]:
    rows = [
        {
            "seq": _seq(messages[p], p),
            "line": messages[p].line,
            "kind": messages[p].kind,
            "tools": _tool_names(messages[p]),
            "chars": _chars(messages[p]),
            "tokens_estimate": _tokens(messages[p]),
        }
        for p in range(start, end)
        if _reaches_model(messages[p]) and messages[p].role != "assistant"
    ]
    rows.sort(key=lambda r: r["chars"], reverse=True)
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
    defaults to the calls recorded in ``messages`` (``call_points``); ``thresholds`` defaults to the lines
    of the session's own agent (Claude Code's for a foreign format).
    """
    agent = main_agent(messages)
    messages = [m for m in messages if m.agent == agent]
    events = [e for e in events if e.agent == agent]
    steps = call_points(messages)
    if calls is not None:
        given = {c.index: c for c in calls}
        for step in steps:
            if step.index in given:
                c = given[step.index]
                step.context, step.output = c.context, c.output
                step.cache_read, step.cache_creation = c.cache_read, c.cache_creation
    if thresholds is None:
        name = info.format if info.format in STRATEGY_NAMES else "claude-code"
        thresholds = session_thresholds(build_strategy(name, info=info, overrides={}), messages, info=info)
    window = thresholds.window
    has_usage = bool(steps)

    # Where each event sits among the messages (events carry the line of the record they came from).
    lines = [m.line for m in messages]
    ordered = all(a <= b for a, b in zip(lines, lines[1:], strict=False))
    first_of_line: dict[int, int] = {}
    for position, line in enumerate(lines):
        first_of_line.setdefault(line, position)

    def event_position(event: ContextEvent) -> int:
        if event.line in first_of_line:
            return first_of_line[event.line]
        return bisect.bisect_left(lines, event.line) if ordered else len(messages)

    call_starts = [s.position or 0 for s in steps]

    def calls_before(position: int) -> int:
        return bisect.bisect_left(call_starts, position)

    placed = sorted(((event_position(e), i, e) for i, e in enumerate(events)), key=lambda t: (t[0], t[1]))
    compaction_events = [(p, e) for p, _, e in placed if e.kind == "compaction"]
    compaction_positions = [p for p, _ in compaction_events] + [
        i for i, m in enumerate(messages) if is_compaction_record(m)
    ]

    # -- the context series: recorded calls, plus the sizes compactions and overflow errors reported
    points: list[tuple[int, int, int, str]] = [(s.position or 0, s.index, s.context, "recorded usage") for s in steps]
    for position, _, event in placed:
        if event.pre_tokens and event.kind in ("compaction", "overflow"):
            source = "compaction preTokens" if event.kind == "compaction" else "overflow error"
            points.append((position, calls_before(position), event.pre_tokens, source))
    points.sort(key=lambda t: (t[0], t[1]))
    peak_point = max(points, key=lambda t: t[2]) if points else None
    peak = peak_point[2] if peak_point else 0
    peak_call = peak_point[1] if peak_point else None

    # -- threshold crossings (each time the series goes from below a line to at or above it)
    lines_to_check = [
        ("warning", thresholds.warning),
        ("autocompact", thresholds.autocompact),
        ("blocking", thresholds.blocking),
        ("window", window),
    ]
    crossings: list[dict[str, Any]] = []
    for label, threshold in lines_to_check:
        if threshold is None:
            continue
        below = True
        for _position, call, value, source in points:
            if value >= threshold and below:
                crossings.append(
                    {"line": label, "threshold": threshold, "call": call, "tokens": value, "source": source}
                )
            below = value < threshold
    crossings.sort(key=lambda c: (c["call"], c["threshold"]))

    # -- what filled the window at its fullest
    focus_position = peak_point[0] if peak_point else len(messages)
    if peak_point is not None and peak_point[3] == "recorded usage":
        focus_position = peak_point[0]  # the request holds messages[:first record]
    segment_start = max((p + 1 for p in compaction_positions if p < focus_position), default=0)
    by_tool: dict[str, dict[str, Any]] = {}
    sized: list[tuple[int, int]] = []
    for position in range(segment_start, min(focus_position, len(messages))):
        message = messages[position]
        if not _reaches_model(message):
            continue
        chars = _chars(message)
        sized.append((chars, position))
        for block in message.blocks:
            if block.kind != "tool_result":
                continue
            name = block.tool_name or "unknown tool"
            row = by_tool.setdefault(name, {"tool": name, "results": 0, "chars": 0, "tokens_estimate": 0})
            row["results"] += 1
            row["chars"] += len(block.text)
            row["tokens_estimate"] += estimate_block(block)
    contributors_by_tool = sorted(by_tool.values(), key=lambda r: r["chars"], reverse=True)[:TOP]
    contributors_by_message = [
        {
            "seq": _seq(messages[p], p),
            "line": messages[p].line,
            "kind": messages[p].kind,
            "role": messages[p].role,
            "tools": _tool_names(messages[p]) or [b.tool_name for b in messages[p].blocks if b.tool_name],
            "chars": chars,
            "tokens_estimate": _tokens(messages[p]),
        }
        for chars, p in sorted(sized, reverse=True)[:TOP]
    ]
    scope = {
        "from_seq": _seq(messages[segment_start], segment_start) if segment_start < len(messages) else None,
        "to_call": peak_call,
        "tokens": peak,
        "estimate": "round(chars / 4), 2,000 per image (Claude Code roughTokenCountEstimation)",
    }

    # -- growth per call, and estimator drift over the same clean intervals
    jumps: list[dict[str, Any]] = []
    deltas: list[int] = []
    recorded_growth = 0
    estimated_growth = 0
    compaction_prefix = [0]
    for message in messages:
        compaction_prefix.append(compaction_prefix[-1] + (1 if is_compaction_record(message) else 0))
    for prev, cur in zip(steps, steps[1:], strict=False):
        start, end = prev.position or 0, cur.position or 0
        delta = cur.context - prev.context
        deltas.append(delta)
        if compaction_prefix[end] - compaction_prefix[start]:
            continue  # a real compaction lies between: not growth
        estimate = sum(_tokens(m) for m in messages[start:end] if _reaches_model(m))
        if delta > 0 and estimate > 0:
            recorded_growth += delta
            estimated_growth += estimate
        jumps.append(
            {
                "call": cur.index,
                "from": prev.context,
                "to": cur.context,
                "delta": delta,
                "arrived": describe_arrivals(messages[prev.end or start : end]),
                "messages": _arrival_rows(messages, prev.end or start, end),
                "_start": prev.end or start,
            }
        )
    jumps.sort(key=lambda j: j["delta"], reverse=True)
    for jump in jumps:
        jump.pop("_start")
    growth = {
        "calls": len(steps),
        "median_delta": int(statistics.median(deltas)) if deltas else None,
        "largest_jumps": [j for j in jumps if j["delta"] > 0][:TOP],
    }
    drift: dict[str, Any] = {}
    if estimated_growth:
        drift = {
            "recorded_per_estimated_token": round(recorded_growth / estimated_growth, 3),
            "recorded_growth": recorded_growth,
            "estimated_growth": estimated_growth,
            "estimate": scope["estimate"],
            "meaning": "recorded context growth divided by the estimate of what arrived, over calls with no "
            "compaction between them (> 1: the estimate undercounts)",
        }

    # -- compactions that fired
    def last_call_before(position: int) -> CallPoint | None:
        index = calls_before(position) - 1
        return steps[index] if index >= 0 else None

    compactions: list[dict[str, Any]] = []
    for position, event in compaction_events:
        last = last_call_before(position)
        arrived_from = (last.end or position) if last is not None else segment_start
        compaction_row: dict[str, Any] = {
            "call": calls_before(position),
            "seq": _seq(messages[position], position) if position < len(messages) else None,
            "line": event.line,
            "trigger": event.trigger,
            "pre_tokens": event.pre_tokens,
            "post_tokens": event.post_tokens,
            "last_call": last.index if last else None,
            "last_context": last.context if last else None,
            "last_output": last.output if last else None,
            "gap": (event.pre_tokens - last.context) if (last and event.pre_tokens) else None,
            "arrived_after_last_call": describe_arrivals(messages[arrived_from:position]),
            "arrived": _arrival_rows(messages, arrived_from, position),
            "past_threshold": (
                event.pre_tokens - thresholds.autocompact
                if event.pre_tokens and thresholds.autocompact is not None
                else None
            ),
        }
        compactions.append(compaction_row)

    # -- failures: errors not followed by a compaction, "nothing to compact" notices, the circuit breaker
    failures: list[dict[str, Any]] = []
    consecutive = 0
    breaker_at: int | None = None
    for position, _, event in placed:
        if event.kind == "compaction":
            consecutive = 0
            continue
        if event.kind not in ("overflow", "api_error"):
            continue
        next_call = calls_before(position + 1)
        next_call_position = call_starts[next_call] if next_call < len(call_starts) else len(messages) + 1
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
        if consecutive >= CIRCUIT_BREAKER_FAILURES and breaker_at is None:
            breaker_at = calls_before(position)
        failures.append(
            {
                "kind": event.kind,
                "call": calls_before(position),
                "line": event.line,
                "tokens": event.pre_tokens,
                "message": event.message[:300],
                "followed_by": outcome,
                "compaction_trigger": followed.trigger if followed is not None else None,
                "failed": failed,
            }
        )
    for position, message in enumerate(messages):
        if message.role == "user" and message.kind == "tool_result":
            continue
        text = message.text
        if len(text) <= _SCANNED_TEXT_CHARS and any(t in text for t in NOTHING_TO_COMPACT_TEXTS):
            failures.append(
                {
                    "kind": "nothing_to_compact",
                    "call": calls_before(position),
                    "line": message.line,
                    "tokens": None,
                    "message": text[:300],
                    "followed_by": "nothing",
                    "compaction_trigger": None,
                    "failed": True,
                }
            )
    failures.sort(key=lambda f: (f["call"], f["line"]))

    # -- cache misses
    gaps_kept = 0
    for prev, cur in zip(steps, steps[1:], strict=False):
        gap = _minutes(prev.timestamp, cur.timestamp)
        if gap is not None and gap > CACHE_TTL_MINUTES and cur.cache_read >= 0.5 * prev.context > 0:
            gaps_kept += 1
    ttl = CACHE_TTL_1H_MINUTES if gaps_kept else CACHE_TTL_MINUTES
    ttl_source = (
        f"1 hour: {gaps_kept} idle gap(s) over 5 minutes kept the cache, so the session writes 1h cache entries"
        if gaps_kept
        else "5 minutes: the default cache lifetime (no longer-lived cache writes seen)"
    )
    microcompact_positions = [p for p, _, e in placed if e.kind == "microcompact"]
    misses: list[dict[str, Any]] = []
    for prev, cur in zip(steps, steps[1:], strict=False):
        if prev.cache_read < MIN_CACHEABLE_TOKENS:
            continue
        if cur.cache_read >= CACHE_COLLAPSE_SHARE * prev.cache_read:
            continue
        if cur.context < CONTEXT_UNCHANGED_SHARE * prev.context:
            continue  # the context itself shrank (a compaction): not a cache miss
        gap = _minutes(prev.timestamp, cur.timestamp)
        between = any((prev.position or 0) <= p < (cur.position or 0) for p in microcompact_positions)
        if between:
            cause = "microcompact changed the prompt prefix"
        elif gap is not None and gap > ttl:
            cause = f"idle {gap:.0f} min > {ttl} min cache lifetime"
        else:
            cause = "prefix changed or cache evicted (no idle gap over the lifetime)"
        misses.append(
            {
                "call": cur.index,
                "cache_read_before": prev.cache_read,
                "cache_read": cur.cache_read,
                "recreated_tokens": cur.cache_creation,
                "idle_minutes": round(gap, 1) if gap is not None else None,
                "cause": cause,
            }
        )
    cache = {
        "ttl_minutes": ttl,
        "ttl_source": ttl_source,
        "misses": misses,
        "recreated_tokens": sum(m["recreated_tokens"] for m in misses),
    }

    # -- verdict
    overflow_events = [(p, e) for p, _, e in placed if e.kind == "overflow"]
    overflowed = bool(overflow_events) or peak > window
    needed = (
        bool(compaction_events) or overflowed or (thresholds.autocompact is not None and peak >= thresholds.autocompact)
    )
    notes: list[str] = []
    if not has_usage:
        notes.append(
            "No usage is recorded in this log: threshold crossings, growth per call, cache behaviour and "
            "estimator drift cannot be read from it; message sizes are estimates."
        )
    if thresholds.assumption:
        notes.append(f"Thresholds are partly assumed: {thresholds.source}")
    if window >= ONE_MILLION_CONTEXT_WINDOW:
        notes.append(f"1M-token window ({window:,}): from the model or a recorded context above 200k.")
    if breaker_at is not None:
        notes.append(
            f"{CIRCUIT_BREAKER_FAILURES} consecutive overflows without a compaction by call {breaker_at}: "
            "Claude Code's circuit breaker stops autocompact at this point (autoCompact.ts, 2.1.76+)."
        )
    verdict = _verdict(
        messages=messages,
        steps=steps,
        overflow_events=overflow_events,
        compactions=compactions,
        failures=failures,
        thresholds=thresholds,
        peak=peak,
        peak_call=peak_call,
        has_usage=has_usage,
        calls_before=calls_before,
        last_call_before=last_call_before,
    )
    return Diagnosis(
        verdict=verdict,
        window=window,
        is_1m_window=window >= ONE_MILLION_CONTEXT_WINDOW,
        overflowed=overflowed,
        needed_compaction=needed,
        has_usage=has_usage,
        peak=peak,
        peak_call=peak_call,
        thresholds=thresholds,
        crossings=crossings,
        contributors_by_tool=contributors_by_tool,
        contributors_by_message=contributors_by_message,
        contributors_scope=scope,
        growth=growth,
        compactions=compactions,
        failures=failures,
        cache=cache,
        drift=drift,
        notes=notes,
    )


def _minutes(start: str | None, end: str | None) -> float | None:
    a, b = parse_timestamp(start), parse_timestamp(end)
    if a is None or b is None:
        return None
    return (b - a).total_seconds() / 60


def _verdict(
    *,
    messages: Sequence[Message],
    steps: Sequence[CallPoint],
    overflow_events: Sequence[tuple[int, ContextEvent]],
    compactions: Sequence[dict[str, Any]],
    failures: Sequence[dict[str, Any]],
    thresholds: Thresholds,
    peak: int,
    peak_call: int | None,
    has_usage: bool,
    calls_before: Any,
    last_call_before: Any,
) -> str:
    window = thresholds.window
    window_label = "1M" if window >= ONE_MILLION_CONTEXT_WINDOW else _k(window)
    if overflow_events:
        position, event = overflow_events[0]
        call = calls_before(position)
        last = last_call_before(position)
        arrived_from = (last.end or position) if last is not None else 0
        size = f"{event.pre_tokens:,} tokens against the {window:,}-token window" if event.pre_tokens else "it"
        text = f"The prompt overflowed before call {call}: {size}"
        arrivals = describe_arrivals(messages[arrived_from:position])
        if last is not None:
            text += f", after {arrivals} arrived after the last request ({last.context:,} tokens recorded"
            if thresholds.autocompact is not None and last.context < thresholds.autocompact:
                text += f", below the {thresholds.autocompact:,} compaction threshold"
            text += ")"
        failure = next((f for f in failures if f["line"] == event.line and f["kind"] == "overflow"), None)
        if failure is not None and failure["followed_by"] == "compaction":
            text += f"; an {failure['compaction_trigger'] or 'overflow'} compaction followed and the session recovered."
        else:
            text += "; no compaction followed it."
        return text
    if compactions:
        auto = [c for c in compactions if c["trigger"] != "manual"]
        pool = auto or list(compactions)
        worst = max(pool, key=lambda c: (c["past_threshold"] or 0, c["gap"] or 0))
        more = f" ({len(compactions)} compactions in total)" if len(compactions) > 1 else ""
        if worst["trigger"] == "manual":
            pre = f" at {worst['pre_tokens']:,} tokens" if worst["pre_tokens"] else ""
            return (
                f"A manual compaction ran before call {worst['call']}{pre}; no automatic compaction was needed{more}."
            )
        line = thresholds.autocompact
        pre = worst["pre_tokens"]
        if line is None or pre is None:
            return f"Context was compacted ({worst['trigger'] or 'auto'}) before call {worst['call']}{more}."
        text = f"Context crossed the {_k(line)} autocompact threshold before call {worst['call']}"
        if worst["gap"] is not None and worst["gap"] > 0.01 * line:
            text += (
                f" after {worst['arrived_after_last_call']} arrived after the last request "
                f"({worst['last_context']:,} tokens recorded)"
            )
        text += f"; compaction fired at {pre:,} tokens"
        past = pre - line
        text += f", {past:,} past the threshold" if past > 0 else ""
        return text + f"{more}."
    if not has_usage:
        return (
            "No usage is recorded, so the log cannot show how full the window got; no compaction or overflow "
            "was recorded."
        )
    share = peak / window if window else 0
    line = thresholds.autocompact
    if line is not None and peak >= line:
        return (
            f"Context reached {peak:,} tokens at call {peak_call} ({share:.0%} of the {window_label} window), past "
            f"the {_k(line)} compaction threshold, but no compaction was recorded: the log ends before the agent "
            "checked again."
        )
    text = (
        f"Context peaked at {peak:,} tokens at call {peak_call}, {share:.0%} of the {window_label} window; "
        "it never needed compaction"
    )
    if thresholds.warning is not None and peak >= thresholds.warning:
        text += f" (it passed the {_k(thresholds.warning)} warning line)"
    return text + "."
