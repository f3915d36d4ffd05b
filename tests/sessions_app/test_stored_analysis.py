"""The worker stores a session's diagnosis after its token estimates, so the first request of a process reads it
instead of reading the whole session back and computing it; a version the session has moved past is not used."""

from __future__ import annotations

import orjson
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import models, selectors, services
from tests.sessions_app.test_import import small_session

pytestmark = pytest.mark.django_db


def _imported(tmp_path) -> models.Session:
    outcome = services.import_file(path=small_session(tmp_path))
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.estimate_session_tokens(session_id=outcome.session)  # what db_worker runs after the import
    return models.Session.objects.get(pk=outcome.session)


def test_the_worker_stores_the_diagnosis_and_a_new_process_reads_it(tmp_path) -> None:
    session = _imported(tmp_path)
    stored = models.AnalysisResult.objects.get(session=session, kind="diagnosis")
    assert stored.version == selectors.session_version(session)
    computed = orjson.loads(orjson.dumps(selectors.compute_diagnosis(session=session)))
    assert orjson.loads(bytes(stored.data)) == computed
    selectors._DIAGNOSES.clear()  # as in a process just started
    with CaptureQueriesContext(connection) as queries:
        report = selectors.diagnosis(session=session)
    assert report == computed
    assert len(queries.captured_queries) == 1  # the stored row; computing reads the calls and the messages


def test_a_diagnosis_stored_for_an_older_version_is_not_used(tmp_path) -> None:
    session = _imported(tmp_path)
    session.title = "renamed"
    session.save()  # every write moves updated_at: the stored report is of another version
    selectors._DIAGNOSES.clear()
    with CaptureQueriesContext(connection) as queries:
        report = selectors.diagnosis(session=session)
    assert len(queries.captured_queries) > 1
    assert orjson.loads(orjson.dumps(report)) == orjson.loads(
        orjson.dumps(selectors.compute_diagnosis(session=session))
    )
