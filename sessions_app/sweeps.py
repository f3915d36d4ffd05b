"""What a dead worker leaves behind, swept by every live worker on a schedule, not only when a page opens.

A worker (``manage.py db_worker``, ``sessions_app/management/commands/db_worker.py``) writes a beat every
``WORKER_HEARTBEAT_S`` and runs ``sweep_all`` every ``WORKER_SWEEP_EVERY_S``. Something silent for
``STALE_AFTER_S`` is taken for dead:

- a task row RUNNING on a worker that no longer beats is marked FAILED, saying why;
- a compaction run whose worker stopped beating is failed with the reason (``run_services``); a queued run
  whose task is gone is queued again;
- an upload import whose worker died is queued again (importing is idempotent), up to a few attempts;
- a settings simulation whose worker died is queued again (the sessions it replayed stay), up to a few attempts;
- a session whose token estimates never finished gets its estimate task again;
- a session with estimates but no analysis of its current version (``SessionAnalysis``), or one without its stored
  main chain, gets its analysis task;
- usage cells split at a long-context price tier the prices no longer have are made again.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F, Q
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions_app import judge_services, models, run_services, services, simulations, uploads, usage_cells
from sessions_app.selectors import usage as usage_selectors
from sessions_app.task_queue import pending_task_args

logger = logging.getLogger(__name__)

UPLOAD_ATTEMPTS = 3  # an upload import whose worker died this often is failed, not queued again
SIMULATION_ATTEMPTS = 3  # a settings simulation whose worker died this often is failed, not queued again
ESTIMATE_ATTEMPTS = 3  # token estimates of a session that failed this often are not enqueued again


class WorkerDied(Exception):
    """Recorded on a task row whose worker stopped beating while running it."""


def beat(*, worker_id: str) -> None:
    """This worker is alive (``db_worker`` calls it every ``WORKER_HEARTBEAT_S``)."""
    models.WorkerBeat.objects.update_or_create(
        worker_id=worker_id,
        defaults={"beat_at": timezone.now(), "host": socket.gethostname()[:255], "pid": os.getpid()},
    )


def retire(*, worker_id: str) -> None:
    """A worker that stops cleanly says so, so its tasks are not waited for."""
    models.WorkerBeat.objects.filter(worker_id=worker_id).delete()


def live_workers(*, now: datetime | None = None) -> list[models.WorkerBeat]:
    now = now or timezone.now()
    return list(models.WorkerBeat.objects.filter(beat_at__gte=now - run_services.stale_after()).order_by("worker_id"))


@dataclass(slots=True)
class SweepReport:
    dead_tasks: int = 0
    failed_runs: int = 0
    failed_judges: int = 0
    requeued_runs: int = 0
    requeued_uploads: int = 0
    failed_uploads: int = 0
    requeued_simulations: int = 0
    failed_simulations: int = 0
    estimates_enqueued: int = 0
    analyses_enqueued: int = 0
    usage_cells_redone: int = 0

    def __bool__(self) -> bool:
        return any(
            (
                self.dead_tasks,
                self.failed_runs,
                self.failed_judges,
                self.requeued_runs,
                self.requeued_uploads,
                self.failed_uploads,
                self.requeued_simulations,
                self.failed_simulations,
                self.estimates_enqueued,
                self.analyses_enqueued,
                self.usage_cells_redone,
            )
        )


def sweep_all(*, now: datetime | None = None) -> SweepReport:
    now = now or timezone.now()
    report = SweepReport()
    report.dead_tasks = sweep_dead_tasks(now=now)
    report.failed_runs = run_services.sweep_stale_runs(older_than=run_services.stale_after())
    report.failed_judges = judge_services.sweep_stale_judges(now=now)
    report.requeued_runs = requeue_orphaned_runs(now=now)
    report.requeued_uploads, report.failed_uploads = sweep_stale_uploads(now=now)
    report.requeued_simulations, report.failed_simulations = sweep_stale_simulations(now=now)
    report.estimates_enqueued = enqueue_missing_estimates(now=now)
    report.analyses_enqueued = enqueue_missing_analyses(now=now)
    report.usage_cells_redone = rebuild_stale_usage_cells()
    if report:
        logger.warning("sweep: %s", report)
    return report


def _seen(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "never"


def sweep_dead_tasks(*, now: datetime) -> int:
    """Task rows RUNNING on a worker that stopped beating: FAILED, with the reason as their traceback."""
    limit = now - run_services.stale_after()
    live = {w.worker_id for w in live_workers(now=now)}
    count = 0
    for task in DBTaskResult.objects.filter(status=TaskResultStatus.RUNNING, started_at__lt=limit):
        worker = task.worker_ids[-1] if task.worker_ids else ""
        if worker in live:
            continue
        last = models.WorkerBeat.objects.filter(worker_id=worker).values_list("beat_at", flat=True).first()
        count += DBTaskResult.objects.filter(pk=task.pk, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.FAILED,
            finished_at=now,
            exception_class_path=f"{WorkerDied.__module__}.{WorkerDied.__qualname__}",
            traceback=f"The worker {worker or '(unknown)'} running this task stopped (last beat {_seen(last)}); "
            "it was probably killed. The sweep redoes what can be redone.",
        )
    models.WorkerBeat.objects.filter(beat_at__lt=now - 10 * run_services.stale_after()).delete()  # long-dead workers
    return count


def requeue_orphaned_runs(*, now: datetime) -> int:
    """Queued runs with no task left to run them (lost while the database was locked, say): enqueued again."""
    pending = pending_task_args(run_services.run_compaction_task.module_path)
    count = 0
    stale = models.CompactionRun.objects.filter(
        status=models.CompactionRun.Status.QUEUED, created_at__lt=now - run_services.stale_after()
    )
    for run in stale.only("id"):
        if run.pk not in pending:
            run_services.enqueue_run(run=run)
            count += 1
    return count


def sweep_stale_jobs(
    *,
    jobs: type[models.BackgroundJob],
    now: datetime,
    task_path: str,
    enqueue: Callable[[int], None],
    attempts: int,
    gave_up: Callable[[models.BackgroundJob, str], str],
    failed: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Jobs (uploads, simulations) whose worker died: queued again (redoing one is harmless), or failed after
    ``attempts`` tries with ``gave_up(job, last sign of life)`` as the error; queued ones whose task row is gone (lost
    while the database was locked, say): enqueued again. Returns (requeued, failed)."""
    limit = now - run_services.stale_after()
    stale = jobs._default_manager.filter(status=jobs.Status.RUNNING).filter(
        Q(heartbeat_at__lt=limit) | Q(heartbeat_at__isnull=True, started_at__lt=limit)
    )
    requeued = given_up = 0
    for job in stale.only("pk", "attempts", "heartbeat_at", "started_at"):
        running = jobs._default_manager.filter(pk=job.pk, status=jobs.Status.RUNNING)
        if job.attempts >= attempts:
            error = gave_up(job, _seen(job.heartbeat_at or job.started_at))
            given_up += running.update(status=jobs.Status.FAILED, error=error, finished_at=now)
            if failed is not None:
                failed(job.pk)
            continue
        if running.update(status=jobs.Status.QUEUED):
            enqueue(job.pk)
            requeued += 1
    pending = pending_task_args(task_path)
    queued = jobs._default_manager.filter(status=jobs.Status.QUEUED, created_at__lt=limit)
    for job_id in queued.values_list("pk", flat=True):
        if job_id not in pending:
            enqueue(job_id)
            requeued += 1
    return requeued, given_up


