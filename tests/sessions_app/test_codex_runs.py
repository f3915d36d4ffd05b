"""Codex runs through the Anthropic API: Codex's own compact request, its summary stored as Codex stores it."""

from __future__ import annotations

import pytest

from compaction.formats.codex import SUMMARY_PREFIX
from compaction.strategies.codex import SUMMARIZATION_PROMPT
from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.anthropic_server import ok
from tests.conftest import CODEX_SAMPLES
from tests.helpers.runs import imported

pytestmark = pytest.mark.django_db
Run = models.CompactionRun


def test_a_codex_run_sends_the_history_then_codexs_prompt_and_stores_the_prefixed_summary(anthropic_api):
    session = imported(next(CODEX_SAMPLES.glob("test-framework__0.92.0*.jsonl")))
    # After the 21st call.
    preview = preview_selectors.build_preview(session=session, strategy="codex", overrides={}, after_call=21)
    assert preview.runnable, preview.error or preview.refused
    anthropic_api.script(ok("Progress: the test runner is wired.\nNext: fix the two failing specs."))
    run = run_services.execute_run(run_id=run_services.create_run(preview=preview, user=None).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    (body,) = anthropic_api.requests
    # gpt-5.2-codex is not served by the Anthropic API: the run summarises with SUMMARY_MODEL.
    assert body["model"] == run.model == "claude-haiku-4-5"
    sent = body["messages"][-1]["content"]
    text = sent if isinstance(sent, str) else "".join(part.get("text", "") for part in sent)
    # compact.rs: the prompt (#6027's checkpoint prompt for 0.92) comes after the history, as the last user turn.
    assert text.rstrip().endswith(SUMMARIZATION_PROMPT)
    assert run.summary == f"{SUMMARY_PREFIX}\nProgress: the test runner is wired.\nNext: fix the two failing specs."
