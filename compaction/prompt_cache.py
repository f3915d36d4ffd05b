"""Prompt-cache behaviour read from recorded usage: the cache lifetime, cache misses and idle gaps.

The logs never mark a cache miss; the usage numbers show it. One reading for every view that reports
one (the timeline's markers, the overflow diagnosis), so the two can never disagree.

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
# A call after an idle gap past the default lifetime that still read at least this share of the previous
# context from the cache proves longer-lived (1-hour) entries.
KEPT_CACHE_SHARE = 0.5
# Prompts shorter than this are never cached by the API (Anthropic prompt-caching minimum for most models),
# so a smaller read says nothing about a miss.
MIN_CACHEABLE_TOKENS = 1024
# A miss: the read falls below this share of the previous call's read...
READ_COLLAPSE_SHARE = 0.2
# ...while the context keeps at least this share of its size (a smaller context is a compaction, not a miss).
CONTEXT_KEPT_SHARE = 0.8

MICROCOMPACT_CAUSE = "microcompact changed the prompt prefix"
UNEXPLAINED_CAUSE = "prefix changed or cache evicted (no idle gap over the lifetime)"


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

    @property
    def idle_minutes(self) -> float | None:
        return None if self.idle_seconds is None else self.idle_seconds / 60


@dataclass(frozen=True, slots=True)
class IdleGap:
    """No call for longer than the default cache lifetime: the next call may start from a cold cache.

    Measured against the default lifetime, not the inferred one: ``cache_lifetime`` only infers 1-hour
    entries from gaps the cache survived, which a 5-minute session can also show (the logs stamp
    responses, not requests), so a gap is never hidden on that inference alone.
    """

    call: int
    previous_call: int
    seconds: float


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


def cache_lifetime(calls: Sequence[ApiCall], policy: CachePolicy = ANTHROPIC_CACHE) -> CacheLifetime:
    """1 hour when an idle gap past 5 minutes kept the cache, else the 5-minute default; not known (None) for a
    provider whose lifetime our sources do not document."""
    if policy.lifetime_minutes is None:
        return CacheLifetime(None, policy.source)
    kept = 0
    for prev, before, cur, now in _pairs(calls):
        gap = idle_seconds(prev.timestamp, cur.timestamp)
        if (
            gap is not None
            and gap > DEFAULT_LIFETIME_MINUTES * 60
            and now.cache_read_input_tokens >= KEPT_CACHE_SHARE * before.context
        ):
            kept += 1
    if kept:
        return CacheLifetime(
            LONG_LIFETIME_MINUTES,
            f"1 hour: {kept} idle gap(s) over 5 minutes kept the cache, so the session writes 1h cache entries",
        )
    return CacheLifetime(
        DEFAULT_LIFETIME_MINUTES, "5 minutes: the default cache lifetime (no longer-lived cache writes seen)"
    )


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
    for prev, before, cur, now in _pairs(calls):
        gap = idle_seconds(prev.timestamp, cur.timestamp)
        if gap is not None and default is not None and gap > default * 60:
            gaps.append(IdleGap(call=cur.number, previous_call=prev.number, seconds=gap))
        if not _is_miss(before, now):
            continue
        if any(prev.number < call <= cur.number for call in microcompacted):
            cause = MICROCOMPACT_CAUSE
        elif gap is not None and lifetime.minutes is not None and gap > lifetime.minutes * 60:
            cause = f"idle {gap / 60:.0f} min > {lifetime.minutes} min cache lifetime"
        elif lifetime.minutes is None:
            after = f", after {gap / 60:.0f} idle min" if gap is not None and gap >= 60 else ""
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