def sweep_stale_uploads(*, now: datetime) -> tuple[int, int]:
    """Upload imports whose worker died: queued again (importing twice is harmless), or failed after a few tries."""
    return sweep_stale_jobs(
        jobs=models.UploadImport,
        now=now,
        task_path=uploads.import_upload_task.module_path,
        enqueue=lambda pk: uploads.enqueue(upload_id=pk),
        attempts=UPLOAD_ATTEMPTS,
        gave_up=lambda job, last: (
            f"The worker importing this upload stopped {job.attempts} times (last sign of "
            f"life {last}); giving up. Upload the files again in smaller parts."
        ),
        failed=lambda pk: uploads.discard_files(upload_id=pk),
    )


def sweep_stale_simulations(*, now: datetime) -> tuple[int, int]:
    """Settings simulations whose worker died: queued again (the sessions replayed stay), or failed after a few."""
    return sweep_stale_jobs(
        jobs=models.SimulationRun,
        now=now,
        task_path=simulations.simulate_task.module_path,
        enqueue=lambda pk: simulations.enqueue(run_id=pk),
        attempts=SIMULATION_ATTEMPTS,
        gave_up=lambda job, last: (
            f"The worker replaying this simulation stopped {job.attempts} times (last sign of "
            f"life {last}); giving up. Simulate fewer sessions at once (filter by project or agent)."
        ),
    )


