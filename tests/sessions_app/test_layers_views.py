"""The layers waterfall (timeline call panel, diagnosis, JSON twins) and the recorded-vs-replayed table.

Expected values come from the samples' own records (microcompactMetadata, compactMetadata, session_stats).
"""

from __future__ import annotations

import pytest

from sessions_app import models, services
from sessions_app.selectors import calls as call_selectors
from tests.conftest import CLAUDE_SAMPLES
from tests.helpers.htmx import HTMX

pytestmark = pytest.mark.django_db

# SOURCES.md: 2.1.20, a microcompact (29 tool ids) right before an auto compaction (preTokens 176,700).
MICRO_AND_COMPACTION = "entirecli_f9f6f611b469-0_full.jsonl"


def import_sample(name: str) -> models.Session:
    outcome = services.import_file(path=CLAUDE_SAMPLES / name)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return models.Session.objects.get(pk=outcome.session)


def real_microcompact(session: models.Session) -> models.ContextEvent:
    return models.ContextEvent.objects.get(session=session, kind="microcompact")


def test_the_call_panel_shows_the_layers_before_its_request(client_in) -> None:
    session = import_sample(MICRO_AND_COMPACTION)
    stats = call_selectors.session_stats(session=session).as_json()
    [micro] = [e for e in stats["events"] if e["kind"] == "microcompact"]
    call = micro["after_call"] + 1  # the first request after the real microcompact
    data = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"call": call, "format": "json"}).json()
    layers = data["layers"]
    assert (layers["after_call"], layers["next_call"]) == (call - 1, call)
    third = layers["layers"][2]
    assert third["acts"] and sorted(third["tool_ids"]) == sorted(real_microcompact(session).tool_ids)
    fragment = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"call": call}, **HTMX).content.decode()
    assert 'class="waterfall"' in fragment and 'data-layer="3"' in fragment
    assert "3. Microcompact" in fragment and "29 tool results" in fragment
    # The first call has no request before it to shape.
    first = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"call": 1, "format": "json"}).json()
    assert first["layers"] is None


def test_the_diagnosis_shows_the_layers_at_the_crossing_call(client_in) -> None:
    session = import_sample(MICRO_AND_COMPACTION)
    report = client_in.get(f"/sessions/{session.pk}/diagnosis.json").json()
    crossing = next(c for c in report["crossings"] if c["line"] in ("autocompact", "window"))
    layers = report["layers_at_crossing"]
    assert layers is not None and layers["next_call"] == crossing["call"]
    assert [layer["number"] for layer in layers["layers"]] == [1, 2, 3, 4, 5, 6]
    page = client_in.get(f"/sessions/{session.pk}/diagnosis/").content.decode()
    assert 'class="waterfall"' in page and "5. Autocompact" in page


def test_recorded_vs_replayed_table_on_a_session_with_a_compaction_and_a_microcompact(client_in) -> None:
    session = import_sample(MICRO_AND_COMPACTION)
    micro = real_microcompact(session)
    compaction = models.ContextEvent.objects.get(session=session, kind="compaction")
    data = client_in.get(f"/sessions/{session.pk}/timeline.json", {"replay": "claude-code"}).json()
    replayed = data["replays"]["claude-code"]
    assert replayed["reproduces"] is True
    rows = {row["kind"]: row for row in replayed["recorded_vs_replayed"]}
    assert set(rows) == {"compaction", "prune"}
    assert rows["compaction"]["real_tokens_before"] == compaction.pre_tokens == 176_700
    assert rows["compaction"]["real_trigger"] == "auto"
    assert rows["compaction"]["call_difference"] == 0
    assert abs(rows["compaction"]["tokens_difference"]) <= 176_700 // 100
    assert rows["prune"]["real_after_call"] == rows["prune"]["replayed_after_call"]
    assert f"same {len(micro.tool_ids)} results cleared" in rows["prune"]["reason"]
    page = client_in.get(f"/sessions/{session.pk}/timeline/", {"replay": "claude-code"}).content.decode()
    assert 'class="recorded-vs-replayed"' in page
    assert page.count('class="comparison comparison-') == 2
    assert "same 29 results cleared" in page and "176700" in page
    # What really happened after the compaction, beside what the replay sends after its own.
    after = rows["compaction"]["real_context_after"]
    assert after is not None and after == rows["compaction"]["replayed_context_after"]  # it follows the real one
    assert "Real context after" in page and f"{after:,}" in page


def test_the_waterfall_reads_plainly_and_draws_without_inline_styles(client_in) -> None:
    # The CSP allows no inline style; users cannot open our internal docs; flag names mean nothing to them.
    session = import_sample("entirecli_f9f6f611b469-0_full.jsonl")
    page = client_in.get(f"/sessions/{session.pk}/diagnosis/").content.decode()
    waterfall = page[page.index('<table class="waterfall">') : page.index("</table>", page.index("waterfall"))]
    assert "<meter" in waterfall and "style=" not in waterfall
    for internal in ("§", "docs/", "tengu_", "marble"):
        assert internal not in waterfall, internal
