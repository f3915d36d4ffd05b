"""A run can be cancelled from its page (queued or mid-stream), and an API that trickles cannot hold an attempt
past its deadline (a setting)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.test import Client

from compaction.summarize import AnthropicSummarizer, SummaryFailed
from sessions_app import models, run_services
from tests.anthropic_server import ScriptedServer, slow
from tests.compaction.summary_requests import make_request
from tests.conftest import TEST_KEY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported, queued_run

Run = models.CompactionRun


@pytest.mark.django_db
def test_a_queued_run_is_cancelled_from_its_page_and_the_worker_leaves_it(client_in, tmp_path, anthropic_api):
    run = queued_run(imported(cc_session(tmp_path)))
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert f'action="/runs/{run.pk}/cancel/"' in page
    response = client_in.post(f"/runs/{run.pk}/cancel/")
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.error == "Cancelled by rev." and run.finished
    assert run_services.execute_run(run_id=run.pk).status == Run.Status.CANCELLED  # not claimed
    assert anthropic_api.requests == []
    assert client_in.post(f"/runs/{run.pk}/cancel/?format=json").status_code == 409  # finished already


@pytest.mark.django_db
def test_only_the_starter_or_staff_can_cancel(client_in, tmp_path, reviewer, django_user_model, anthropic_api):
    run = queued_run(imported(cc_session(tmp_path)))
    Run.objects.filter(pk=run.pk).update(started_by=reviewer)
    other = Client()
    other.force_login(django_user_model.objects.create_user(username="other", password="pw-other"))
    assert other.post(f"/runs/{run.pk}/cancel/?format=json").status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_running_run_stops_streaming_when_cancelled(tmp_path, anthropic_api):
    run = queued_run(imported(cc_session(tmp_path)))
    anthropic_api.script(slow("word " * 400, chunk_delay=0.05))  # about 20 s if left to finish
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["run"] = run_services.execute_run(run_id=run.pk, heartbeat_every=0.1)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    started = time.monotonic()
    worker.start()
    while not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exclude(progress_text="").exists():
        assert time.monotonic() - started < 20, "the run never started streaming"
        time.sleep(0.05)
    run_services.cancel_run(run=Run.objects.get(pk=run.pk), user=None)
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert time.monotonic() - started < 10  # stopped long before the stream's end
    final = Run.objects.get(pk=run.pk)
    assert final.status == Run.Status.CANCELLED and final.error == "Cancelled by someone."
    assert final.summary == ""


def test_an_attempt_past_its_deadline_is_cut_and_retried(anthropic_api: ScriptedServer) -> None:
    anthropic_api.script(slow("word " * 200, chunk_delay=0.05), slow("word " * 200, chunk_delay=0.05))
    summarizer = AnthropicSummarizer(
        api_key=TEST_KEY,
        base_url=anthropic_api.url,
        attempt_deadline_s=1.0,
        max_attempts=2,
        sleep=lambda _: None,
        jitter=False,
    )
    started = time.monotonic()
    with summarizer, pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request())
    assert "took longer than its 1 s deadline" in str(failed.value)
    assert failed.value.attempts == 2 and len(anthropic_api.requests) == 2
    assert time.monotonic() - started < 6  # two attempts of about a second, not two 10 s streams
