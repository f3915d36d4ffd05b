"""Prompt-cache behaviour read from recorded usage: the cache lifetime, cache misses and idle gaps.

The logs never mark a cache miss; the usage numbers show it. One reading for every view that reports
one (the timeline's markers, the overflow diagnosis, the findings), so they can never disagree.

The lifetime is the recorded one: each call's usage splits its cache writes into 5-minute and 1-hour entries
(Claude Code's ``usage.cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``,
docs/formats/claude-code.md §6.3); a write the record does not split is a 5-minute one, the API's default (as
``compaction.costs`` prices it). It is never inferred from gaps the cache seemed to survive: the logs stamp
responses, not requests, so a 5-minute session shows such gaps too (issue 36).

docs/formats/claude-code.md §7: after a microcompact ``cache_read`` collapses while the context keeps its
size; the same full miss follows idle gaps longer
than the cache lifetime (5.5-57 min gaps in sessions writing 5-minute entries), while sessions writing
1-hour entries survive such gaps. A miss changes cost, not context size.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from compaction.transcript import ApiCall, Usage, parse_timestamp

# Anthropic prompt caching: entries live 5 minutes unless written with ttl "1h"
# (docs/compaction/claude-code.md §6 step 3: "The cache TTL itself is 5 min (default) or 1 h").
DEFAULT_LIFETIME_MINUTES = 5
LONG_LIFETIME_MINUTES = 60
# Prompts shorter than this are never cached by the API (Anthropic prompt-caching minimum for most models),
# so a smaller read says nothing about a miss.
MIN_CACHEABLE_TOKENS = 1024
# A miss: the read falls below this share of the previous call's read...
READ_COLLAPSE_SHARE = 0.2
# ...while the context keeps at least this share of its size (a smaller context is a compaction, not a miss).
CONTEXT_KEPT_SHARE = 0.8

MICROCOMPACT_CAUSE = "microcompact changed the prompt prefix"
UNEXPLAINED_CAUSE = "prefix changed or cache evicted (no idle gap over the lifetime)"

# What a miss is put down to (``CacheMiss.kind``): the findings group misses by it.
PREFIX_CHANGE = "prefix_change"  # a microcompact, or nothing else explains it (the prefix changed or was evicted)
EXPIRY = "expiry"  # an idle gap longer than the lifetime of the entries the calls before it wrote
MODEL_SWITCH = "model_switch"  # the call went to another model than the call before it: caches are per model
MISS_KINDS = (EXPIRY, PREFIX_CHANGE, MODEL_SWITCH)


@dataclass(frozen=True, slots=True)
class CacheLifetime:
    minutes: int | None  # None: the provider's lifetime is not documented in our sources
    source: str  # why this lifetime, in words


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """What is known of the prompt cache of an agent's API provider; each strategy names its own
    (``Strategy.cache_policy``), so the readings below never assume one provider's rules for another's logs."""

    provider: str
    lifetime_minutes: int | None  # the default lifetime; None when our sources do not document one
    long_lifetime_minutes: int | None  # a longer-lived write the agent can ask for; None without one
    source: str  # where the lifetime comes from, or that it is not documented
    writes_recorded: bool  # the usage records cache writes (Anthropic); False: only cached reads (OpenAI)

    def missed_words(self, tokens: int) -> str:
        """What a miss made the call pay for, in words."""
        if self.writes_recorded:
            return f"{tokens:,} tokens written to the cache again"
        return f"{tokens:,} tokens sent uncached"


ANTHROPIC_CACHE = CachePolicy(
    provider="Anthropic",
    lifetime_minutes=DEFAULT_LIFETIME_MINUTES,
    long_lifetime_minutes=LONG_LIFETIME_MINUTES,
    source="docs/compaction/claude-code.md §6 step 3: 5 minutes by default, 1 hour for ttl 1h writes",
    writes_recorded=True,
)


@dataclass(frozen=True, slots=True)
class CacheMiss:
    call: int
    previous_call: int
    cache_read_before: int
    cache_read: int
    recreated_tokens: int
    idle_seconds: float | None
    cause: str
    kind: str = PREFIX_CHANGE  # one of MISS_KINDS
    lifetime_minutes: int | None = None  # the lifetime of the entries it missed (from the recorded split)

    @property
    def idle_minutes(self) -> float | None:
        return None if self.idle_seconds is None else self.idle_seconds / 60


@dataclass(frozen=True, slots=True)
class IdleGap:
    """No call for longer than the lifetime of the entries the calls before it wrote: the next call may start from a
    cold cache.

    The lifetime is the one a miss after the gap would be measured against (``_minutes_of`` on the 5-minute and
    1-hour writes so far), so a gap is drawn exactly where a miss after it would be put down to expiry: a session
    writing 1-hour entries draws no gap of 6 or 40 minutes.
    """

    call: int
    previous_call: int
    seconds: float
    lifetime_minutes: int

    @property
    def minutes(self) -> int:
        return idle_minutes(self.seconds)


def lifetime_words(minutes: int) -> str:
    """A cache lifetime as an adjective: "5-minute", "1-hour"."""
    return f"{minutes // 60}-hour" if minutes % 60 == 0 else f"{minutes}-minute"


def idle_minutes(seconds: float) -> int:
    """A pause in whole minutes, rounded half up: the one count of idle minutes every page, marker and cause shows
    (with thousands separators: ``f"{idle_minutes(s):,}"``)."""
    return int(seconds / 60 + 0.5)


@dataclass(frozen=True, slots=True)
class CacheReading:
    lifetime: CacheLifetime
    misses: list[CacheMiss]
    idle_gaps: list[IdleGap]

    @property
    def recreated_tokens(self) -> int:
        return sum(miss.recreated_tokens for miss in self.misses)


def idle_seconds(before: str | None, after: str | None) -> float | None:
    start, end = parse_timestamp(before), parse_timestamp(after)
    if start is None or end is None:
        return None
    return (end - start).total_seconds()


def _pairs(calls: Sequence[ApiCall]) -> list[tuple[ApiCall, Usage, ApiCall, Usage]]:
    """Each recorded call with its usage and the previous recorded call with its usage."""
    # A call that recorded no context says nothing about the cache; compare the calls on either side of it.
    recorded = [(c, c.usage) for c in calls if c.usage is not None and c.usage.context > 0]
    return [(*prev, *cur) for prev, cur in zip(recorded, recorded[1:], strict=False)]


def _minutes_of(written_5m: int, written_1h: int) -> int:
    """The lifetime most of the written entries have (by tokens): 1 hour when the 1-hour writes are the larger part."""
    return LONG_LIFETIME_MINUTES if written_1h > written_5m else DEFAULT_LIFETIME_MINUTES


def cache_lifetime(calls: Sequence[ApiCall], policy: CachePolicy = ANTHROPIC_CACHE) -> CacheLifetime:
    """The lifetime of the session's cache entries, from the recorded 5-minute / 1-hour split of its cache writes
    (most of the written tokens decide); not known (None) for a provider whose lifetime our sources do not document."""
    if policy.lifetime_minutes is None:
        return CacheLifetime(None, policy.source)
    written = sum(c.usage.cache_creation_input_tokens for c in calls if c.usage is not None)
    long = sum(c.usage.cache_creation_1h_input_tokens for c in calls if c.usage is not None)
    if not written:
        return CacheLifetime(
            DEFAULT_LIFETIME_MINUTES, "5 minutes: the API's default (the session recorded no cache writes)"
        )
    if _minutes_of(written - long, long) == LONG_LIFETIME_MINUTES:
        return CacheLifetime(
            LONG_LIFETIME_MINUTES,
            f"1 hour: {long:,} of the session's {written:,} cache-write tokens were recorded as 1-hour writes",
        )
    detail = (
        f"{long:,} of its {written:,} cache-write tokens were 1-hour writes"
        if long
        else f"the session wrote no 1-hour entries (its {written:,} cache-write tokens are 5-minute or unsplit writes)"
    )
    return CacheLifetime(DEFAULT_LIFETIME_MINUTES, f"5 minutes: {detail}")


def read_cache(
    calls: Sequence[ApiCall], *, microcompacted: Collection[int] = (), policy: CachePolicy = ANTHROPIC_CACHE
) -> CacheReading:
    """The cache lifetime, misses and idle gaps of one agent's calls (in call order).

    Read from each call's ``number``, ``timestamp`` and ``usage`` (its context, cache read and cache creation);
    calls without a recorded context are skipped.

    ``microcompacted`` holds the calls a microcompact preceded (after the previous call, before this one):
    a miss there is explained by the changed prefix. Without a documented lifetime (``policy``) no gap is called
    longer than it: misses are reported without a cause of that kind and no idle gap is drawn.
    """
    lifetime = cache_lifetime(calls, policy)
    misses: list[CacheMiss] = []
    gaps: list[IdleGap] = []
    default = policy.lifetime_minutes
    # The 5-minute and 1-hour writes of the calls before the current one: the entries a miss failed to read.
    written_5m = written_1h = 0
    for prev, before, cur, now in _pairs(calls):
        written_1h += before.cache_creation_1h_input_tokens
        written_5m += before.cache_creation_input_tokens - before.cache_creation_1h_input_tokens
        gap = idle_seconds(prev.timestamp, cur.timestamp)
        # The lifetime of the entries this call could read: a gap past it is drawn, and a miss after it is expiry.
        minutes = None if default is None else _minutes_of(written_5m, written_1h)
        if gap is not None and minutes is not None and gap > minutes * 60:
            gaps.append(IdleGap(call=cur.number, previous_call=prev.number, seconds=gap, lifetime_minutes=minutes))
        if not _is_miss(before, now):
            continue
        kind = PREFIX_CHANGE
        if any(prev.number < call <= cur.number for call in microcompacted):
            cause = MICROCOMPACT_CAUSE
        elif prev.model and cur.model and prev.model != cur.model:
            kind = MODEL_SWITCH
            cause = f"model switched from {prev.model} to {cur.model} (each model has its own cache)"
        elif gap is not None and minutes is not None and gap > minutes * 60:
            kind = EXPIRY
            cause = f"idle {idle_minutes(gap):,} min > {minutes} min cache lifetime"
        elif minutes is None:
            after = f", after {idle_minutes(gap):,} idle min" if gap is not None and gap >= 60 else ""
            cause = f"prefix changed or cache evicted{after} ({policy.provider}'s cache lifetime is not documented)"
        else:
            cause = UNEXPLAINED_CAUSE
        misses.append(
            CacheMiss(
                call=cur.number,
                previous_call=prev.number,
                cache_read_before=before.cache_read_input_tokens,
                cache_read=now.cache_read_input_tokens,
                # Without recorded writes (OpenAI) what the miss cost is the input no longer read from the cache.
                recreated_tokens=(
                    now.cache_creation_input_tokens
                    if policy.writes_recorded
                    else now.context - now.cache_read_input_tokens
                ),
                idle_seconds=gap,
                cause=cause,
                kind=kind,
                lifetime_minutes=minutes,
            )
        )
    return CacheReading(lifetime=lifetime, misses=misses, idle_gaps=gaps)


def _is_miss(before: Usage, now: Usage) -> bool:
    """Between the usage of one call (``before``) and the next (``now``)."""
    return (
        before.cache_read_input_tokens >= MIN_CACHEABLE_TOKENS
        and now.cache_read_input_tokens < READ_COLLAPSE_SHARE * before.cache_read_input_tokens
        and now.context >= CONTEXT_KEPT_SHARE * before.context
    )
