"""KHAELOR runs: its own summary model by default, its own checkpoint format offline."""

from __future__ import annotations

import re

import pytest

from compaction.strategies.khaelor import parse_checkpoint
from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.anthropic_server import ok
from tests.conftest import KHAELOR_SAMPLES
from tests.helpers.runs import imported

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
SAMPLE = KHAELOR_SAMPLES / "ledger-migration.events.jsonl"
AUX_MODEL = "claude-haiku-4-5"  # the sample's session.started auxModel


def sample_preview() -> preview_selectors.Preview:
    session = imported(SAMPLE)
    # A small protected tail leaves a middle to summarise at the sample's end.
    preview = preview_selectors.build_preview(
        session=session, strategy="khaelor", overrides={"protect_tail_tokens": 500}
    )
    assert preview.runnable, preview.error or preview.refused
    return preview


def test_a_run_sends_the_sessions_aux_model_not_summary_model(anthropic_api, settings):
    settings.SUMMARY_MODEL = "claude-sonnet-4-5"  # the fallback, for agents whose model is not known
    anthropic_api.script(ok("objective: migrate the ledger\n"))
    run = run_services.execute_run(run_id=run_services.create_run(preview=sample_preview(), user=None).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    (body,) = anthropic_api.requests
    assert body["model"] == run.model == AUX_MODEL


def test_an_offline_run_stores_a_clean_checkpoint(offline):
    run = run_services.execute_run(run_id=run_services.create_run(preview=sample_preview(), user=None).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    checkpoint = parse_checkpoint(run.summary)
    assert checkpoint is not None
    assert checkpoint.objective == "Migrate the ledger service from SQLAlchemy 1.4 to 2.0 and keep every test green."
    assert any(f.path == "ledger/models_4.py" for f in checkpoint.important_files)
    assert "/dev/" not in run.summary and "<" not in run.summary
    assert not re.search(r"^\s*(?:-\s*)?\d+(?:→|\t)", run.summary, re.MULTILINE)


def test_the_preview_page_names_the_model_a_run_will_send(anthropic_api, settings, client_in):
    settings.SUMMARY_MODEL = "claude-sonnet-4-5"
    session = imported(SAMPLE)
    page = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "khaelor", "protect_tail_tokens": 500})
    assert f'Summarised with <strong class="summary-model">{AUX_MODEL}</strong> through the Anthropic API' in (
        page.content.decode()
    )


@pytest.mark.parametrize("after_call", [24, 28])
def test_after_the_real_compaction_the_preview_counts_no_replaced_event(client_in, after_call):
    # Issue 32: the sample's real compaction (after call 23, cut fromSeq 4 toSeq 35) replaced those events by its
    # checkpoint. KHAELOR's own cut (compaction.ts selectCompactionCut walks the whole log) still lies inside that
    # range; the preview must price it as what it is in the context: nothing, never a "middle" of replaced output.
    session = imported(SAMPLE)
    data = client_in.get(f"/sessions/{session.pk}/preview.json", {"strategy": "khaelor", "at": after_call}).json()
    assert data["after_call"] == after_call and data["error"] is None
    segments = data["segments"]
    assert sum(s["tokens_estimate"] for s in segments.values()) == data["tokens_before"]
    assert segments["middle"]["tokens_estimate"] == 0 == data["cut"]["tokens_in_context"]
    assert 0 < data["tokens_after_estimate"] == data["tokens_before"]
    assert "already replaced by an earlier compaction" in data["reason"]
    # No summarised item is priced as if it were still in the context.
    assert segments["middle"]["items"] and all(i["tokens_estimate"] == 0 for i in segments["middle"]["items"])

    page = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "khaelor", "at": after_call}).content.decode()
    before = re.search(r'id="tokens-before">([\d,]+)<', page)
    after = re.search(r'id="tokens-after">([\d,]+)<', page)
    assert before and after and before.group(1) == after.group(1) != "0"
    assert re.search(r"<strong>Summarised</strong>\s*· \d+ messages? \([\d,]+–[\d,]+\) · ≈0 tokens", page)
