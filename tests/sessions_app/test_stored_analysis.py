"""The worker stores a session's diagnosis with its analysis, so the first request of a process reads it instead
of reading the whole session back and computing it, and the main chain as a page reads it back; an analysis of a
version the session has grown past is not used."""

from __future__ import annotations

import pickle
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
import zstandard
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from compaction.transcript import (
    CONVERSATION_LAYOUT,
    MAIN,
    Block,
    Message,
    Usage,
    conversation_from_json,
    conversation_to_json,
)
from sessions_app import models, services, sweeps
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import assistant, small_session, user

pytestmark = pytest.mark.django_db


def _analysed(path) -> models.Session:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    # What db_worker runs after an import: the estimates, then the analysis.
    services.estimate_session_tokens(session_id=outcome.session)
    services.analyse_session(session_id=outcome.session)
    return models.Session.objects.get(pk=outcome.session)


def test_the_worker_stores_the_diagnosis_and_a_new_process_reads_it(tmp_path) -> None:
    session = _analysed(small_session(tmp_path))
    stored = models.SessionAnalysis.objects.get(session=session)
    computed = orjson.loads(orjson.dumps(diagnosis_selectors.compute_diagnosis(session=session), default=str))
    assert stored.diagnosis is not None and orjson.loads(bytes(stored.diagnosis)) == computed
    assert stored.verdict == computed["verdict"]
    diagnosis_selectors._DIAGNOSES.clear()  # as in a process just started
    with CaptureQueriesContext(connection) as queries:
        report = diagnosis_selectors.diagnosis(session=session)
    assert report == computed
    assert len(queries.captured_queries) == 1  # the stored row; computing reads the calls and the messages


def test_a_diagnosis_stored_for_a_session_that_grew_since_is_not_used(tmp_path) -> None:
    path = small_session(tmp_path)
    session = _analysed(path)
    with path.open("ab") as grown:  # the agent wrote on: an incremental import adds the new lines
        grown.write((user("u3", "a2", "and more") + assistant("a3", "u3", "msg_3", "done", ctx=2000)).encode())
    services.import_file(path=path)
    session = models.Session.objects.get(pk=session.pk)
    diagnosis_selectors._DIAGNOSES.clear()
    with CaptureQueriesContext(connection) as queries:
        report = diagnosis_selectors.diagnosis(session=session)
    assert len(queries.captured_queries) > 1
    assert report["verdict"] == diagnosis_selectors.compute_diagnosis(session=session)["verdict"]
    assert not models.SessionAnalysis.objects.filter(session=session).exists()  # the import dropped the old one


def _read_back(session: models.Session) -> list:
    """The main chain as a process with nothing cached reads it (the stored snapshot when there is one)."""
    conversation_selectors._CONVERSATIONS.clear()
    return conversation_selectors.conversation(session=session, agent=MAIN)


def test_the_stored_main_chain_is_the_one_read_from_the_rows_on_every_shared_sample() -> None:
    report = services.import_paths(
        paths=[CLAUDE_SAMPLES, KLAUDE_SAMPLES / "dot-klaude", KHAELOR_SAMPLES, CODEX_SAMPLES]
    )
    assert report.rejected == []
    checked = 0
    for session in models.Session.objects.order_by("id"):
        services.estimate_session_tokens(session_id=session.pk)
        services.analyse_session(session_id=session.pk)
        session.refresh_from_db()
        stored = conversation_selectors.stored_conversation(session=session)
        assert stored is not None, session.pk
        assert stored == conversation_selectors._read_conversation(session=session, agent=MAIN), session.pk
        checked += bool(stored)
    assert checked > 20


def test_a_first_read_takes_the_stored_main_chain_in_one_query(tmp_path) -> None:
    session = _analysed(small_session(tmp_path))
    with CaptureQueriesContext(connection) as queries:
        messages = _read_back(session)
    assert len(queries.captured_queries) == 1  # the analysis row; the rows take two (the calls, the records)
    assert messages == conversation_selectors._read_conversation(session=session, agent=MAIN) != []


def test_a_main_chain_stored_for_a_session_that_grew_since_is_not_used(tmp_path) -> None:
    path = small_session(tmp_path)
    session = _analysed(path)
    before = len(_read_back(session))
    with path.open("ab") as grown:
        grown.write((user("u3", "a2", "and more") + assistant("a3", "u3", "msg_3", "done", ctx=2000)).encode())
    services.import_file(path=path)
    session = models.Session.objects.get(pk=session.pk)
    assert conversation_selectors.stored_conversation(session=session) is None
    after = _read_back(session)
    assert len(after) == before + 2 and after[-1].text == "done"  # the new lines are there
    # An analysis row of another version, left by a worker that lost a race, is not taken either.
    services.analyse_session(session_id=session.pk)
    models.SessionAnalysis.objects.filter(session=session).update(message_count=1)
    assert conversation_selectors.stored_conversation(session=session) is None


