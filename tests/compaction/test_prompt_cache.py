"""Prompt-cache reading on hand-made calls: the lifetime, the miss rule and its causes, idle gaps."""

from __future__ import annotations

import dataclasses

from compaction.prompt_cache import (
    EXPIRY,
    MICROCOMPACT_CAUSE,
    MIN_CACHEABLE_TOKENS,
    MODEL_SWITCH,
    PREFIX_CHANGE,
    UNEXPLAINED_CAUSE,
    idle_minutes,
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


def long_lived(number: int, context: int, *, read: int, created: int, minute: int) -> ApiCall:
    """A call whose cache writes were all recorded as 1-hour writes (``ephemeral_1h_input_tokens``)."""
    usage = Usage(
        context - read - created,
        cache_creation_input_tokens=created,
        cache_read_input_tokens=read,
        cache_creation_1h_input_tokens=created,
    )
    return ApiCall(agent=MAIN, number=number, key=f"msg_{number}", line=number, usage=usage, timestamp=at(minute))


def test_the_lifetime_is_the_recorded_split_of_the_writes_never_a_gap_the_cache_seemed_to_survive() -> None:
    # Issue 36: a session that wrote no 1-hour entries was given a 1-hour lifetime because a 30-minute gap "kept"
    # the cache, and its misses after idle gaps were then blamed on a changed prefix.
    calls = [
        call(0, 50_000, read=0, created=50_000, minute=0),
        call(1, 51_000, read=49_000, created=1_000, minute=30),  # read back after 30 min: not proof of 1h entries
        call(2, 52_000, read=0, created=52_000, minute=40),
    ]
    reading = read_cache(calls)
    assert reading.lifetime.minutes == 5
    assert "wrote no 1-hour entries" in reading.lifetime.source
    [miss] = reading.misses
    assert (miss.kind, miss.lifetime_minutes) == (EXPIRY, 5)
    assert miss.cause == "idle 10 min > 5 min cache lifetime"


def test_recorded_one_hour_writes_give_a_one_hour_lifetime_and_a_long_gap_is_not_the_cause() -> None:
    calls = [
        long_lived(0, 50_000, read=0, created=50_000, minute=0),
        long_lived(1, 51_000, read=50_000, created=1_000, minute=20),
        long_lived(2, 52_000, read=0, created=52_000, minute=50),
    ]
    reading = read_cache(calls)
    assert reading.lifetime.minutes == 60
    assert "1-hour writes" in reading.lifetime.source
    # Pauses of 20 and 30 minutes are within the hour the entries live: no gap is drawn, as no miss is expiry.
    assert reading.idle_gaps == []
    [miss] = reading.misses
    assert (miss.kind, miss.cause, miss.lifetime_minutes) == (PREFIX_CHANGE, UNEXPLAINED_CAUSE, 60)
    # Past the hour the same miss is expiry, and the gap before it is drawn against the hour.
    calls[2] = long_lived(2, 52_000, read=0, created=52_000, minute=90)
    reading = read_cache(calls)
    [miss] = reading.misses
    assert (miss.kind, miss.cause) == (EXPIRY, "idle 70 min > 60 min cache lifetime")
    assert [(g.call, g.lifetime_minutes, g.minutes) for g in reading.idle_gaps] == [(2, 60, 70)]


def test_a_gap_is_drawn_against_the_lifetime_of_the_writes_before_it() -> None:
    # 5-minute writes first, then mostly 1-hour ones: the same 10-minute pause is a gap before the switch only.
    calls = [
        call(0, 50_000, read=0, created=50_000, minute=0),
        call(1, 51_000, read=50_000, created=1_000, minute=10),
        long_lived(2, 200_000, read=51_000, created=149_000, minute=11),
        long_lived(3, 201_000, read=200_000, created=1_000, minute=21),
    ]
    assert [(g.call, g.lifetime_minutes) for g in read_cache(calls).idle_gaps] == [(1, 5)]


def test_idle_minutes_round_half_up_and_every_text_says_the_same() -> None:
    assert [idle_minutes(s) for s in (60_043, 60_000, 329, 330, 301)] == [1001, 1000, 5, 6, 5]
    calls = [
        call(0, 50_000, read=40_000, minute=0),
        cached(1, 52_000, read=0, created=52_000, timestamp="2026-01-02T02:40:43Z"),  # 60,043 s later
    ]
    reading = read_cache(calls)
    assert [g.minutes for g in reading.idle_gaps] == [1001]
    assert reading.misses[0].cause == "idle 1,001 min > 5 min cache lifetime"


def test_a_model_switch_is_its_own_cause() -> None:
    before = call(0, 50_000, read=45_000, minute=0)
    after = dataclasses.replace(call(1, 51_000, read=0, created=51_000, minute=1), model="claude-haiku-4-5")
    [miss] = read_cache([dataclasses.replace(before, model="claude-opus-4-5"), after]).misses
    assert miss.kind == MODEL_SWITCH
    assert "claude-opus-4-5 to claude-haiku-4-5" in miss.cause


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
