"""Compaction runs through the real anthropic SDK against the scripted Messages API server."""

from __future__ import annotations

import json

import pytest

from compaction.strategies import claude_code as cc
from compaction.summarize import BREAKER_THRESHOLD, TRUNCATION_MARKER, estimate_cost_usd
from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.anthropic_server import drop_stream, ok, prompt_too_long, status, stream_error
from tests.conftest import TEST_KEY
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported, queued_run

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
MODEL = "claude-opus-4-5-20251101"  # the model cc_session's replies name
REPLY = "<analysis>thinking it over</analysis>\n<summary>1. Primary Request: fix app.py and add tests.</summary>"


def test_success_stores_summary_usage_and_cost(anthropic_api, tmp_path):
    session = imported(cc_session(tmp_path))
    run = queued_run(session)
    # Claude Code compacts with the session's own model (a forked agent of the main loop).
    assert run.offline is False and run.model == MODEL and run.model_source == "agent"
    anthropic_api.script(ok(REPLY, input_tokens=1234, output_tokens=56))
    run = run_services.execute_run(run_id=run.pk)

    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.summary == cc.format_compact_summary(REPLY)
    assert run.progress_text == REPLY  # the streamed text, as it arrived
    assert (run.input_tokens, run.output_tokens, run.attempts) == (1234, 56, 1)
    expected_cost = estimate_cost_usd(model=MODEL, input_tokens=1234, output_tokens=56)
    assert expected_cost is not None and float(run.cost_usd) == pytest.approx(expected_cost, abs=1e-6)
    (body,) = anthropic_api.requests
    preview = preview_selectors.preview_for_run(run=run)
    assert body["stream"] is True and body["model"] == MODEL
    assert body["system"] == cc.SUMMARIZER_SYSTEM_PROMPT
    assert body["max_tokens"] == preview.requests[0].max_tokens
    # The conversation itself, then the compact prompt as the last user turn.
    assert body["messages"] == preview.requests[0].api_messages
    assert body["messages"][-1]["role"] == "user"
    assert body["messages"][-1]["content"][-1] == {"type": "text", "text": cc.compact_prompt()}
    headers = anthropic_api.request_headers[0]
    assert "***" in (headers.get("x-api-key"), headers.get("authorization"))  # the key was sent (masked in the log)


def test_rate_limit_then_success(anthropic_api, tmp_path):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(status(429, retry_after=0), ok(REPLY))
    run = run_services.execute_run(run_id=queued_run(session).pk)
    assert run.status == Run.Status.SUCCEEDED and run.attempts == 2
    assert len(anthropic_api.requests) == 2
    log = run.raw_response["requests"][0]["raw"]["attempt_log"]
    assert log[0]["error"].startswith("429 rate limited")


def test_overloaded_until_the_breaker_opens(anthropic_api, tmp_path):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(*[status(529)] * (BREAKER_THRESHOLD + 2))
    run = run_services.execute_run(run_id=queued_run(session).pk)
    assert run.status == Run.Status.FAILED
    assert "circuit breaker open" in run.error and "529 overloaded" in run.error
    assert TEST_KEY not in run.error
    assert len(anthropic_api.requests) == BREAKER_THRESHOLD == run.attempts
    assert run.summary == "" and run.finished_at is not None


def test_prompt_too_long_then_success_with_fewer_rounds(anthropic_api, tmp_path):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(prompt_too_long(tokens=200_010, maximum=200_000), ok(REPLY))
    run = run_services.execute_run(run_id=queued_run(session).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    first, second = (body["messages"] for body in anthropic_api.requests)
    assert first[0]["content"][0] == {"type": "text", "text": "please fix the bug in app.py"}
    # The oldest round (the first prompt) was dropped; the rest is sent after Claude Code's marker.
    assert second[0] == {"role": "user", "content": [{"type": "text", "text": TRUNCATION_MARKER}]}
    assert "please fix the bug in app.py" not in json.dumps(second)
    assert "Adding tests in tests/test_app.py." in json.dumps(second)
    assert run.raw_response["requests"][0]["dropped_rounds"] >= 1


@pytest.mark.parametrize("failure", [drop_stream(REPLY, after_chunks=2), stream_error("overloaded_error")])
def test_dropped_stream_then_success(anthropic_api, tmp_path, failure):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(failure, ok(REPLY))
    run = run_services.execute_run(run_id=queued_run(session).pk)
    assert run.status == Run.Status.SUCCEEDED and run.summary == cc.format_compact_summary(REPLY)
    assert len(anthropic_api.requests) == 2 and run.attempts == 2


def test_rejected_request_fails_at_once_with_the_apis_message(anthropic_api, tmp_path):
    session = imported(cc_session(tmp_path))
    anthropic_api.script(status(401))
    run = run_services.execute_run(run_id=queued_run(session).pk)
    assert run.status == Run.Status.FAILED and "401" in run.error and "invalid x-api-key" in run.error
    assert len(anthropic_api.requests) == 1


def test_a_run_queued_for_the_api_fails_clearly_when_the_worker_has_no_key(anthropic_api, settings, tmp_path):
    session = imported(cc_session(tmp_path))
    run = queued_run(session)
    settings.ANTHROPIC_API_KEY = ""
    run = run_services.execute_run(run_id=run.pk)
    assert run.status == Run.Status.FAILED and "ANTHROPIC_API_KEY" in run.error
    assert anthropic_api.requests == []


def test_khaelor_run_sends_its_own_prompt(anthropic_api, tmp_path):
    from compaction.strategies.khaelor import SUMMARY_SYSTEM_PROMPT
    from tests.conftest import KHAELOR_SAMPLES

    session = imported(KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    # A small protected tail leaves a middle to summarise at the sample's end.
    preview = preview_selectors.build_preview(
        session=session, strategy="khaelor", overrides={"protect_tail_tokens": 500}
    )
    assert preview.runnable, preview.error or preview.refused
    anthropic_api.script(ok("objective: migrate the ledger\ncurrent_state: halfway\n"))
    run = run_services.execute_run(run_id=run_services.create_run(preview=preview, user=None).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    (body,) = anthropic_api.requests
    assert body["system"] == [{"type": "text", "text": SUMMARY_SYSTEM_PROMPT}]  # the ModelRequest's one entry
    (block,) = body["messages"][0]["content"]
    assert block["text"].startswith("Transcript of the conversation segment to checkpoint:")
    assert "objective: migrate the ledger" in run.summary
