"""A real ``manage.py db_worker`` is killed mid-run; the sweep marks the run failed, never stuck.

pytest-django's SQLite test database lives in memory, out of reach of a subprocess, so on SQLite every
process here uses a separate database file (``DATABASE_URL``); with PostgreSQL (``DATABASE_URL`` set) the
subprocesses use pytest-django's test database, whose rows ``transactional_db`` commits.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessions_app import models
from tests.anthropic_server import slow
from tests.conftest import TEST_KEY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.worker import SETUP, manage, worker_database_url

REPO = Path(__file__).resolve().parents[2]
Run = models.CompactionRun


def _read_run(run_id: int, db_url: str) -> tuple[str, str, str]:
    if db_url.startswith("sqlite:///"):
        with sqlite3.connect(db_url.removeprefix("sqlite:///"), timeout=30) as db:
            row = db.execute(
                "SELECT status, progress_text, error FROM sessions_app_compactionrun WHERE id = ?", (run_id,)
            ).fetchone()
        return row
    run = Run.objects.get(pk=run_id)
    return run.status, run.progress_text, run.error


SWEEP = """
from datetime import timedelta
from sessions_app import run_services
print(run_services.sweep_stale_runs(), run_services.sweep_stale_runs(older_than=timedelta(0)))
"""


@pytest.mark.django_db(transaction=True)
def test_killed_worker_leaves_the_run_failed_not_stuck(anthropic_api, tmp_path):
    db_url = worker_database_url(tmp_path)
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SESSION_INSPECTOR_VAR": str(tmp_path / "var"),
        "ANTHROPIC_API_KEY": TEST_KEY,
        "ANTHROPIC_BASE_URL": anthropic_api.url,
        "PYTHONUNBUFFERED": "1",
    }
    if db_url.startswith("sqlite"):
        manage(env, "migrate", "--noinput")
    run_id = int(manage(env, "shell", "-c", SETUP.format(path=str(cc_session(tmp_path)))).split()[-1])
    # A long, slow stream: the worker is still inside it when it is killed.
    anthropic_api.script(slow("word " * 600, chunk_delay=0.05))

    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.1"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            status, progress, _ = _read_run(run_id, db_url)
            if status == "running" and progress:
                break
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"the run never started streaming (status {status})"
            time.sleep(0.1)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        log.close()

    status, progress, _ = _read_run(run_id, db_url)
    assert status == "running" and 0 < len(progress) < len("word " * 600)  # killed mid-stream
    # The default sweep leaves a run whose heartbeat is recent; with the window at zero it is dead.
    assert manage(env, "shell", "-c", SWEEP).strip().splitlines()[-1].split() == ["0", "1"]
    status, _, error = _read_run(run_id, db_url)
    assert status == "failed" and "worker" in error and "Retry" in error
