"""Exports that do what they say: export → import gives one new compaction at the point.

For each agent a run at a point inside the session (not its end) is accepted and exported; the export is
imported back with the project's own parser. The head and the kept tail stay, the summarised middle is gone, and
there is exactly one new compaction event, where the agent would have written it. When the agent compacted again
after the point the export ends at the point (its loader resumes from the last compaction); otherwise the records
recorded after the point come back unchanged and in order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.formats.context_records import COMPACTION_RECORD_TYPES
from sessions_app import models, run_services
from sessions_app.selectors import previews as preview_selectors
from tests.conftest import CLAUDE_SAMPLES, KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import finished_run, imported
from tests.helpers.sample_sessions import khaelor_with_usage

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
KLAUDE_COMPACTED = (
    KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/bd8ec9a1f80345edbd7c9ec7081ab44d"
)
CLAUDE_COMPACTED = CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"


def _rows(session: models.Session) -> list[models.Message]:
    return list(models.Message.objects.filter(session=session).order_by("seq"))


def _same(row: models.Message) -> tuple[str, str, str, str, object]:
    """What a record says, whatever line or seq it was given: who, what kind, and its content."""
    return (row.agent, row.role, row.kind, row.raw_type, row.blocks)


def _export(client, run: Run) -> bytes:
    run_services.review_run(run=run, user=None, decision="accepted", comment="keeps everything")
    response = client.get(f"/runs/{run.pk}/export/")
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def _compactions(session: models.Session) -> list[models.ContextEvent]:
    return list(models.ContextEvent.objects.filter(session=session, kind="compaction").order_by("seq"))


def _point_line(run: Run) -> int:
    plan = preview_selectors.preview_for_run(run=run).plan
    assert plan is not None and plan.following_line is not None, "the point must lie inside the session"
    return plan.following_line


def _check_round_trip(
    original: models.Session,
    again: models.Session,
    run: Run,
    stop_line: int,
    *,
    append_only: bool,
    ends_at_point: bool = False,
) -> None:
    """The records after the point come back in order and unchanged (none when the export ends at the point);
    one new compaction.

    ``append_only``: the agent never rewrites its log (klaude-code, KHAELOR), so the summarised middle stays in
    the file and leaves only the model's view; Claude Code's compacted file has no middle at all.
    """
    before = _rows(original)
    assert any(r.line >= stop_line for r in before), "a point inside the session has records after it"
    after_point = [] if ends_at_point else [_same(r) for r in before if r.line >= stop_line]
    rows = _rows(again)
    if after_point:
        assert [_same(r) for r in rows[-len(after_point) :]] == after_point  # nothing after the point is lost
    else:
        assert max(r.line for r in rows) <= stop_line  # the new compaction record is the last line
    conversation = preview_selectors.preview_for_run(run=run).messages
    middle_lines = {m.line for m in conversation[run.cut_start : run.cut_end]}

    def kept(row: models.Message) -> bool:
        """A conversation record that is not the agent's compaction bookkeeping."""
        return (
            row.agent == "main"
            and row.kind not in ("unknown", "bookkeeping", "compact_summary")
            and row.raw_type not in COMPACTION_RECORD_TYPES
        )

    head_and_tail = [
        _same(r) for r in before if r.line < stop_line and (append_only or r.line not in middle_lines) and kept(r)
    ]
    # Before the point the export holds the head and the kept tail, in order; the summarised middle is gone.
    assert [_same(r) for r in rows[: len(rows) - len(after_point)] if kept(r)] == head_and_tail
    old = [e for e in _compactions(original) if not ends_at_point or e.line < stop_line]
    new = _compactions(again)
    assert len(new) == len(old) + 1


# ---------------------------------------------------------------------------------------------- Claude Code


