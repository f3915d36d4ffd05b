"""Two summaries compared: word runs that rebuild each text, and each agent's sections flagged when missing or empty."""

from __future__ import annotations

import json

from compaction.formats.klaude_code import history_messages, parse_session
from compaction.summary_diff import compare, sections, word_diff
from tests.conftest import KHAELOR_SAMPLES, KLAUDE_SAMPLES


def test_word_runs_rebuild_both_texts_and_mark_only_real_changes() -> None:
    left = "Fixed the division by zero in app.py.\nNext: add tests."
    right = "Fixed the bug in app.py.\nNext:   add tests and docs."
    a, b = word_diff(left, right)
    assert "".join(t for t, _ in a) == left and "".join(t for t, _ in b) == right
    assert [t for t, tag in a if tag == "delete"] == ["division by zero"]
    assert [t.strip() for t, tag in b if tag == "insert"] == ["bug", "and docs"]  # the full stop is in both
    # Whitespace alone is never a difference ("Next:   add" against "Next: add").
    assert all(t.strip() for t, tag in a + b if tag != "equal")
    assert compare(left, right, strategy="none").changed_words == 3 + 1 + 2


def test_klaude_headings_from_the_compacted_sample() -> None:
    folder = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/bd8ec9a1f80345edbd7c9ec7081ab44d"
    messages = history_messages(parse_session(folder / "events.jsonl")[1])
    summary = next(m for m in messages if m.kind == "compact_summary").text
    found = {s.name: s.state for s in sections(summary, strategy="klaude-code")}
    assert found["Goal"] == "ok" and found["Next Steps"] == "ok"
    trimmed = summary.replace("## Key Decisions", "## Something Else")
    assert {s.name: s.state for s in sections(trimmed, strategy="klaude-code")}["Key Decisions"] == "missing"


def test_khaelor_checkpoint_fields_from_the_sample() -> None:
    lines = (KHAELOR_SAMPLES / "ledger-migration.events.jsonl").read_text().splitlines()
    checkpoint = next(json.loads(x) for x in lines if '"context.compacted"' in x)["payload"]["checkpointYaml"]
    found = {s.name: s for s in sections(checkpoint, strategy="khaelor")}
    assert found["failed_attempts"].state == "empty"  # "failed_attempts: []"
    assert found["objective"].state == "ok" and found["objective"].body.startswith("Migrate the ledger service")
    # running_processes is not a field the model writes, but it still ends next_steps.
    assert found["next_steps"].body == "- Convert models_4.py and models_5.py"
    assert all(s.state != "missing" for s in found.values())


def test_claude_code_sections_missing_and_empty() -> None:
    left = "Summary:\n1. Primary Request and Intent: fix it\n4. Errors and fixes: none\n7. Pending Tasks: write tests\n"
    right = "Summary:\n1. Primary Request and Intent: fix it\n7. Pending Tasks:\n"
    rows = {r.name: r for r in compare(left, right, strategy="claude-code").sections}
    assert len(rows) == 9
    assert (rows["Errors and fixes"].left.state, rows["Errors and fixes"].right.state) == ("empty", "missing")
    assert (rows["Pending Tasks"].left.state, rows["Pending Tasks"].right.state) == ("ok", "empty")
    assert rows["Primary Request and Intent"].same and not rows["Primary Request and Intent"].flagged
    assert rows["Key Technical Concepts"].flagged  # in neither
