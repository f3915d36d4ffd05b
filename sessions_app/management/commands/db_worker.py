"""``manage.py db_worker``: django-tasks-db's worker, made to survive and to clean up after dead workers.

It replaces django-tasks-db's command of the same name (``sessions_app`` comes first in INSTALLED_APPS) and
adds what that one lacks here:

- a beat thread: every ``WORKER_HEARTBEAT_S`` it records that this worker lives, and every
  ``WORKER_SWEEP_EVERY_S`` it runs ``sweeps.sweep_all`` (dead workers' tasks, runs, uploads, estimates), so
  nothing waits for someone to open a page, and a sweep happens even while this worker runs a long task;
- a SQLite write lock held longer than the busy timeout ("database is locked") no longer ends the
  process: the loop waits and goes on, and a result that could not be recorded is recorded once the lock
  is gone.

The worker does not restart itself after a crash or a kill: ``bin/run`` (or systemd, or any process
supervisor) restarts it; the sweep of the next live worker then settles what the dead one left.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.management.commands import db_worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import is_locked_database_exception

from sessions_app import sweeps

logger = logging.getLogger("django_tasks_db")

LOCK_RETRY_S = 1.0  # wait between attempts while the database stays locked


class SupervisedWorker(db_worker.Worker):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stop = threading.Event()
        self._beats = threading.Thread(target=self._beat_loop, name="worker-beat", daemon=True)

    def run(self) -> None:
        # A --batch run (drain the queue, then exit) is a one-off, not a member of the pool: no beats or sweeps.
        if not self.batch:
            self._beats.start()
        try:
            while True:
                try:
                    super().run()
                    return
                except OperationalError as exc:
                    if not is_locked_database_exception(exc):
                        raise
                    logger.warning("The database is locked (%s); the worker waits and goes on.", exc)
                    close_old_connections()
                    time.sleep(LOCK_RETRY_S)
                    if not self.running:
                        return
        finally:
            if not self.batch:
                self._stop.set()
                self._beats.join(timeout=10)
                with contextlib.suppress(OperationalError):  # then its beat goes stale instead
                    sweeps.retire(worker_id=self.worker_id)

    def run_task(self, db_task_result: DBTaskResult) -> None:
        try:
            super().run_task(db_task_result)
        except OperationalError as exc:
            if not is_locked_database_exception(exc):
                raise
            # The task ran but its result could not be written while another process held the lock.
            self._record_after_lock(db_task_result, exc)

    def _record_after_lock(self, db_task_result: DBTaskResult, exc: OperationalError) -> None:
        while True:
            try:
                DBTaskResult.objects.filter(pk=db_task_result.pk, status=TaskResultStatus.RUNNING).update(
                    status=TaskResultStatus.FAILED,
                    finished_at=timezone.now(),
                    exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                    traceback=f"The task's result could not be recorded: {exc}. What the task changed is kept; "
                    "the sweep redoes what must be redone.",
                )
                return
            except OperationalError as again:
                if not is_locked_database_exception(again):
                    raise
                close_old_connections()
                time.sleep(LOCK_RETRY_S)

    def _beat_loop(self) -> None:
        every = float(settings.WORKER_HEARTBEAT_S)
        sweep_every = float(settings.WORKER_SWEEP_EVERY_S)
        next_sweep = 0.0  # sweep once at start: a worker restarted after a crash settles what it left
        try:
            while not self._stop.is_set():
                try:
                    sweeps.beat(worker_id=self.worker_id)
                    if time.monotonic() >= next_sweep:
                        sweeps.sweep_all()
                        next_sweep = time.monotonic() + sweep_every
                except OperationalError as exc:  # locked, or the database restarting: try again next beat
                    logger.warning("worker beat or sweep failed: %s", exc)
                    close_old_connections()
                except Exception:
                    logger.exception("worker sweep failed")
                self._stop.wait(every)
        finally:
            connection.close()  # this thread's own connection


class Command(db_worker.Command):
    help = "Run the background worker: tasks from the database queue, plus beats and sweeps of dead workers' work."

    def handle(  # type: ignore[override]
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        reload: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        **options: Any,
    ) -> None:
        self.configure_logging(verbosity)
        worker = SupervisedWorker(
            queue_names=queue_name.split(","),
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=exclude_queues.split(",") if exclude_queues else [],
        )
        if reload and not batch:
            import os

            from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader

            if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                worker.configure_signals()  # only the reloader's child runs tasks
            run_with_reloader(worker.run)
            return
        worker.configure_signals()
        worker.run()
