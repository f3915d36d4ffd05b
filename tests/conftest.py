from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.anthropic_server import ScriptedServer, start_server

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLES = SHARED / "samples"
CLAUDE_SAMPLES = SAMPLES / "claude-code"
KLAUDE_SAMPLES = SAMPLES / "klaude-code"
KHAELOR_SAMPLES = SAMPLES / "khaelor"
CODEX_SAMPLES = SAMPLES / "codex"
# Each agent's folder of shared samples, as `import_paths` takes it (klaude-code's is its home folder's copy).
AGENT_SAMPLE_FOLDERS = {
    "claude-code": CLAUDE_SAMPLES,
    "klaude-code": KLAUDE_SAMPLES / "dot-klaude",
    "khaelor": KHAELOR_SAMPLES,
    "codex": CODEX_SAMPLES,
}
# The key the SDK sends to the scripted Messages API server; a run must never show it.
TEST_KEY = "sk-ant-test-0123456789abcdef"


# pytest-django's fixtures that give a test the database; a fixture of ours that needs it requests one of these,
# so they appear in the closure of the test's fixtures.
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `db` every test that reaches the database; with TEST_ONLY_DATABASE=1 (bin/test's PostgreSQL pass)
    run only those but the browser tests, with TEST_PART=db only those, with TEST_PART=no-db only the others,
    whatever else the command line selects (a second -m would replace the first).

    A test reaches the database through the django_db marker or a database fixture: pytest-django blocks every
    other test's queries, and a subprocess (server, worker) reaches the pass's database only from such a test
    (the live server's, or the test database named in the DATABASE_URL it is given).
    """
    for item in items:
        if item.get_closest_marker("django_db") or set(getattr(item, "fixturenames", ())) & DATABASE_FIXTURES:
            item.add_marker(pytest.mark.db)
    part = os.environ.get("TEST_PART", "")
    if os.environ.get("TEST_ONLY_DATABASE") == "1":
        # Browser tests check what a page draws and does; the queries behind each page run in this pass through
        # the client tests of the same views, so Chromium runs once (SQLite pass): 3-4 minutes of a 2-core CI.
        elsewhere = [item for item in items if not item.get_closest_marker("db") or item.get_closest_marker("browser")]
    elif part == "db":  # bin/test's SQLite pass: the tests that reach a database
        elsewhere = [item for item in items if not item.get_closest_marker("db")]
    elif part == "no-db":  # and the others, on the core the PostgreSQL pass leaves free when it ends
        elsewhere = [item for item in items if item.get_closest_marker("db")]
    else:
        elsewhere = []
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        dropped = {id(item) for item in elsewhere}
        items[:] = [item for item in items if id(item) not in dropped]


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    """Uploads waiting for the worker go to the test's own folder (a worker subprocess gets it as UPLOAD_DIR)."""
    settings.UPLOAD_DIR = tmp_path / "uploads"
    return settings.UPLOAD_DIR


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Users made in tests get an MD5 hash: the production hasher (PBKDF2) takes most of a second per user, and
    some 230 tests make one (the login check is the same code with either hasher)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def reviewer(django_user_model):
    return django_user_model.objects.create_user(username="rev", password="pw-for-tests")


@pytest.fixture
def client_in(client, reviewer):
    client.force_login(reviewer)
    return client


@pytest.fixture
def offline(settings):
    settings.ANTHROPIC_API_KEY = ""
    return settings


@pytest.fixture
def anthropic_api(settings) -> Iterator[ScriptedServer]:
    """The real SDK pointed at the scripted Messages API server (tests/anthropic_server.py)."""
    server = start_server()
    settings.ANTHROPIC_API_KEY = TEST_KEY
    settings.ANTHROPIC_BASE_URL = server.url
    settings.SUMMARY_MODEL = "claude-haiku-4-5"
    settings.SUMMARY_BACKOFF_BASE_S = 0.01  # keep the breaker test fast; the policy is the same
    yield server
    server.close()
