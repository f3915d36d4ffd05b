"""One cache-miss reading: the timeline's markers and the diagnosis report the same misses on every sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.prompt_cache import MICROCOMPACT_CAUSE
from compaction.transcript import MAIN
from sessions_app import models, services
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import timeline as timeline_selectors
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.django_db

SAMPLE_FILES = sorted(
    [
        *CLAUDE_SAMPLES.glob("*.jsonl"),
        *KLAUDE_SAMPLES.glob("dot-klaude/projects/*/sessions/*/events.jsonl"),
        *KHAELOR_SAMPLES.glob("*.jsonl"),
    ]
)


def imported(path: Path) -> models.Session:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    assert outcome.session is not None
    return models.Session.objects.get(pk=outcome.session)


def reported_misses(session: models.Session) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
    events = timeline_selectors.timeline(session=session)["events"]
    on_timeline = [
        (m["call"], m["recreated_tokens"], m["cause"])
        for m in events
        if m["kind"] == "cache_miss" and m["agent"] == MAIN
    ]
    in_diagnosis = [
        (m["call"], m["recreated_tokens"], m["cause"])
        for m in diagnosis_selectors.diagnosis(session=session)["cache"]["misses"]
    ]
    return sorted(on_timeline), sorted(in_diagnosis)


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_timeline_markers_and_diagnosis_report_the_same_cache_misses(path: Path) -> None:
    on_timeline, in_diagnosis = reported_misses(imported(path))
    assert on_timeline == in_diagnosis


def test_the_microcompact_miss_has_the_same_cause_in_both() -> None:
    # SOURCES.md / docs/formats/claude-code.md §7: after the microcompact cache_read collapses 151,207 -> 19,330
    # and 108,361 tokens are written again.
    on_timeline, in_diagnosis = reported_misses(imported(CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"))
    assert (7, 108_361, MICROCOMPACT_CAUSE) in on_timeline  # the 7th call missed
    assert on_timeline == in_diagnosis
