"""Upload a zip, watch the background import's progress page finish, open a session from its report.

The import is done by a real ``manage.py db_worker`` subprocess sharing the live server's test database.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.browser.conftest import wait_until
from tests.helpers.claude_code_lines import assistant, user

pytestmark = pytest.mark.browser


def project_zip(tmp_path, sessions: int):
    archive = tmp_path / "projects.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for n in range(sessions):
            lines = [user("u1", None, f"task number {n}"), assistant("a1", "u1", f"msg_{n}", f"done {n}", ctx=1000 + n)]
            content = "".join(lines).replace('"s-1"', json.dumps(f"session-{n}"))
            zf.writestr(f"projects/-home-me-proj/session-{n}.jsonl", content)
        zf.writestr("projects/-home-me-proj/broken.jsonl", "this is not JSON\n")
    return archive


def test_upload_a_zip_watch_the_progress_and_open_a_session(page, live_server, tmp_path, import_worker):
    page.click("text=Import")
    page.set_input_files("input[name=files]", str(project_zip(tmp_path, sessions=3)))
    page.click("button:has-text('Import')")
    page.wait_for_url(f"{live_server.url}/imports/*/")
    # The page updates itself (htmx polls the progress partial) until the worker is done.
    wait_until(page, "document.querySelector('#import-progress').dataset.status === 'done'", timeout=60)
    progress = page.inner_text("#import-progress")
    assert page.inner_text("#files-done") == page.inner_text("#files-total") == "4"
    assert page.inner_text("#sessions-found") == "3" and page.inner_text("#errors-so-far") == "1"
    assert "broken.jsonl" in progress and "new session" in progress
    page.click("#report a:has-text('session-1.jsonl')")
    page.wait_for_selector("#transcript")
    assert "task number 1" in page.inner_text("#transcript")
    assert page.errors == []
