"""Workers that recover: real ``manage.py db_worker`` processes are killed or locked out, and nobody opens a page.

The worker's clocks (beat, sweep, staleness) and SQLite's busy timeout are settings; these tests shorten them
so CI stays fast. What is tested is the behaviour itself: a run left by a killed worker is failed (with the
reason) by the next live worker's scheduled sweep, its task row too, and a write lock held longer than the busy
timeout ("40 s against 30 s", here 4 s against 1 s) leaves the worker alive to run the task afterwards.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.tasks import TaskResultStatus
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from sessions_app import models, run_services, services, sweeps
from sessions_app.selectors import previews as preview_selectors
from tests.anthropic_server import slow
from tests.conftest import TEST_KEY
from tests.helpers.claude_code_lines import cc_session, small_session
from tests.helpers.worker import SETUP, manage, worker_database_url

REPO = Path(__file__).resolve().parents[2]
Run = models.CompactionRun
TASKS = DBTaskResult._meta.db_table
RUN_TASK = run_services.run_compaction_task.module_path
FAST_CLOCKS = {"STALE_AFTER_S": "2", "WORKER_HEARTBEAT_S": "0.3", "WORKER_SWEEP_EVERY_S": "0.5"}


def _query(db_url: str, sql: str, *params: str | int) -> list[tuple]:
    """Read the worker's database from outside Django (on SQLite the test's own connection is elsewhere)."""
    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30) as db:
            return db.execute(sql, params).fetchall()
    with connection.cursor() as cursor:
        cursor.execute(sql.replace("?", "%s"), params)
        return cursor.fetchall()


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.1"],
        cwd=REPO,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


def _stop(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is None:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_killed_workers_run_is_failed_by_the_next_workers_sweep(anthropic_api, tmp_path):
    db_url = worker_database_url(tmp_path)
    env = {
        **os.environ,
        **FAST_CLOCKS,
        "DATABASE_URL": db_url,
        "SESSION_INSPECTOR_VAR": str(tmp_path / "var"),
        "ANTHROPIC_API_KEY": TEST_KEY,
        "ANTHROPIC_BASE_URL": anthropic_api.url,
        "PYTHONUNBUFFERED": "1",
    }
    if db_url.startswith("sqlite"):
        manage(env, "migrate", "--noinput")
    run_id = int(manage(env, "shell", "-c", SETUP.format(path=str(cc_session(tmp_path)))).split()[-1])
    anthropic_api.script(slow("word " * 600, chunk_delay=0.05))  # still streaming when the worker is killed

    log = tmp_path / "worker.log"
    first = _worker(env, log)
    try:
        deadline = time.monotonic() + 90
        while (
            _query(db_url, "SELECT status, progress_text FROM sessions_app_compactionrun WHERE id = ?", run_id)[0]
            == ("running", "")
            or _query(db_url, "SELECT status FROM sessions_app_compactionrun WHERE id = ?", run_id)[0][0] != "running"
        ):
            assert first.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the run never started streaming"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        _stop(first)
    killed_at = time.monotonic()
    assert _query(db_url, f"SELECT status FROM {TASKS} WHERE task_path = ?", RUN_TASK)[0][0] == "RUNNING"

    # The supervisor (bin/run) starts a worker again; nobody opens the run's page.
    second = _worker(env, log)
    try:
        while True:
            status, error = _query(db_url, "SELECT status, error FROM sessions_app_compactionrun WHERE id = ?", run_id)[
                0
            ]
            task_status = _query(db_url, f"SELECT status FROM {TASKS} WHERE task_path = ?", RUN_TASK)[0][0]
            if status != "running" and task_status != "RUNNING":
                break
            assert second.poll() is None, log.read_text()[-3000:]
            # stale after 2 s, swept every 0.5 s: well inside 10 s of the kill
            assert time.monotonic() - killed_at < 10, (status, task_status)
            time.sleep(0.1)
    finally:
        _stop(second)
    assert status == "failed" and "stopped" in error and "Retry" in error
    assert task_status == "FAILED"
    (traceback,) = _query(db_url, f"SELECT traceback FROM {TASKS} WHERE task_path = ?", RUN_TASK)[0]
    assert "stopped" in traceback and "killed" in traceback


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_write_lock_longer_than_the_busy_timeout_does_not_kill_the_worker(tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock; PostgreSQL locks rows and waits")
    db_url = worker_database_url(tmp_path)
    env = {
        **os.environ,
        **FAST_CLOCKS,
        "SQLITE_BUSY_TIMEOUT_S": "1",  # production: 30 s, against a lock of 40 s
        "DATABASE_URL": db_url,
        "SESSION_INSPECTOR_VAR": str(tmp_path / "var"),
        "PYTHONUNBUFFERED": "1",
    }
    manage(env, "migrate", "--noinput")
    log = tmp_path / "worker.log"
    worker = _worker(env, log)
    holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
    try:
        deadline = time.monotonic() + 60
        while not _query(db_url, "SELECT worker_id FROM sessions_app_workerbeat"):
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        holder.execute("BEGIN EXCLUSIVE")  # a long import in another process holds the write lock
        time.sleep(4)  # four busy timeouts: each poll of the queue fails with "database is locked"
        assert worker.poll() is None, log.read_text()[-3000:]
        holder.execute("COMMIT")
        # The same worker still works: an import's estimate task is run.
        importing = "from pathlib import Path\nfrom sessions_app import services\n"
        importing += f"print(services.import_file(path=Path({str(small_session(tmp_path))!r})).session)"
        session_id = int(manage(env, "shell", "-c", importing).split()[-1])
        while _query(db_url, "SELECT estimates_ready FROM sessions_app_session WHERE id = ?", session_id) != [(1,)]:
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        assert worker.poll() is None
    finally:
        holder.close()
        _stop(worker)
    assert "database is locked" in log.read_text()  # the worker did meet the lock, and lived
    # The estimates ran (their analysis task is queued after them; it may still be running at the stop).
    estimates = _query(db_url, f"SELECT status FROM {TASKS} WHERE task_path LIKE '%estimate_tokens_task'")
    assert estimates == [("SUCCESSFUL",)]


@pytest.mark.django_db(transaction=True)
def test_a_killed_estimate_task_is_redone_by_the_sweep(tmp_path, settings):
    settings.STALE_AFTER_S = 60
    outcome = services.import_file(path=small_session(tmp_path))
    assert isinstance(outcome, services.FileImport)
    # What a worker killed inside the estimate leaves: its task row RUNNING, the session still waiting.
    task_row = DBTaskResult.objects.get(task_path=services.estimate_tokens_task.module_path)
    long_ago = timezone.now() - timedelta(minutes=5)
    DBTaskResult.objects.filter(pk=task_row.pk).update(
        status=TaskResultStatus.RUNNING, started_at=long_ago, worker_ids=["killed-worker"]
    )
    models.WorkerBeat.objects.create(worker_id="killed-worker", beat_at=long_ago)
    models.Session.objects.filter(pk=outcome.session).update(updated_at=long_ago)

    report = sweeps.sweep_all()
    assert report.dead_tasks == 1 and report.estimates_enqueued == 1
    task_row.refresh_from_db()
    assert task_row.status == TaskResultStatus.FAILED and "killed-worker" in task_row.traceback
    from django.core.management import call_command

    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)
    assert models.Session.objects.get(pk=outcome.session).estimates_ready
    assert sweeps.sweep_all().estimates_enqueued == 0  # nothing left to redo


@pytest.mark.django_db(transaction=True)
def test_a_live_workers_task_is_left_alone(tmp_path, settings):
    settings.STALE_AFTER_S = 60
    services.import_file(path=small_session(tmp_path))
    long_ago = timezone.now() - timedelta(minutes=5)
    DBTaskResult.objects.update(status=TaskResultStatus.RUNNING, started_at=long_ago, worker_ids=["busy-worker"])
    sweeps.beat(worker_id="busy-worker")  # a long task, but its worker beats
    assert sweeps.sweep_all().dead_tasks == 0
    assert DBTaskResult.objects.get().status == TaskResultStatus.RUNNING


@pytest.mark.django_db(transaction=True)
def test_a_queued_run_whose_task_was_lost_is_queued_again(tmp_path, settings, anthropic_api):

    settings.STALE_AFTER_S = 60
    outcome = services.import_file(path=cc_session(tmp_path))
    session = models.Session.objects.get(pk=outcome.session)
    preview = preview_selectors.build_preview(session=session, strategy="claude-code", overrides={})
    run = run_services.create_run(preview=preview, user=None)  # created, but its enqueue never happened
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert sweeps.sweep_all().requeued_runs == 1
    assert sweeps.sweep_all().requeued_runs == 0  # now it has a task
    assert sweeps.pending_task_args(run_services.run_compaction_task.module_path) == {run.pk}


@pytest.mark.django_db(transaction=True)
def test_a_write_blocked_by_a_lock_answers_503_not_a_database_error(client_in, tmp_path):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock")
    from django.core.files.uploadedfile import SimpleUploadedFile

    options = connection.settings_dict["OPTIONS"]
    saved = options["timeout"]
    options["timeout"] = 0.5  # production waits 30 s for the lock first
    connection.close()
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=30, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # a long import in the worker holds the write lock
        response = client_in.post("/import/", {"files": [SimpleUploadedFile("s.jsonl", b"{}\n")]})
        as_json = client_in.post("/import/?format=json", {"files": [SimpleUploadedFile("s.jsonl", b"{}\n")]})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        options["timeout"] = saved
        connection.close()
    assert response.status_code == 503 and response["Retry-After"] == "10"
    assert "database is busy" in response.content.decode() and "locked" not in response.content.decode()
    assert as_json.status_code == 503 and as_json.json()["error"].startswith("The database is busy")