class _Touches:
    """Stands for any callable a pickle could name: unpickling it would call it (here: make a file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_main_chain_stored_as_a_pickle_is_never_unpickled_and_is_read_from_the_rows(tmp_path, caplog) -> None:
    session = _analysed(small_session(tmp_path))
    marker = tmp_path / "ran"
    pickled = zstandard.ZstdCompressor().compress(pickle.dumps([_Touches(marker)]))
    models.SessionAnalysis.objects.filter(session=session).update(conversation=pickled)
    assert conversation_selectors.stored_conversation(session=session) is None
    assert not marker.exists()
    assert "does not load" in caplog.text
    assert _read_back(session) == conversation_selectors._read_conversation(session=session, agent=MAIN) != []


def test_a_main_chain_stored_in_the_pickled_format_before_json_is_not_loaded(tmp_path) -> None:
    session = _analysed(small_session(tmp_path))
    rows = conversation_selectors._read_conversation(session=session, agent=MAIN)
    earlier = zstandard.ZstdCompressor(level=1).compress(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
    models.SessionAnalysis.objects.filter(session=session).update(conversation=earlier)
    assert conversation_selectors.stored_conversation(session=session) is None
    assert _read_back(session) == rows != []


def _compressed_json(data: object) -> bytes:
    return zstandard.ZstdCompressor().compress(orjson.dumps(data))


@pytest.mark.parametrize(
    "blob",
    [
        pytest.param(lambda: _compressed_json({"layout": CONVERSATION_LAYOUT + 1, "messages": []}), id="later layout"),
        pytest.param(lambda: _compressed_json([{"line": 1}]), id="no layout"),
        pytest.param(lambda: _compressed_json({"layout": CONVERSATION_LAYOUT, "messages": [[1, 2]]}), id="not records"),
        pytest.param(lambda: zstandard.ZstdCompressor().compress(b"{not json"), id="not JSON"),
        pytest.param(lambda: b"not zstd at all", id="not compressed"),
    ],
)
def test_a_stored_main_chain_that_does_not_load_is_read_from_the_rows(tmp_path, caplog, blob) -> None:
    session = _analysed(small_session(tmp_path))
    models.SessionAnalysis.objects.filter(session=session).update(conversation=blob())
    assert conversation_selectors.stored_conversation(session=session) is None
    assert "does not load" in caplog.text
    assert _read_back(session) == conversation_selectors._read_conversation(session=session, agent=MAIN) != []


def test_a_stored_main_chain_is_compressed_json_of_every_field() -> None:
    """What the worker stores is the records' JSON (compaction.transcript; its test generates every field)."""
    message = Message(
        line=7,
        role="assistant",
        kind="assistant",
        agent="sub",
        blocks=[Block("tool_use", "t", "id", "Read", {"a": [1]}, is_error=True, media_type="m"), Block("text", "x")],
        uuid="u",
        parent_uuid="p",
        timestamp="2025-01-01T00:00:00Z",
        model="claude",
        call_key="k",
        usage=Usage(1, 2, 3, 4, 5),
        raw_type="assistant",
        data={"d": 1},
        raw="{}",
    )
    stored = orjson.loads(zstandard.ZstdDecompressor().decompress(conversation_selectors.dump_conversation([message])))
    assert stored == conversation_to_json([message]) and stored["layout"] == CONVERSATION_LAYOUT
    assert conversation_from_json(stored) == [message]


@pytest.mark.django_db(transaction=True)
def test_migration_0024_clears_the_pickled_main_chains_and_the_sweep_analyses_them_again(tmp_path, settings) -> None:
    settings.STALE_AFTER_S = 60
    session = _analysed(small_session(tmp_path))
    kept = models.SessionAnalysis.objects.get(session=session)
    pickled = zstandard.ZstdCompressor().compress(pickle.dumps(["a pickle"]))
    models.SessionAnalysis.objects.filter(pk=kept.pk).update(conversation=pickled)
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0023_tasks_beside_their_work")])
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0024_stored_main_chain_as_json")])
    cleared = models.SessionAnalysis.objects.get(pk=kept.pk)
    assert cleared.conversation is None
    # The rest of the analysis stays: the overview and the diagnosis read it while the sweep has it computed again.
    assert cleared.diagnosis is not None and kept.diagnosis is not None
    assert (cleared.message_count, cleared.verdict, bytes(cleared.diagnosis)) == (
        kept.message_count,
        kept.verdict,
        bytes(kept.diagnosis),
    )
    # Today's code (the sweep) runs on today's schema: the later migrations, as a deployment runs them.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("sessions_app"))
    long_ago = timezone.now() - timedelta(minutes=5)
    models.Session.objects.filter(pk=session.pk).update(updated_at=long_ago)
    DBTaskResult.objects.all().delete()
    assert sweeps.sweep_all().analyses_enqueued == 1
    DBTaskResult.objects.all().delete()
    services.analyse_session(session_id=session.pk)
    models.Session.objects.filter(pk=session.pk).update(updated_at=long_ago)
    assert sweeps.sweep_all().analyses_enqueued == 0  # stored again, as JSON
    session.refresh_from_db()
    assert conversation_selectors.stored_conversation(session=session) == conversation_selectors._read_conversation(
        session=session, agent=MAIN
    )
