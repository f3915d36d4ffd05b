"""Who may do what to a run: a verdict is its reviewer's to change (or staff's); a run is its starter's to retry."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app import models, run_services
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import finished_run, imported, queued_run

pytestmark = pytest.mark.django_db
Run = models.CompactionRun


def _client(django_user_model, name: str, *, staff: bool = False) -> tuple[Client, object]:
    user = django_user_model.objects.create_user(username=name, password=f"pw-{name}", is_staff=staff)
    client = Client()
    client.force_login(user)
    return client, user


def test_a_reviewer_cannot_rewrite_someone_elses_verdict_but_staff_can(client_in, tmp_path, offline, django_user_model):
    run = finished_run(imported(cc_session(tmp_path)))
    assert client_in.post(f"/runs/{run.pk}/review/?format=json", {"decision": "accepted"}).status_code == 200
    other, _ = _client(django_user_model, "other")
    refused = other.post(f"/runs/{run.pk}/review/?format=json", {"decision": "rejected", "comment": "no"})
    assert refused.status_code == 403 and "rev's" in refused.json()["error"]
    run.refresh_from_db()
    assert run.review == Run.Review.ACCEPTED and run.verdicts.count() == 1
    # The page says why, and keeps the verdict.
    page = other.post(f"/runs/{run.pk}/review/", {"decision": "rejected", "comment": "no"}, follow=True)
    assert "only they, or staff, can change it" in page.content.decode()
    # The reviewer may change their own mind; staff may overrule; the history keeps all of it.
    assert (
        client_in.post(
            f"/runs/{run.pk}/review/?format=json", {"decision": "rejected", "comment": "lost a file"}
        ).status_code
        == 200
    )
    staff, _ = _client(django_user_model, "lead", staff=True)
    assert staff.post(f"/runs/{run.pk}/review/?format=json", {"decision": "accepted"}).status_code == 200
    run.refresh_from_db()
    assert run.review == Run.Review.ACCEPTED and run.reviewed_by.get_username() == "lead"
    assert [v.decision for v in run.verdicts.order_by("at", "id")] == ["accepted", "rejected", "accepted"]


def test_only_the_starter_or_staff_can_retry(tmp_path, offline, reviewer, django_user_model):
    run = queued_run(imported(cc_session(tmp_path)))
    Run.objects.filter(pk=run.pk).update(started_by=reviewer, status=Run.Status.FAILED, error="boom")
    other, other_user = _client(django_user_model, "other")
    refused = other.post(f"/runs/{run.pk}/retry/?format=json")
    assert refused.status_code == 403 and "started this run" in refused.json()["error"]
    assert Run.objects.count() == 1
    run.refresh_from_db()
    with pytest.raises(run_services.RunForbidden):
        run_services.retry_run(run=run, user=other_user)
    again = run_services.retry_run(run=run, user=reviewer)
    assert again.status == Run.Status.QUEUED and again.pk != run.pk
    staff, _ = _client(django_user_model, "lead", staff=True)
    assert staff.post(f"/runs/{run.pk}/retry/?format=json").status_code == 201
