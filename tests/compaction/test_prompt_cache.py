"""Prompt-cache reading on hand-made calls: the lifetime, the miss rule and its causes, idle gaps."""

from __future__ import annotations

from compaction.prompt_cache import (
    MICROCOMPACT_CAUSE,
    MIN_CACHEABLE_TOKENS,
    UNEXPLAINED_CAUSE,
    cache_lifetime,
    read_cache,
)
from compaction.transcript import MAIN, ApiCall, Usage


def at(minute: int, second: int = 0) -> str:
    return f"2026-01-01T{10 + minute // 60:02d}:{minute % 60:02d}:{second:02d}Z"


def cached(number: int, context: int, *, read: int, created: int, timestamp: str | None) -> ApiCall:
    """A call of ``context`` tokens of which ``read`` were read from the cache and ``created`` written to it."""
    usage = Usage(context - read - created, cache_creation_input_tokens=created, cache_read_input_tokens=read)
    return ApiCall(agent=MAIN, number=number, key=f"msg_{number}", line=number, usage=usage, timestamp=timestamp)


def call(index: int, context: int, *, read: int, created: int = 0, minute: int = 0, second: int = 0) -> ApiCall:
    return cached(index, context, read=read, created=created, timestamp=at(minute, second))


def test_a_collapsed_read_at_an_unchanged_context_is_a_miss_with_the_recreated_tokens() -> None:
    reading = read_cache(
        [call(0, 50_000, read=45_000, minute=0), call(1, 51_000, read=1_000, created=49_500, minute=1)]
    )
    [miss] = reading.misses
    assert (miss.call, miss.previous_call) == (1, 0)
    assert (miss.cache_read_before, miss.cache_read, miss.recreated_tokens) == (45_000, 1_000, 49_500)
    assert miss.cause == UNEXPLAINED_CAUSE
    assert miss.idle_minutes == 1
    assert reading.recreated_tokens == 49_500


def test_a_read_just_above_a_fifth_is_not_a_miss() -> None:
    calls = [call(0, 50_000, read=40_000), call(1, 50_000, read=8_000)]
    assert read_cache(calls).misses == []
    calls = [call(0, 50_000, read=40_000), call(1, 50_000, read=7_999)]
    assert [m.call for m in read_cache(calls).misses] == [1]


def test_a_shrunk_context_is_a_compaction_not_a_miss() -> None:
    calls = [call(0, 150_000, read=140_000), call(1, 40_000, read=0, created=40_000)]
    assert read_cache(calls).misses == []


def test_a_read_below_the_cacheable_minimum_says_nothing() -> None:
    small = MIN_CACHEABLE_TOKENS - 1
    calls = [call(0, 2_000, read=small), call(1, 2_000, read=0, created=2_000)]
    assert read_cache(calls).misses == []
    calls = [call(0, 2_000, read=MIN_CACHEABLE_TOKENS), call(1, 2_000, read=0, created=2_000)]
    assert len(read_cache(calls).misses) == 1


def test_a_microcompact_between_the_calls_is_the_cause() -> None:
    calls = [call(3, 150_000, read=151_000, minute=0), call(4, 128_000, read=19_000, created=108_000, minute=30)]
    [miss] = read_cache(calls, microcompacted=[4]).misses
    assert miss.cause == MICROCOMPACT_CAUSE
    # A microcompact before an earlier call explains nothing here: the idle gap does.
    [miss] = read_cache(calls, microcompacted=[3]).misses
    assert miss.cause == "idle 30 min > 5 min cache lifetime"


def test_an_idle_gap_past_five_minutes_is_reported_and_explains_the_miss() -> None:
    calls = [
        call(0, 50_000, read=40_000, minute=0),
        call(1, 51_000, read=49_000, minute=5),  # exactly 5 minutes: still within the lifetime
        call(2, 52_000, read=0, created=52_000, minute=10, second=1),
    ]
    reading = read_cache(calls)
    assert [(g.call, g.previous_call, g.seconds) for g in reading.idle_gaps] == [(2, 1, 301)]
    [miss] = reading.misses
    assert miss.cause == "idle 5 min > 5 min cache lifetime"


def test_a_gap_the_cache_survived_means_one_hour_entries() -> None:
    calls = [call(0, 50_000, read=40_000, minute=0), call(1, 51_000, read=25_000, minute=30)]
    lifetime = cache_lifetime(calls)
    assert lifetime.minutes == 60
    assert "1 idle gap(s)" in lifetime.source
    # Under half of the previous context read back after the gap: no proof of longer-lived entries.
    calls = [call(0, 50_000, read=40_000, minute=0), call(1, 51_000, read=24_999, minute=30)]
    assert cache_lifetime(calls).minutes == 5


def test_with_one_hour_entries_a_long_gap_is_still_an_idle_gap_but_not_the_cause() -> None:
    calls = [
        call(0, 50_000, read=40_000, minute=0),
        call(1, 51_000, read=49_000, minute=20),  # survived: 1h entries
        call(2, 52_000, read=0, created=52_000, minute=50),
    ]
    reading = read_cache(calls)
    assert reading.lifetime.minutes == 60
    assert [g.call for g in reading.idle_gaps] == [1, 2]
    assert [m.cause for m in reading.misses] == [UNEXPLAINED_CAUSE]


def test_calls_without_a_recorded_context_are_skipped() -> None:
    empty = cached(1, 0, read=0, created=0, timestamp=at(1))
    calls = [call(0, 50_000, read=45_000), empty, call(2, 50_000, read=0, created=50_000, minute=2)]
    [miss] = read_cache(calls).misses
    assert (miss.previous_call, miss.call) == (0, 2)


def test_missing_timestamps_give_no_gap() -> None:
    calls = [
        cached(0, 50_000, read=45_000, created=0, timestamp=None),
        cached(1, 50_000, read=0, created=50_000, timestamp=at(30)),
    ]
    reading = read_cache(calls)
    assert reading.idle_gaps == []
    assert reading.misses[0].idle_seconds is None
    assert reading.misses[0].cause == UNEXPLAINED_CAUSE
