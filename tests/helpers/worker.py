"""The task worker in tests: drained in-process (``run_worker``) or run as ``manage.py`` subprocesses on a
database of their own (``worker_database_url``, ``manage``, the ``SETUP`` script that starts a run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.core.management import call_command
from django.db import connection

from tests.conftest import REPO


def run_worker() -> None:
    """What ``db_worker`` does in the background: here, drain the queue now."""
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def worker_database_url(tmp_path: Path) -> str:
    if connection.vendor == "sqlite":
        return f"sqlite:///{tmp_path / 'worker.sqlite3'}"
    s = connection.settings_dict
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


SETUP = """
from pathlib import Path
from sessions_app import run_services, services, models
from sessions_app.selectors import previews as preview_selectors
outcome = services.import_file(path=Path({path!r}))
session = models.Session.objects.get(pk=outcome.session)
preview = preview_selectors.build_preview(session=session, strategy="claude-code", overrides={{}})
print(run_services.start_run(preview=preview, user=None).pk)
"""
