"""Preview a cut, run it against the scripted API, watch it finish, compare, accept, find it in the reviews.

The run is executed by django-tasks-db's ``Worker.run_task`` (what ``manage.py db_worker`` calls) in a thread of
the test process: the live server's SQLite test database is in memory, where a worker subprocess cannot reach
it (tests/sessions_app/test_runs_worker.py runs a real ``db_worker`` subprocess against a database file).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connections
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from sessions_app import models
from tests.anthropic_server import slow
from tests.sessions_app.test_runs import anthropic_api, cc_session, imported  # noqa: F401

pytestmark = pytest.mark.browser
RUN_TASK = "sessions_app.tasks.run_compaction"
SUMMARY = (
    "<summary>1. Primary Request: fix the division by zero in app.py, then add tests.\n"
    + "".join(f"{n}. Detail {n}: the fix and its tests are described here.\n" for n in range(2, 10))
    + "</summary>"
)


@pytest.fixture
def worker(transactional_db) -> Iterator[Worker]:
    """django-tasks-db's Worker running our tasks in a thread that shares the test's database connection.

    With SQLite the live server's test database is in memory and shared-cache table locks make a second
    connection fail ("database table is locked"), so the thread uses the same connection, as Django's live
    server thread does. It claims and runs tasks with the Worker's own ``run_task`` (what ``db_worker`` calls)
    but without the Worker's polling transaction, which would interleave with the server's on that connection.
    """
    loop = Worker(
        queue_names=["default"],
        interval=0.1,
        batch=False,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="browser-test-worker",
        excluded_queue_names=[],
    )
    shared = connections["default"]
    in_memory = shared.vendor == "sqlite" and shared.is_in_memory_db()  # type: ignore[attr-defined]
    stop = threading.Event()

    def serve() -> None:
        if in_memory:
            connections["default"] = shared
        try:
            while not stop.wait(0.2):
                task = DBTaskResult.objects.ready().filter(task_path=RUN_TASK).order_by("enqueued_at").first()
                if task is not None:
                    task.claim(loop.worker_id)
                    loop.run_task(task)
        finally:
            if not in_memory:
                connections["default"].close()  # this thread's own connection (PostgreSQL)

    if in_memory:
        shared.inc_thread_sharing()
    thread = threading.Thread(target=serve, name="db-worker", daemon=True)
    thread.start()
    yield loop
    stop.set()
    thread.join(timeout=30)
    if in_memory:
        shared.dec_thread_sharing()


def test_preview_run_compare_accept(page, live_server, tmp_path, anthropic_api, worker):  # noqa: F811
    session = imported(cc_session(tmp_path))
    # Slow enough to see the progress arrive while the page polls.
    anthropic_api.script(slow(SUMMARY, chunk_delay=0.2))  # about 4 s of streaming

    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.click("text=Preview compaction")
    page.wait_for_selector("#preview")
    assert "(the strategy's)" in page.inner_text("#cut")

    page.fill("input[name=start]", "2")
    page.fill("input[name=end]", "5")
    page.click("#preview button:has-text('Preview')")
    page.wait_for_selector("#cut:has-text('by hand')")
    assert "start=2" in page.url and "end=5" in page.url  # the URL can be shared
    transcript = page.inner_text("pre.transcript")
    assert "Fixed the division by zero" in transcript and "please fix the bug" not in transcript

    page.click("#run-compaction")
    page.wait_for_url(f"{live_server.url}/runs/*/")
    run = models.CompactionRun.objects.get()
    page.evaluate("window.__sameDocument = true")
    page.wait_for_selector("#run-status[data-status=running] pre.progress", timeout=20_000)
    page.wait_for_selector("#run-status[data-status=succeeded]", timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True  # finished without a reload
    assert "1. Primary Request: fix the division by zero" in page.inner_text("#summary")
    assert page.get_attribute("#run-status", "hx-trigger") is None  # polling stopped

    page.click("#compare-link")
    page.wait_for_selector(".side-by-side")
    assert "Fixed the division by zero in app.py." in page.inner_text("#left")
    assert "Primary Request" in page.inner_text("#right")

    page.go_back()
    page.fill("textarea[name=comment]", "Keeps the fix and the next step.")
    page.click("button[value=accepted]")
    page.wait_for_selector(".review-accepted")
    assert "accepted" in page.inner_text("#review") and "browser" in page.inner_text("#review")

    page.click("header.top >> text=Reviews")
    page.wait_for_selector("#decided")
    decided = page.inner_text("#decided")
    assert f"run {run.pk}" in decided and "Keeps the fix and the next step." in decided
    assert "No runs." in page.inner_text("#pending")
    assert page.errors == []  # type: ignore[attr-defined]