def enqueue_missing_estimates(*, now: datetime) -> int:
    """Sessions still without token estimates and no estimate task to come (a killed worker's): enqueue one."""
    pending = pending_task_args(services.estimate_tokens_task.module_path)
    failures: dict[int, int] = {}
    failed = DBTaskResult.objects.filter(
        task_path=services.estimate_tokens_task.module_path, status=TaskResultStatus.FAILED
    )
    for args in failed.values_list("args_kwargs", flat=True):
        if args.get("args"):
            failures[args["args"][0]] = failures.get(args["args"][0], 0) + 1
    waiting = models.Session.objects.filter(estimates_ready=False, updated_at__lt=now - run_services.stale_after())
    count = 0
    for session_id in waiting.values_list("pk", flat=True):
        # A session whose estimate failed a few times for a reason of its own is not retried forever.
        if session_id not in pending and failures.get(session_id, 0) < ESTIMATE_ATTEMPTS:
            services.estimate_tokens_task.enqueue(session_id)
            count += 1
    return count


def enqueue_missing_analyses(*, now: datetime) -> int:
    """Sessions with their estimates but no analysis of this version and none to come: enqueue one.

    A failed analysis is not retried by the sweep (the next import of the session queues it again).
    """
    pending = pending_task_args(services.analyse_session_task.module_path)
    failed = {
        args["args"][0]
        for args in DBTaskResult.objects.filter(
            task_path=services.analyse_session_task.module_path, status=TaskResultStatus.FAILED
        ).values_list("args_kwargs", flat=True)
        if args.get("args")
    }
    waiting = (
        models.Session.objects.filter(estimates_ready=True, updated_at__lt=now - run_services.stale_after())
        .filter(
            Q(analysis__isnull=True)
            | ~Q(analysis__message_count=F("message_count"))
            # An analysis without its main chain: migration 0024 cleared the pickled ones; every analysis stores one.
            | Q(analysis__conversation__isnull=True)
        )
        .values_list("pk", flat=True)
    )
    count = 0
    for session_id in waiting:
        if session_id not in pending and session_id not in failed:
            services.analyse_session_task.enqueue(session_id)
            count += 1
    return count


def rebuild_stale_usage_cells() -> int:
    """Sessions whose usage cells were split at a long-context tier their model's price no longer has (the price
    table or ``MODEL_PRICES`` changed): their cells made again; how many sessions."""
    stale = [
        model
        for model, tier in models.UsageCell.objects.order_by().values_list("model", "tier_start").distinct()
        if usage_selectors.tier_of(usage_selectors.model_price(model)) != tier
    ]
    if not stale:
        return 0
    sessions = models.Session.objects.filter(usage_cells__model__in=stale).distinct().only("pk", "started_at")
    count = 0
    for session in sessions:
        with transaction.atomic():
            usage_cells.keep_usage_cells(session=session)
        count += 1
    return count
