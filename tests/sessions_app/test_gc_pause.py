"""The cyclic collector is paused only while an analysis runs, and restored as it was found."""

from __future__ import annotations

import gc
import threading

import pytest

from sessions_app.selectors import cycle_collection_paused


def test_paused_inside_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cycle_collection_paused():
        assert not gc.isenabled()
        raise RuntimeError("analysis failed")
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_restore_once_all_end() -> None:
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with cycle_collection_paused():
            inside.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(5)
    with cycle_collection_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other analysis still runs
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_collection_switched_off_by_someone_else_stays_off() -> None:
    gc.disable()
    try:
        with cycle_collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
