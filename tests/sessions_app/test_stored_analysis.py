"""The worker stores a session's diagnosis with its analysis, so the first request of a process reads it instead
of reading the whole session back and computing it; an analysis of a version the session has grown past is not used."""

from __future__ import annotations

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import models, selectors, services
from tests.sessions_app.test_import import assistant, small_session, user

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
    computed = orjson.loads(orjson.dumps(selectors.compute_diagnosis(session=session), default=str))
    assert stored.diagnosis is not None and orjson.loads(bytes(stored.diagnosis)) == computed
    assert stored.verdict == computed["verdict"]
    selectors._DIAGNOSES.clear()  # as in a process just started
    with CaptureQueriesContext(connection) as queries:
        report = selectors.diagnosis(session=session)
    assert report == computed
    assert len(queries.captured_queries) == 1  # the stored row; computing reads the calls and the messages


def test_a_diagnosis_stored_for_a_session_that_grew_since_is_not_used(tmp_path) -> None:
    path = small_session(tmp_path)
    session = _analysed(path)
    with path.open("ab") as grown:  # the agent wrote on: an incremental import adds the new lines
        grown.write((user("u3", "a2", "and more") + assistant("a3", "u3", "msg_3", "done", ctx=2000)).encode())
    services.import_file(path=path)
    session = models.Session.objects.get(pk=session.pk)
    selectors._DIAGNOSES.clear()
    with CaptureQueriesContext(connection) as queries:
        report = selectors.diagnosis(session=session)
    assert len(queries.captured_queries) > 1
    assert report["verdict"] == selectors.compute_diagnosis(session=session)["verdict"]
    assert not models.SessionAnalysis.objects.filter(session=session).exists()  # the import dropped the old one