def test_claude_code_export_before_the_samples_own_compaction_ends_at_the_point(client_in, tmp_path, offline):
    session = imported(CLAUDE_COMPACTED)
    # After call 4: the sample's own compaction (line 31) and 8 more calls come later. Claude Code resumes from
    # the last compact_boundary, so an export that kept them would resume from the sample's own summary.
    run = finished_run(session, after_call=4, cut_start=1)
    stop_line = _point_line(run)
    said = client_in.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["ends_at_point"] is True and said["later_compactions"] == 1 and not said["available"]
    assert "compact_boundary" in said["why"]
    body = _export(client_in, run)
    said = client_in.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["available"] and said["url"] == f"/runs/{run.pk}/export/" and said["ends_at_point"] is True
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="export-shape"' in page and "The export ends at the point" in page
    path = tmp_path / "exported" / "session.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    _check_round_trip(session, again, run, stop_line, append_only=False, ends_at_point=True)

    original_lines = CLAUDE_COMPACTED.read_bytes().splitlines()
    exported = body.splitlines()
    # Nothing is kept after the cut, so the export is the head, the boundary and the summary, and stops there.
    boundary, summary = json.loads(exported[-2]), json.loads(exported[-1])
    assert boundary["subtype"] == "compact_boundary" and summary["isCompactSummary"] is True
    assert summary["parentUuid"] == boundary["uuid"] and boundary["parentUuid"] is None
    # Both carry the time of the last record before the point, as Claude Code writes it.
    assert boundary["timestamp"] == summary["timestamp"] == json.loads(original_lines[stop_line - 2])["timestamp"]
    assert [e.trigger for e in _compactions(again)] == ["manual"]
    assert all(line in original_lines[: stop_line - 1] for line in exported[:-2])


# ---------------------------------------------------------------------------------------------- klaude-code


def _klaude_export(client, tmp_path: Path, after_call: int) -> tuple[models.Session, models.Session, Run, bytes, int]:
    session = imported(KLAUDE_COMPACTED / "events.jsonl")
    run = finished_run(session, strategy="klaude-code", after_call=after_call)
    stop_line = _point_line(run)
    body = _export(client, run)
    target = tmp_path / "k" / "events.jsonl"
    target.parent.mkdir()
    target.write_bytes(body)
    (target.parent / "meta.json").write_bytes((KLAUDE_COMPACTED / "meta.json").read_bytes())
    return session, imported(target), run, body, stop_line


