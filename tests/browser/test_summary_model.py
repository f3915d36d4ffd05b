"""The preview names the model a run will send and why; the reviewer types another, and the run sends it."""

from __future__ import annotations

import pytest

from sessions_app import models
from tests.anthropic_server import ok
from tests.browser.conftest import SUMMARY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported

pytestmark = pytest.mark.browser
SESSION_MODEL = "claude-opus-4-5-20251101"  # the model cc_session's replies name
OVERRIDE = "claude-sonnet-4-5"


def test_the_reviewer_overrides_the_agents_summary_model_for_one_run(
    page,
    live_server,
    tmp_path,
    anthropic_api,
    worker,
):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(ok(SUMMARY))

    page.goto(f"{live_server.url}/sessions/{session.pk}/preview/?strategy=claude-code")
    page.wait_for_selector("#summary-model")
    assert page.inner_text(".summary-model") == SESSION_MODEL
    assert "Claude Code's own: the session's main model" in page.inner_text("#summary-model-note")
    assert page.get_attribute("#summary-model", "placeholder") == SESSION_MODEL

    page.fill("#summary-model", OVERRIDE)
    page.click("#run-compaction")
    page.wait_for_url(f"{live_server.url}/runs/*/")
    page.wait_for_selector("#run-status[data-status=succeeded]", timeout=30_000)
    assert page.inner_text(".run-model") == OVERRIDE
    assert f"chosen for this run (Claude Code would use {SESSION_MODEL})" in page.inner_text(".model-note")
    assert [body["model"] for body in anthropic_api.requests] == [OVERRIDE]
    run = models.CompactionRun.objects.get()
    assert (run.model, run.model_source) == (OVERRIDE, "override")
    assert page.errors == []  # type: ignore[attr-defined]
