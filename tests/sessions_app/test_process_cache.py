"""The one in-process cache (sessions_app/process_cache.py): bounded, one computation per key, nothing left behind."""

from __future__ import annotations

import threading
import time

import pytest

from sessions_app.process_cache import ProcessCache


def test_the_least_recently_used_entry_goes_first():
    cache: ProcessCache[str, int] = ProcessCache(max_entries=2)
    cache.get_or_compute("a", lambda: 1)
    cache.get_or_compute("b", lambda: 2)
    assert cache.get_or_compute("a", lambda: -1) == 1  # "a" used again: "b" is now the oldest
    cache.get_or_compute("c", lambda: 3)
    assert len(cache) == 2
    assert cache.get_or_compute("a", lambda: -1) == 1
    assert cache.get_or_compute("b", lambda: -2) == -2  # dropped, computed again


def test_entries_heavier_than_the_weight_bound_go_oldest_first_and_the_newest_stays():
    cache: ProcessCache[str, bytes] = ProcessCache(max_entries=8, max_weight=10, weigh=len)
    cache.get_or_compute("a", lambda: b"1234")
    cache.get_or_compute("b", lambda: b"1234")
    assert (len(cache), cache.weight) == (2, 8)
    cache.get_or_compute("c", lambda: b"1234")  # 12 > 10: "a" goes
    assert (len(cache), cache.weight) == (2, 8)
    assert cache.get_or_compute("a", lambda: b"new") == b"new"  # computed again; "b" goes (3 + 4 + 4 > 10)
    assert cache.get_or_compute("huge", lambda: b"x" * 50) == b"x" * 50  # heavier than the bound: kept alone
    assert (len(cache), cache.weight) == (1, 50)
    cache.clear()
    assert cache.weight == 0


def test_room_is_made_before_a_heavy_value_is_computed():
    cache: ProcessCache[str, bytes] = ProcessCache(max_entries=8, max_weight=10, weigh=len)
    cache.get_or_compute("a", lambda: b"1234")
    cache.get_or_compute("b", lambda: b"1234")
    cache.make_room(2)  # 8 + 2 fits
    assert len(cache) == 2
    cache.make_room(6)  # 8 + 6 does not: "a", the least recently used, goes
    assert (len(cache), cache.weight) == (1, 4)
    assert cache.get_or_compute("b", lambda: b"") == b"1234"


def test_an_entry_older_than_its_age_limit_is_computed_again():
    cache: ProcessCache[str, int] = ProcessCache(max_entries=4)
    cache.get_or_compute("a", lambda: 1, max_age_s=0.05)
    assert cache.get_or_compute("a", lambda: 2) == 1
    time.sleep(0.06)
    assert cache.get_or_compute("a", lambda: 3) == 3


def test_a_value_refused_or_a_computation_that_raises_leaves_nothing():
    cache: ProcessCache[str, int] = ProcessCache(max_entries=4)
    assert cache.get_or_compute("a", lambda: 1, keep=lambda value: False) == 1
    with pytest.raises(ZeroDivisionError):
        cache.get_or_compute("b", lambda: 1 // 0)
    assert len(cache) == 0
    assert cache.computing() == 0


def test_requests_for_one_key_wait_for_one_computation():
    cache: ProcessCache[str, int] = ProcessCache(max_entries=4)
    started = threading.Event()
    release = threading.Event()
    calls = []

    def slow() -> int:
        calls.append(1)
        started.set()
        release.wait(5)
        return 42

    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(cache.get_or_compute("k", slow)))
    first.start()
    started.wait(5)
    waiters = [threading.Thread(target=lambda: results.append(cache.get_or_compute("k", slow))) for _ in range(4)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    assert cache.computing() == 1  # one key in flight, however many wait for it
    release.set()
    for thread in [first, *waiters]:
        thread.join(5)
    assert results == [42] * 5
    assert len(calls) == 1
    assert cache.computing() == 0