def test_klaude_export_before_its_own_compaction_ends_at_the_point(client_in, tmp_path, offline):
    # After call 13 the history has 31 items; klaude's own compaction comes at index 44 (keeping from 40), and
    # klaude resumes from the newest CompactionEntry: the export ends with ours.
    session, again, run, body, stop_line = _klaude_export(client_in, tmp_path, 13)
    _check_round_trip(session, again, run, stop_line, append_only=True, ends_at_point=True)
    original = (KLAUDE_COMPACTED / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines = body.splitlines(keepends=True)
    inserted = stop_line - 1  # 0-based: the entry takes the first line after the point
    assert lines[:inserted] == original[:inserted] and len(lines) == inserted + 1
    entry = json.loads(lines[inserted])
    assert entry["type"] == "CompactionEntry" and entry["data"]["first_kept_index"] == run.first_kept
    # The time of the item before it, as klaude wrote it (naive local time).
    assert entry["data"]["created_at"] == json.loads(original[inserted - 1])["data"]["created_at"]
    compactions = _compactions(again)
    calls_before = models.ApiCall.objects.filter(session=session, agent="main", number__lte=13).count()
    assert len(compactions) == 1 and compactions[0].after_call == calls_before and compactions[0].line == stop_line


def test_klaude_export_after_its_own_compaction_keeps_every_item_after_the_point(client_in, tmp_path, offline):
    """No CompactionEntry follows the point: the export keeps every item recorded after it, as before."""
    session = imported(KLAUDE_COMPACTED / "events.jsonl")
    conversation = preview_selectors.preview_for_run(run=finished_run(session, strategy="klaude-code")).plan
    assert conversation is not None
    entry = next(m.line for m in conversation.messages if m.kind == "compact_summary")
    # The last point past klaude's own entry that still has records after it.
    point = [p for p in conversation.points if conversation.messages[p.position - 1].line > entry][-2]
    run = finished_run(session, strategy="klaude-code", after_call=point.call)
    stop_line = _point_line(run)
    said = client_in.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["ends_at_point"] is False and said["later_compactions"] == 0
    body = _export(client_in, run)
    target = tmp_path / "k" / "events.jsonl"
    target.parent.mkdir()
    target.write_bytes(body)
    again = imported(target)
    _check_round_trip(session, again, run, stop_line, append_only=True)
    original = (KLAUDE_COMPACTED / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines = body.splitlines(keepends=True)
    assert len(lines) == len(original) + 1 and lines[stop_line:] == original[stop_line - 1 :]


# ---------------------------------------------------------------------------------------------- KHAELOR


def test_khaelor_export_before_its_own_compaction_ends_at_the_point(client_in, tmp_path, offline):
    source = khaelor_with_usage(tmp_path / "ledger.events.jsonl")
    session = imported(source)
    assert models.ApiCall.objects.filter(session=session, agent="main").count() > 10
    after_call = 6  # inside the range the sample's own compaction summarised later: its checkpoint would win
    run = finished_run(session, strategy="khaelor", after_call=after_call, cut_start=1)
    stop_line = _point_line(run)
    said = client_in.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["ends_at_point"] is True and "context.compacted" in said["why"]
    body = _export(client_in, run)
    path = tmp_path / "exported" / "ledger.events.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    _check_round_trip(session, again, run, stop_line, append_only=True, ends_at_point=True)

    events = [json.loads(line) for line in body.splitlines()]
    original = [json.loads(line) for line in source.read_text().splitlines()]
    assert events[:-1] == original[: stop_line - 1]  # the events before the point, unchanged
    ours = events[-1]
    assert ours["type"] == "context.compacted" and ours["seq"] == stop_line
    assert ours["ts"] == original[stop_line - 2]["ts"]  # the time of the event before it
    assert ours["payload"]["checkpointYaml"] == run.summary and ours["payload"]["trigger"] == "user-command"
    assert ours["payload"]["summaryModel"] == run.model
    assert ours["payload"]["tokensBefore"] == preview_selectors.preview_for_run(run=run).tokens_before
    conversation = preview_selectors.preview_for_run(run=run).messages
    middle = [m.data["seq"] for m in conversation[run.cut_start : run.cut_end] if m.raw_type != "model.usage"]
    assert ours["payload"]["cut"]["fromSeq"] == middle[0]
    compactions = _compactions(again)
    assert len(compactions) == 1 and compactions[0].line == stop_line and compactions[0].trigger == "user-command"
    assert compactions[0].after_call == after_call


def test_claude_code_export_with_a_kept_tail_and_records_after_the_point(client_in, tmp_path, offline):
    """Head, boundary and summary, the kept tail (re-linked past the middle), then the records after the point."""
    session = imported(cc_session(tmp_path))
    # Calls 1-4 are msg_1..msg_4: summarise what followed call 1 up to after call 2, keep up to after call 3.
    run = finished_run(session, after_call=3, cut_start=1, cut_end=2)
    stop_line = _point_line(run)
    body = _export(client_in, run)
    path = tmp_path / "exported" / "tail.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    _check_round_trip(session, again, run, stop_line, append_only=False)
    uuids = [json.loads(line).get("uuid") for line in body.splitlines()]
    boundary, summary = uuids[2], uuids[3]
    assert uuids[:2] == ["u1", "a1"] and uuids[4:] == ["a3", "u2", "a4"]  # a2 and r1 were summarised
    records = {json.loads(line)["uuid"]: json.loads(line) for line in body.splitlines()}
    assert records[summary]["parentUuid"] == boundary and records["a3"]["parentUuid"] == summary
    assert records["u2"]["parentUuid"] == "a3" and records["a4"]["parentUuid"] == "u2"  # parents kept: untouched
