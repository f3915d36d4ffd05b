"""A run sends the model the agent itself would summarise with; SUMMARY_MODEL when that cannot be sent."""

from __future__ import annotations

import pytest

from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.conftest import KLAUDE_SAMPLES
from tests.helpers.runs import imported

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
KLAUDE_SESSIONS = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"
FALLBACK = "claude-sonnet-4-5"


def klaude_run(session_dir: str) -> Run:
    session = imported(KLAUDE_SESSIONS / session_dir / "events.jsonl")
    # A small kept tail leaves a middle to summarise at the session's end.
    preview = preview_selectors.build_preview(
        session=session, strategy="klaude-code", overrides={"keep_recent_tokens": 500}
    )
    assert preview.runnable, preview.error or preview.refused
    return run_services.create_run(preview=preview, user=None)


def test_a_klaude_run_sends_the_sessions_main_model(anthropic_api, settings):
    settings.SUMMARY_MODEL = FALLBACK
    run = run_services.execute_run(run_id=klaude_run("bd8ec9a1f80345edbd7c9ec7081ab44d").pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.model == "claude-opus-4-5-20251101"
    assert anthropic_api.requests and {body["model"] for body in anthropic_api.requests} == {run.model}


def test_a_model_the_anthropic_api_does_not_serve_falls_back_to_summary_model(anthropic_api, settings):
    settings.SUMMARY_MODEL = FALLBACK
    run = klaude_run("4ca67353d824444b81c156cf264ca243")  # a qwen3-coder session
    assert run.model == FALLBACK
