"""The cyclic collector is paused only while an analysis runs, and restored as it was found."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from compaction.strategies import registry
from compaction.strategies.registry import STRATEGY_NAMES
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors.conversation import cycle_collection_paused
from tests.helpers.claude_code_lines import small_session


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


@pytest.mark.django_db
@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_what_a_replay_built_is_freed_before_the_collector_resumes(name, tmp_path, monkeypatch) -> None:
    """The first collection after a pause walks every object made during it that is still alive: a strategy keeps
    what its replay built (KHAELOR and klaude-code their own copy of every record), so it must be gone by then."""
    imported = services.import_file(path=small_session(tmp_path))
    assert isinstance(imported, services.FileImport) and imported.session is not None
    session = models.Session.objects.get(pk=imported.session)
    built: list[weakref.ref[object]] = []
    build = registry.build_strategy

    def recording_build(*args: Any, **kwargs: Any) -> Any:
        strategy = build(*args, **kwargs)
        built.append(weakref.ref(strategy))
        return strategy

    alive_when_resumed: list[list[bool]] = []
    pause = conversation_selectors.cycle_collection_paused

    @contextmanager
    def watched_pause() -> Iterator[None]:
        with pause():
            yield
            alive_when_resumed.append([ref() is not None for ref in built])

    monkeypatch.setattr(registry, "build_strategy", recording_build)
    monkeypatch.setattr(diagnosis_selectors, "cycle_collection_paused", watched_pause)
    result = diagnosis_selectors.replays(session=session, requested=[(name, {})])[name]
    assert "error" not in result and result["points"]
    assert len(built) == 1 and alive_when_resumed[-1] == [False]
