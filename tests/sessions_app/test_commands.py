"""Management commands, run as a user would run them, on the real samples."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tests.compaction.formats.claude_code_expected import EXPECTED
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.django_db


def run(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_every_claude_code_sample_imports_and_reproduces_sources_md():
    report = run("import_sessions", str(CLAUDE_SAMPLES))
    assert report["rejected"] == []
    imported = {item["path"].rsplit("/", 1)[-1]: item for item in report["imported"]}
    # 20 top-level transcripts + 2 spotter subagent files
    assert len(imported) == len(EXPECTED) + 2
    assert all(item["errors"] == [] for item in imported.values())
    spotter = imported["spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"]["session"]
    assert imported["agent-aac57f5.jsonl"]["session"] == spotter
    assert imported["agent-acompact-946d2b.jsonl"]["session"] == spotter

    mismatches = []
    for name, (calls_main, calls_side, max_main, max_side, compactions, microcompacts) in EXPECTED.items():
        stats = run("session_stats", str(CLAUDE_SAMPLES / name))
        got = (
            stats["api_calls"]["main"],
            stats["api_calls"]["side"],
            stats["max_context"]["main"],
            stats["max_context"]["side"],
            [(e["trigger"], e["pre_tokens"]) for e in stats["events"] if e["kind"] == "compaction"],
            [
                (e["trigger"], e["pre_tokens"], e["tokens_saved"])
                for e in stats["events"]
                if e["kind"] == "microcompact"
            ],
        )
        want = (calls_main, calls_side, max_main, max_side, compactions, [m[:3] for m in microcompacts])
        if got != want:
            mismatches.append((name, got, want))
    assert mismatches == []


def test_after_call_counts_main_calls_before_the_event():
    run("import_sessions", str(CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"))
    stats = run("session_stats", str(CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"))
    (compaction,) = [e for e in stats["events"] if e["kind"] == "compaction"]
    # SOURCES.md: the boundary follows the last pre-compaction call; 12 calls in all, the summary turn after it.
    assert 0 < compaction["after_call"] < stats["api_calls"]["main"]


def test_import_json_shape_and_idempotence(tmp_path):
    path = CLAUDE_SAMPLES / "spotter_short.jsonl"
    first = run("import_sessions", str(path))
    second = run("import_sessions", str(path))
    assert set(first) == {"imported", "rejected"}
    (item,) = first["imported"]
    assert set(item) == {"session", "path", "format", "created", "lines", "errors", "warnings", "agent"}
    assert item["format"] == "claude-code" and item["created"] is True and item["lines"] == 15
    assert second["imported"][0]["created"] is False and second["imported"][0]["session"] == item["session"]


def test_import_reports_rejected_files(tmp_path):
    (tmp_path / "notes.jsonl").write_text('{"a": 1}\n')
    report = run("import_sessions", str(tmp_path / "notes.jsonl"), str(tmp_path / "missing.jsonl"))
    assert report["imported"] == []
    assert [r["path"].rsplit("/", 1)[-1] for r in report["rejected"]] == ["notes.jsonl", "missing.jsonl"]
    assert all(r["message"] for r in report["rejected"])


def test_session_stats_unknown_session_is_a_clear_error():
    with pytest.raises(CommandError, match="No session matches"):
        call_command("session_stats", "does-not-exist")
