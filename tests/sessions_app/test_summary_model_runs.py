"""Each agent's sample, run through the real worker against the scripted Messages API: the request names the
model the agent itself would summarise with (SUMMARY_MODEL when it is not one the Anthropic API runs), Claude
Code's request carries the conversation as messages, and a reviewer can choose another model for one run.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils.html import escape

from compaction.strategies import claude_code as cc
from compaction.strategies import klaude_code as kc
from compaction.strategies.khaelor import KhaelorParams
from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.anthropic_server import status
from tests.compaction.strategies import khaelor_seed as oracle
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.runs import imported

# The worker closes its connection, as a real one does: each test commits what it writes.
pytestmark = pytest.mark.django_db(transaction=True)
Run = models.CompactionRun

# Not the model of any sample: a request that names it used the fallback.
FALLBACK = "claude-3-5-haiku-20241022"
KLAUDE_SESSIONS = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"
CLAUDE_SAMPLE = CLAUDE_SAMPLES / "spotter_tool_heavy.jsonl"
CODEX_SAMPLE = CODEX_SAMPLES / "localpush__0.104.0-alpha.1__rollout-2026-02-23T12-40-23-019c8a4c.jsonl"
# Small protections so that each sample has a middle to summarise at its end.
SAMPLES: dict[str, tuple[Path, dict[str, object]]] = {
    "claude-code": (CLAUDE_SAMPLE, {}),
    "klaude-code": (KLAUDE_SESSIONS / "bd8ec9a1f80345edbd7c9ec7081ab44d" / "events.jsonl", {"keep_recent_tokens": 500}),
    "khaelor": (KHAELOR_SAMPLES / "ledger-migration.events.jsonl", {"protect_tail_tokens": 500}),
    "codex": (CODEX_SAMPLE, {}),
}


def _last_model(path: Path, *, key: str) -> str:
    """Read straight from the file, apart from the parsers: the last model a record of ``key`` names."""
    found = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        payload = record.get("message") or record.get("payload") or {}
        if isinstance(payload, dict) and isinstance(payload.get(key), str) and payload[key] != "<synthetic>":
            found = payload[key]
    return found


# What each agent summarises with, read off the sample itself.
OWN = {
    "claude-code": _last_model(CLAUDE_SAMPLE, key="model"),  # the session's main model
    "klaude-code": "claude-opus-4-5-20251101",  # samples.json: the session's model, no compact_model configured
    "khaelor": _last_model(KHAELOR_SAMPLES / "ledger-migration.events.jsonl", key="auxModel"),  # ADR-10
    "codex": _last_model(CODEX_SAMPLE, key="model"),  # an OpenAI model: the Anthropic API cannot run it
}


def run_worker() -> None:
    """What ``db_worker`` does in the background: here, drain the queue now."""
    call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", verbosity=0)


def started(agent: str, *, model: str | None = None) -> Run:
    path, overrides = SAMPLES[agent]
    session = imported(path)
    preview = preview_selectors.build_preview(session=session, strategy=agent, overrides=overrides)
    assert preview.runnable, preview.error or preview.refused
    return run_services.start_run(preview=preview, user=None, model=model)


@pytest.mark.parametrize("agent", list(SAMPLES))
def test_a_run_on_each_agents_sample_sends_the_agents_own_model(agent, anthropic_api, settings, client_in):
    settings.SUMMARY_MODEL = FALLBACK
    assert OWN[agent]
    run = started(agent)
    run_worker()
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    sent = {body["model"] for body in anthropic_api.requests}
    if agent == "codex":
        assert OWN["codex"].startswith("gpt-") and sent == {FALLBACK}
        assert run.model_source == "fallback" and OWN["codex"] in run.model_note and "cannot run" in run.model_note
    else:
        assert sent == {OWN[agent]} and run.model_source == "agent"
    assert anthropic_api.requests and run.model == next(iter(sent))
    # The run, compare and review pages and their JSON twins say which model and why.
    data = client_in.get(f"/runs/{run.pk}.json").json()
    assert (data["model"], data["model_source"], data["model_note"]) == (run.model, run.model_source, run.model_note)
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert f'<strong class="run-model">{run.model}</strong>' in page and escape(run.model_note) in page
    compare = client_in.get(f"/runs/{run.pk}/compare/").content.decode()
    assert f'<span class="muted small run-model">{run.model}</span>' in compare and "model-note" in compare
    assert client_in.get(f"/runs/{run.pk}/compare.json").json()["run"]["model_note"] == run.model_note
    reviews = client_in.get("/reviews.json").json()
    (row,) = [r for r in reviews["pending"] if r["id"] == run.pk]
    assert (row["model"], row["model_source"]) == (run.model, run.model_source)


def test_claude_codes_request_is_the_conversation_as_messages_then_the_compact_prompt(anthropic_api):
    run = started("claude-code")
    run_worker()
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    (body,) = anthropic_api.requests
    assert body["system"] == cc.SUMMARIZER_SYSTEM_PROMPT  # the streaming fallback's system prompt (§2.6)
    # max_tokens = min(COMPACT_MAX_OUTPUT_TOKENS 20K, the model's max output); thinking disabled, so no field;
    # the Read tool the fallback defines (the API refuses tool_use blocks in a request without tools).
    assert OWN["claude-code"] == "claude-opus-4-6" and body["max_tokens"] == 20_000  # docs §1.4: min(64,000, 20K)
    assert "thinking" not in body and "tool_choice" not in body
    assert [tool["name"] for tool in body["tools"]] == ["Read"]
    turns = body["messages"]
    roles = [t["role"] for t in turns]
    assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:], strict=False))
    assert turns[-1]["role"] == "user" and turns[-1]["content"][-1] == {"type": "text", "text": cc.compact_prompt()}
    blocks = [(t["role"], b) for t in turns for b in t["content"]]
    uses = [b["id"] for role, b in blocks if b["type"] == "tool_use" and role == "assistant"]
    results = [b["tool_use_id"] for role, b in blocks if b["type"] == "tool_result" and role == "user"]
    assert uses and sorted(uses) == sorted(results)  # every call with its result, as the API requires
    # The sample's own words and tool calls, not a flattened rendering of them.
    first_prompt = next(
        r["message"]["content"]
        for r in map(json.loads, CLAUDE_SAMPLE.read_text().splitlines())
        if r.get("type") == "user" and isinstance(r.get("message", {}).get("content"), str)
    )
    assert {"type": "text", "text": first_prompt} in [b for _, b in blocks]
    assert not any("[tool_use " in b.get("text", "") for _, b in blocks)
    (shown,) = preview_selectors.preview_json(preview_selectors.preview_for_run(run=run))["requests"]
    assert shown["sent_as"] == "messages" and shown["api_messages"] == len(turns)


def test_a_reviewer_chooses_another_model_for_one_run(anthropic_api, settings, client_in):
    settings.SUMMARY_MODEL = FALLBACK
    path, overrides = SAMPLES["khaelor"]
    session = imported(path)
    form = {"strategy": "khaelor", **{k: str(v) for k, v in overrides.items()}}
    preview = client_in.get(f"/sessions/{session.pk}/preview.json", form).json()
    assert preview["summary_model"]["model"] == OWN["khaelor"] and preview["summary_model"]["source"] == "agent"
    assert [r["sent_as"] for r in preview["requests"]] == ["text"]  # one user message around the transcript
    page = client_in.get(f"/sessions/{session.pk}/preview/", form).content.decode()
    assert 'name="summary_model"' in page and f'placeholder="{OWN["khaelor"]}"' in page

    created = client_in.post(f"/sessions/{session.pk}/runs/?format=json", {**form, "summary_model": "claude-opus-4-1"})
    assert created.status_code == 201, created.content
    assert created.json()["model"] == "claude-opus-4-1" and created.json()["model_source"] == "override"
    run_worker()
    assert [body["model"] for body in anthropic_api.requests] == ["claude-opus-4-1"]
    data = client_in.get(created.json()["url"].rstrip("/") + ".json").json()
    assert data["status"] == "succeeded" and data["model_source"] == "override"
    assert f"KHAELOR would use {OWN['khaelor']}" in data["model_note"]

    # A retry of a failed run keeps that run's choice; the next run, without the field, is the agent's own again.
    anthropic_api.script(status(401))
    failed = started("khaelor", model="claude-opus-4-1")
    run_worker()
    failed.refresh_from_db()
    assert failed.status == Run.Status.FAILED
    retried = run_services.retry_run(run=failed, user=None)
    assert (retried.model, retried.model_source, retried.model_note) == (
        failed.model,
        failed.model_source,
        failed.model_note,
    )
    again = started("khaelor")
    assert again.model == OWN["khaelor"] and again.model_source == "agent"

    refused = client_in.post(f"/sessions/{session.pk}/runs/?format=json", {**form, "summary_model": "no spaces"})
    assert refused.status_code == 400 and "is not a model name" in refused.json()["error"]


def test_compact_takes_a_model_on_the_command_line(anthropic_api, settings, capsys):
    settings.SUMMARY_MODEL = FALLBACK
    path, _ = SAMPLES["claude-code"]
    session = imported(path)
    call_command("compact", str(session.pk), "--model", "claude-sonnet-4-5", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "succeeded" and data["model_source"] == "override"
    assert [body["model"] for body in anthropic_api.requests] == ["claude-sonnet-4-5"]
    call_command("compact", str(session.pk), "--dry-run")
    assert f"summary model: {OWN['claude-code']} (Claude Code's own" in capsys.readouterr().out


def test_klaudes_request_is_what_its_anthropic_provider_sends(anthropic_api, client_in):
    """klaude-code 2.8.1's llm/anthropic build_payload, on the wire: the identity block before the summarizer's
    system prompt, each text part its own block (the last one cached), temperature, tool_choice, no tools, and
    the betas header (the golden test checks the same body against klaude's own code on every checkpoint)."""
    run = started("klaude-code")
    run_worker()
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    ephemeral = {"type": "ephemeral"}
    shown = preview_selectors.preview_json(preview_selectors.preview_for_run(run=run))["requests"]
    sent = zip(anthropic_api.requests, anthropic_api.request_headers, shown, strict=True)
    for body, headers, request in sent:
        assert body["model"] == OWN["klaude-code"] and body["max_tokens"] == request["max_tokens"]
        assert body["system"] == [
            {
                "type": "text",
                "text": "You are Claude Code, Anthropic's official CLI for Claude.",
                "cache_control": ephemeral,
            },
            {"type": "text", "text": kc.SUMMARIZATION_SYSTEM_PROMPT, "cache_control": ephemeral},
        ]
        ((role, blocks),) = [(m["role"], m["content"]) for m in body["messages"]]
        assert role == "user" and len(blocks) >= 2 and blocks[0]["text"].startswith("<conversation>\n")
        assert [b.get("cache_control") for b in blocks] == [None] * (len(blocks) - 1) + [ephemeral]
        assert len("".join(b["text"] for b in blocks)) == request["user_chars"]  # the text the preview showed
        assert (body["temperature"], body["tools"]) == (1.0, [])
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": False}
        assert "thinking" not in body and headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
        # The preview says so: the system blocks as sent, the number of text blocks.
        assert request["system_blocks"] == [block["text"] for block in body["system"]]
        assert request["user_blocks"] == len(blocks)
    form = {"strategy": "klaude-code", "keep_recent_tokens": "500"}
    page = client_in.get(f"/sessions/{run.session_id}/preview/", form).content.decode()
    assert "System prompt (2 blocks, as the agent's client sends it)" in page
    assert '<pre tabindex="0">You are Claude Code, Anthropic&#x27;s official CLI for Claude.</pre>' in page
    assert f"one user message of {len(blocks)} text blocks" in page


def test_khaelors_request_is_seed_002s(anthropic_api):
    """summarizeToCheckpointText's ModelRequest (the oracle's port of seed 002) for the sample's cut: its aux
    model, its system prompt as a block, the transcript in one text block, no tools, 2,000 output tokens."""
    run = started("khaelor")
    run_worker()
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    path, overrides = SAMPLES["khaelor"]
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    params = KhaelorParams(protect_tail_tokens=int(str(overrides["protect_tail_tokens"])))
    cut = oracle.seed_select_compaction_cut(events, params)
    prune = oracle.seed_select_prune_candidates(events, params)
    assert cut is not None
    if prune["toolUseIds"]:  # the kernel records the prune first, then compresses over the log that holds it
        events = [*events, {"seq": events[-1]["seq"] + 1, "type": "context.pruned", "payload": prune}]
    transcript = oracle.seed_render_transcript(
        oracle.build_conversation(oracle.seed_extract_cut_events(events, cut)), params
    )
    expected = oracle.seed_model_request(model=OWN["khaelor"], transcript=transcript, max_output_tokens=2_000)
    assert anthropic_api.requests == [oracle.messages_api_body(expected)]
