"""The cyclic collector is paused only while an import runs, restored as it was found, and never by a request."""

from __future__ import annotations

import gc
import threading

import pytest

from compaction.strategies.registry import STRATEGY_NAMES
from compaction.transcript import MAIN
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import previews
from sessions_app.services import cycle_collection_paused
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
def test_no_read_a_request_makes_switches_the_collector(tmp_path, monkeypatch) -> None:
    """The collector is the whole process's: a request that paused it would pause it for every other request. The
    analyses a page asks for (the chain read, the diagnosis, the layers, a preview, each strategy's replay) leave
    it alone."""
    imported = services.import_file(path=small_session(tmp_path))
    assert isinstance(imported, services.FileImport) and imported.session is not None
    services.estimate_session_tokens(session_id=imported.session)
    session = models.Session.objects.get(pk=imported.session)
    switches: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: switches.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: switches.append("enable"))
    messages = conversation_selectors.conversation(session=session, agent=MAIN)
    report = diagnosis_selectors.compute_diagnosis(session=session)
    layers = diagnosis_selectors.layers_before(session=session, call=2)
    preview = previews.build_preview(session=session, strategy=previews.default_strategy(session), overrides={})
    replayed = diagnosis_selectors.replays(session=session, requested=[(name, {}) for name in STRATEGY_NAMES])
    assert messages and report["verdict"] and layers is not None and not preview.error
    assert all("error" not in result and result["points"] for result in replayed.values())
    assert switches == []
