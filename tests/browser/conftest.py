"""Playwright driving Debian's Chromium against the live test server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

from tests.anthropic_server import ScriptedServer
from tests.conftest import REPO

CHROMIUM = Path("/usr/bin/chromium")
PASSWORD = "browser-pw"

# Playwright's sync API runs an event loop in this thread; Django must still allow ORM calls here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.fail("Browser tests need /usr/bin/chromium (Debian package chromium); bin/test installs it.")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server, transactional_db, django_user_model):
    django_user_model.objects.create_user(username="browser", password=PASSWORD)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.errors = []  # type: ignore[attr-defined]
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))  # type: ignore[attr-defined]
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "browser")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    yield page
    context.close()


def wait_until(page, expression: str, *, timeout: float = 10.0) -> None:
    """Poll a JS expression with page.evaluate (wait_for_function evaluates strings in the page; our CSP forbids it).

    A click that navigates returns before the next page exists: an evaluation then runs on the page being left, or
    finds its context destroyed mid-way. Either is "not yet", not a failure; the last error is kept for the timeout.
    """
    import time

    from playwright.sync_api import Error as PlaywrightError

    deadline = time.monotonic() + timeout
    last_error: PlaywrightError | None = None
    while True:
        try:
            if page.evaluate(expression):
                return
        except PlaywrightError as error:
            last_error = error
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {expression} (last error: {last_error})")
        page.wait_for_timeout(100)


def database_url() -> str:
    """The live server's test database, for a worker subprocess to share."""

    db = connections["default"].settings_dict
    if connections["default"].vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _db_worker(*, stdout: int, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real `manage.py db_worker`, as `bin/run` starts it, on the live server's database, stopped afterwards."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay", "--interval", "0.2"],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database_url(), "DEBUG": "0", "SECRET_KEY": "browser-test-worker", **env},
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
    # finally: a caller that closes the generator early (GeneratorExit at the yield) still stops the worker; a worker
    # left running claims the next test's tasks with that test's database but not its settings.
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def import_worker(transactional_db, settings) -> Iterator[subprocess.Popen[bytes]]:
    """The worker importing uploads from the live server's database."""
    yield from _db_worker(stdout=subprocess.DEVNULL, UPLOAD_DIR=str(settings.UPLOAD_DIR))


SUMMARY = (
    "<summary>1. Primary Request: fix the division by zero in app.py, then add tests.\n"
    + "".join(f"{n}. Detail {n}: the fix and its tests are described here.\n" for n in range(2, 10))
    + "</summary>"
)


@pytest.fixture
def worker(transactional_db, anthropic_api: ScriptedServer, settings) -> Iterator[subprocess.Popen[bytes]]:
    """The worker running compactions against the scripted Anthropic API."""
    yield from _db_worker(  # its output is read when a test fails
        stdout=subprocess.PIPE,
        ANTHROPIC_API_KEY=settings.ANTHROPIC_API_KEY,
        ANTHROPIC_BASE_URL=settings.ANTHROPIC_BASE_URL,
        SUMMARY_MODEL=settings.SUMMARY_MODEL,
    )


OVERLAPS = """(boxes) => {
    const hits = [];
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        const across = a.left < b.left + b.width && b.left < a.left + a.width;
        if (across && a.top < b.top + b.height && b.top < a.top + a.height) hits.push([a.text, b.text]);
    }
    return hits;
}"""
