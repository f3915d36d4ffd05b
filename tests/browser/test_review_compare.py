"""Two compactions of one point, compared like code, one rejected with its reason and one accepted, on the page.

Both runs go through the real worker against the scripted API, which answers each with a different summary:
the second leaves out Claude Code's "Errors and fixes" section and leaves "Pending Tasks" empty.
"""

from __future__ import annotations

import pytest

from sessions_app import models
from tests.anthropic_server import ScriptedServer, ok
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported

pytestmark = pytest.mark.browser
Run = models.CompactionRun

FIRST = """<summary>
1. Primary Request and Intent: fix the division by zero in app.py, then add tests.
2. Key Technical Concepts: Python, pytest.
3. Files and Code Sections: /src/app.py holds main(), which divided by zero.
4. Errors and fixes: ZeroDivisionError in main(); fixed by returning 1.
5. Problem Solving: read the file, found the bug, fixed it.
6. All user messages: "please fix the bug in app.py", "now add tests".
7. Pending Tasks: add tests in tests/test_app.py.
8. Current Work: fixing app.py.
9. Optional Next Step: write tests/test_app.py.
</summary>"""
SECOND = """<summary>
1. Primary Request and Intent: fix the bug in app.py.
2. Key Technical Concepts: Python.
3. Files and Code Sections: app.py.
5. Problem Solving: the bug is fixed.
6. All user messages: "please fix the bug in app.py".
7. Pending Tasks:
8. Current Work: fixing app.py.
9. Optional Next Step: none.
</summary>"""


def _run_at_the_point(page, live_server, session: models.Session) -> Run:
    before = set(Run.objects.values_list("pk", flat=True))
    page.goto(f"{live_server.url}/sessions/{session.pk}/preview/?strategy=claude-code&at=3")
    page.click("#run-compaction")
    page.wait_for_url(f"{live_server.url}/runs/*/")
    page.wait_for_selector("#run-status[data-status=succeeded]", timeout=30_000)
    return Run.objects.exclude(pk__in=before).get()


def test_compare_two_runs_of_one_point_then_reject_and_accept_there(
    page,
    live_server,
    tmp_path,
    anthropic_api: ScriptedServer,
    worker,
):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(ok(FIRST), ok(SECOND))
    first = _run_at_the_point(page, live_server, session)
    second = _run_at_the_point(page, live_server, session)
    assert (first.after_call, second.after_call) == (3, 3) and first.transcript_sha256 == second.transcript_sha256
    # The run page says what the summary kept (the request it was made from is found in both).
    assert "request" in page.inner_text("#coverage") and "files" in page.inner_text("#coverage .coverage-line")

    page.click("#compare-link")
    page.select_option("select[name=with]", str(first.pk))
    page.click("form.filters button[type=submit]")
    page.wait_for_selector("#sections")
    # Word-level differences: words only the first summary has are struck on the left, the second's are marked.
    deleted = page.locator("#left-text del.diff-del").all_inner_texts()
    inserted = page.locator("#right-text ins.diff-ins").all_inner_texts()
    assert any("division by zero" in text for text in deleted)
    assert {"bug", "none"} <= {t.strip() for t in inserted} and "division" not in " ".join(inserted)
    assert "Primary Request" not in " ".join(deleted + inserted)  # what both say is not marked
    # Section flags: the second summary leaves one section out and another empty.
    errors = page.locator("tr.section-row[data-section='Errors and fixes']")
    assert "section-flagged" in (errors.get_attribute("class") or "")
    assert errors.locator("td.state-missing").inner_text() == "missing"
    pending = page.locator("tr.section-row[data-section='Pending Tasks']")
    assert pending.locator("td.state-empty").inner_text() == "empty"
    concepts = page.locator("tr.section-row[data-section='Key Technical Concepts']")
    assert "section-flagged" not in (concepts.get_attribute("class") or "")
    # Coverage of both summaries on the same page.
    assert page.locator("#left-coverage").is_visible() and page.locator("#right-coverage").is_visible()

    compare_url = page.url
    # A reject without a reason is refused, and said so.
    page.click(f"#review-form-{second.pk} button[value=rejected]")
    page.wait_for_selector(".flash-error")
    assert page.url == compare_url and "needs a reason" in page.inner_text("body")
    second.refresh_from_db()
    assert second.review == Run.Review.PENDING

    page.fill(f"#review-form-{second.pk} textarea[name=comment]", "Drops the error and the pending tests.")
    page.click(f"#review-form-{second.pk} button[value=rejected]")
    page.wait_for_selector(f"#review-{second.pk}.review-rejected")
    assert page.url == compare_url  # the verdict is given where the summaries are compared
    page.fill(f"#review-form-{first.pk} textarea[name=comment]", "Keeps every section.")
    page.click(f"#review-form-{first.pk} button[value=accepted]")
    page.wait_for_selector(f"#review-{first.pk}.review-accepted")
    assert page.inner_text(f"#review-{second.pk}") == "rejected"

    page.click("header.top >> text=Reviews")
    page.wait_for_selector("#decided")
    decided = page.inner_text("#decided")
    assert f"run {first.pk}" in decided and f"run {second.pk}" in decided
    assert "Drops the error and the pending tests." in decided and "Keeps every section." in decided
    rows = {
        int(page.locator("#decided tr.run-row").nth(i).get_attribute("data-run") or 0): page.locator(
            "#decided tr.run-row"
        )
        .nth(i)
        .inner_text()
        for i in range(page.locator("#decided tr.run-row").count())
    }
    assert "rejected by browser" in rows[second.pk] and "accepted by browser" in rows[first.pk]
    assert "No runs." in page.inner_text("#pending")
    assert page.errors == []  # type: ignore[attr-defined]
