"""``manage.py replay`` and ``manage.py layers`` on the real Claude Code samples (issue 17's bar).

Expected numbers come from the samples' own records (``session_stats --json`` events, compactMetadata,
microcompactMetadata; samples/claude-code/SOURCES.md), never from the code under test.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import orjson
import pytest
from django.core.management import call_command

from sessions_app import services
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.django_db

# SOURCES.md: the Claude Code samples with an auto compact_boundary.
AUTO_COMPACTED = (
    "entirecli_a6e4c2a0fbd1-0_full.jsonl",
    "entirecli_7662d755ef9f-2_full.jsonl",
    "entirecli_f9f6f611b469-0_full.jsonl",
    "entirecli_a5d8ec9bae67-0_full.jsonl",
)


def imported(name: str) -> int:
    outcome = services.import_file(path=CLAUDE_SAMPLES / name)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return outcome.session


def run_json(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


@pytest.mark.parametrize("name", AUTO_COMPACTED)
def test_replay_of_claude_code_compacts_within_one_call_of_each_real_auto_compaction(name: str) -> None:
    session = str(imported(name))
    stats = run_json("session_stats", session)
    real = [e for e in stats["events"] if e["kind"] == "compaction" and e["trigger"] == "auto" and e["agent"] == "main"]
    assert real
    replayed = run_json("replay", session, "--strategy", "claude-code")
    assert replayed["reproduces"] is True
    fired = [e["after_call"] for e in replayed["events"] if e["kind"] == "compaction"]
    counted = {call: value for call, value in replayed["counted"]}
    for event in real:
        assert any(abs(call - event["after_call"]) <= 1 for call in fired), (event, fired)
        # tokenCountWithEstimation at the real boundary (before the call after it), within 1% of the preTokens
        # Claude Code wrote.
        assert abs(counted[event["after_call"] + 1] - event["pre_tokens"]) <= event["pre_tokens"] / 100
    rows = [r for r in replayed["recorded_vs_replayed"] if r["kind"] == "compaction" and r["real_trigger"] == "auto"]
    assert [r["real_after_call"] for r in rows] == [e["after_call"] for e in real]
    assert all(r["replayed_after_call"] is not None and r["reason"] for r in rows)


def test_layers_before_the_real_microcompact_clear_the_same_29_results() -> None:
    name = "entirecli_f9f6f611b469-0_full.jsonl"
    session = str(imported(name))
    stats = run_json("session_stats", session)
    [microcompact] = [e for e in stats["events"] if e["kind"] == "microcompact"]
    call = microcompact["after_call"]  # the call before it: its layers run before the next request
    report = run_json("layers", session, "--at", str(call))
    assert [layer["number"] for layer in report["layers"]] == [1, 2, 3, 4, 5, 6]
    layer3 = report["layers"][2]
    [real] = [e for e in report["real_events"] if e["record"] == "system/microcompact_boundary"]
    assert len(real["tool_ids"]) == 29  # SOURCES.md: 29 compactedToolIds
    assert layer3["acts"] and sorted(layer3["tool_ids"]) == sorted(real["tool_ids"])
    assert layer3["removes"] > 0 and layer3["tokens_after"] == report["tokens_before"] - layer3["removes"]
    # 2.1.20 is outside external reactive compaction; autocompact acts after the microcompact, as it really did
    # (compact_boundary line 372 right after the microcompact line 371).
    autocompact = report["layers"][4]
    assert autocompact["acts"]
    assert not report["layers"][1]["enabled"] and not report["layers"][3]["enabled"]
    out = StringIO()
    call_command("layers", session, "--at", str(call), stdout=out)
    text = out.getvalue()
    assert "3. Microcompact [acts]" in text and "29 tool results" in text


def test_replay_text_lists_recorded_vs_replayed() -> None:
    session = str(imported("entirecli_f9f6f611b469-0_full.jsonl"))
    out = StringIO()
    call_command("replay", session, "--strategy", "claude-code", stdout=out)
    text = out.getvalue()
    assert "recorded vs replayed:" in text
    assert "compaction: real after call 67 (176,700); replayed after call 67" in text
    assert "same 29 results cleared" in text
    # The real context after the compaction beside the replayed one (it follows the real one: the same).
    assert "(context after: real 46,694, replayed 46,694)" in text
    modelled = StringIO()
    call_command("replay", session, "--strategy", "claude-code", "--no-follow-reality", stdout=modelled)
    assert "(context after: real 46,694, replayed " in modelled.getvalue()


def test_legacy_microcompact_as_a_what_if_is_a_parameter_and_says_so() -> None:
    # cipherbox (2.1.49): outside 2.1.12–2.1.22, so by default no legacy microcompact runs.
    session = str(imported("cipherbox_c644f3afc869-1_full.jsonl"))
    default = run_json("replay", session, "--strategy", "claude-code")
    assert default["reproduces"] is True and default["prunes"] == 0
    forced = run_json("replay", session, "--strategy", "claude-code", "--param", "legacy_microcompact=true")
    assert forced["reproduces"] is False
    assert any("forced on" in note for note in forced["notes"])
