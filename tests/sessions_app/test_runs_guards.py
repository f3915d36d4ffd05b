"""Guards around runs: what the reviewer saw is what runs; verdicts are not overwritten; export only where it can."""

from __future__ import annotations

import pytest

from sessions_app import models, run_services
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import finished_run, imported, queued_run

pytestmark = pytest.mark.django_db
Run = models.CompactionRun


def test_run_refused_when_the_session_changed_since_the_preview(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    form = {"strategy": "claude-code", "cut_start": "1", "cut_end": "3", "transcript_sha256": "0" * 64}
    response = client_in.post(f"/sessions/{session.pk}/runs/?format=json", form)
    assert response.status_code == 400 and "changed since this preview" in response.json()["error"]
    assert not Run.objects.exists()


def test_a_run_the_sweep_declared_dead_stays_failed(tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = queued_run(session)
    assert run_services._claim(run.pk)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="swept")
    run_services._fail(run.pk, "late failure", 0.0)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error == "swept"


def test_export_is_offered_only_for_the_sessions_own_agent(client_in, tmp_path, offline, reviewer):
    session = imported(cc_session(tmp_path))
    own = finished_run(session)
    foreign = finished_run(session, strategy="klaude-code", cut_end=3)
    for run in (own, foreign):
        run_services.review_run(run=run, user=reviewer, decision="accepted", comment="ok")
    assert 'id="export-link"' in client_in.get(f"/runs/{own.pk}/").content.decode()
    assert 'id="export-link"' not in client_in.get(f"/runs/{foreign.pk}/").content.decode()
