"""The sweep of jobs a dead worker left running (sweeps.sweep_stale_jobs): an upload's import and a settings
simulation are queued again, then failed with the reason after a few tries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app import models, simulations, sweeps
from sessions_app.selectors import simulations as simulation_selectors

pytestmark = pytest.mark.django_db


def _upload() -> models.BackgroundJob:
    return models.UploadImport.objects.create(names="projects.zip")


def _simulation() -> models.BackgroundJob:
    return simulations.create(plan=simulation_selectors.plan(strategy="codex", params={}), filters={})


@pytest.mark.parametrize(
    ("make", "counts", "attempts", "why"),
    [
        (_upload, ("requeued_uploads", "failed_uploads"), sweeps.UPLOAD_ATTEMPTS, "Upload the files again"),
        (_simulation, ("requeued_simulations", "failed_simulations"), sweeps.SIMULATION_ATTEMPTS, "fewer sessions"),
    ],
)
def test_a_dead_workers_job_is_queued_again_then_failed(upload_dir, make, counts, attempts, why) -> None:
    job = make()
    table = type(job)._default_manager
    long_ago = timezone.now() - timedelta(hours=1)
    table.filter(pk=job.pk).update(status="running", started_at=long_ago, heartbeat_at=long_ago, attempts=1)
    requeued, failed = counts
    assert getattr(sweeps.sweep_all(), requeued) == 1
    assert table.get(pk=job.pk).status == "queued"
    assert getattr(sweeps.sweep_all(), requeued) == 0  # its task is queued now
    table.filter(pk=job.pk).update(status="running", attempts=attempts)
    assert getattr(sweeps.sweep_all(), failed) == 1
    gone = table.get(pk=job.pk)
    assert gone.status == "failed" and f"stopped {attempts} times" in gone.error and why in gone.error
