"""Exports that keep everything: export → import gives the same records after the point and one compaction there.

For each agent a run at a point inside the session (not its end) is accepted and exported; the export is
imported back with the project's own parser. The records recorded after the point come back unchanged and in
order, the summarised middle is gone, the head and the kept tail stay, and there is exactly one new compaction
event, where the agent would have written it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.formats.context_records import COMPACTION_RECORD_TYPES
from sessions_app import models, run_selectors, run_services
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES
from tests.sessions_app.test_runs import cc_session, finished_run, imported, offline  # noqa: F401

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
    plan = run_selectors.preview_for_run(run=run).plan
    assert plan is not None and plan.following_line is not None, "the point must lie inside the session"
    return plan.following_line


def _check_round_trip(
    original: models.Session, again: models.Session, run: Run, stop_line: int, *, append_only: bool
) -> None:
    """The records after the point come back in order and unchanged; one new compaction.

    ``append_only``: the agent never rewrites its log (klaude-code, KHAELOR), so the summarised middle stays in
    the file and leaves only the model's view; Claude Code's compacted file has no middle at all.
    """
    before = _rows(original)
    after_point = [_same(r) for r in before if r.line >= stop_line]
    assert after_point, "a point inside the session has records after it"
    rows = _rows(again)
    assert [_same(r) for r in rows[-len(after_point) :]] == after_point  # nothing after the point is lost
    conversation = run_selectors.preview_for_run(run=run).messages
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
    old = _compactions(original)
    new = _compactions(again)
    assert len(new) == len(old) + 1


# ---------------------------------------------------------------------------------------------- Claude Code


def test_claude_code_export_keeps_everything_after_the_point(client_in, tmp_path, offline):  # noqa: F811
    session = imported(CLAUDE_COMPACTED)
    # After call 4: the sample's own compaction (line 31) and 8 more calls come later.
    run = finished_run(session, after_call=4, cut_start=1)
    stop_line = _point_line(run)
    body = _export(client_in, run)
    path = tmp_path / "exported" / "session.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    _check_round_trip(session, again, run, stop_line, append_only=False)

    # Compared without line ends: the sample's last line has none, the export ends every line.
    original_lines = CLAUDE_COMPACTED.read_bytes().splitlines()
    exported = body.splitlines()
    after = exported[-(len(original_lines) - stop_line + 1) :]
    # Every line from the point on is in the export byte for byte, but the first: nothing is kept before the
    # point, so its parent was summarised and it hangs from the summary record now.
    assert after[1:] == original_lines[stop_line:]
    first, summary = json.loads(after[0]), json.loads(exported[exported.index(after[0]) - 1])
    assert summary["isCompactSummary"] is True and first["parentUuid"] == summary["uuid"]
    assert {**first, "parentUuid": None} == {**json.loads(original_lines[stop_line - 1]), "parentUuid": None}
    boundary = next(e for e in _compactions(again) if e.trigger == "manual")
    assert boundary.pre_tokens == run_selectors.preview_for_run(run=run).tokens_before
    calls_before = models.ApiCall.objects.filter(session=session, agent="main", number__lte=1).count()
    # The cut starts after call 1: the boundary comes right after the head's calls, the sample's own after it.
    assert boundary.after_call == calls_before
    assert [e.trigger for e in _compactions(again)] == ["manual", "auto"]
    rows = _rows(again)
    assert [r.seq for r in rows if r.kind == "compact_summary"][0] == boundary.seq + 1


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


def test_klaude_export_inserts_the_entry_at_the_point_and_loses_nothing_after_it(client_in, tmp_path, offline):  # noqa: F811
    # After call 13 the history has 31 items; klaude's own compaction comes at index 44 (keeping from 40).
    session, again, run, body, stop_line = _klaude_export(client_in, tmp_path, 13)
    _check_round_trip(session, again, run, stop_line, append_only=True)
    original = (KLAUDE_COMPACTED / "events.jsonl").read_bytes().splitlines(keepends=True)
    lines = body.splitlines(keepends=True)
    inserted = stop_line - 1  # 0-based: the entry takes the first line after the point
    assert lines[:inserted] == original[:inserted]
    entry = json.loads(lines[inserted])
    assert entry["type"] == "CompactionEntry" and entry["data"]["first_kept_index"] == run.first_kept
    assert len(lines) == len(original) + 1
    # The later entry kept from index 40; one item was inserted before it, so it keeps the same item at 41.
    later = json.loads(lines[45])
    assert later["type"] == "CompactionEntry" and later["data"]["first_kept_index"] == 41
    assert lines[41] == original[40]
    for index, line in enumerate(lines[inserted + 1 :], start=inserted + 1):
        if index != 45:
            assert line == original[index - 1]
    compactions = _compactions(again)
    calls_before = models.ApiCall.objects.filter(session=session, agent="main", number__lte=13).count()
    assert compactions[0].after_call == calls_before and compactions[0].line == stop_line
    assert compactions[1].data["first_kept_index"] == 41


# ---------------------------------------------------------------------------------------------- KHAELOR


def _khaelor_with_usage(path: Path) -> Path:
    """The sample with a ``model.usage`` event after each model response (docs/formats/khaelor.md: optional).

    The sample records no usage, so it has no API call and its only point is its end; with one usage event per
    response the points lie inside it. Seqs are renumbered and the recorded cut follows its events.
    """
    events = [json.loads(line) for line in (KHAELOR_SAMPLES / "ledger-migration.events.jsonl").read_text().splitlines()]
    renumbered: dict[int, int] = {}
    out: list[dict] = []
    previous = ""
    for event in events:
        # A response opens with its thinking (or its text when it has none): the usage event goes first, so each
        # call's tool results follow it, as "after call N" expects.
        opens = event["type"] == "model.thinking-block-completed" or (
            event["type"] == "model.text-block-completed" and previous != "model.thinking-block-completed"
        )
        if opens:
            usage = {"input_tokens": 1000 * len(out), "output_tokens": 50, "requestId": f"req_{len(out)}"}
            out.append({"seq": len(out) + 1, "type": "model.usage", "ts": event["ts"], "payload": usage})
        renumbered[event["seq"]] = len(out) + 1
        out.append({**event, "seq": len(out) + 1})
        previous = event["type"]
    for event in out:
        cut = event["payload"].get("cut") if event["type"] == "context.compacted" else None
        if cut:
            cut["fromSeq"], cut["toSeq"] = renumbered[cut["fromSeq"]], renumbered[cut["toSeq"]]
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in out))
    return path


def test_khaelor_export_appends_context_compacted_and_loses_nothing_after_it(client_in, tmp_path, offline):  # noqa: F811
    source = _khaelor_with_usage(tmp_path / "ledger.events.jsonl")
    session = imported(source)
    assert models.ApiCall.objects.filter(session=session, agent="main").count() > 10
    after_call = 6  # inside the range the sample's own compaction summarised later
    run = finished_run(session, strategy="khaelor", after_call=after_call, cut_start=1)
    stop_line = _point_line(run)
    body = _export(client_in, run)
    path = tmp_path / "exported" / "ledger.events.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    _check_round_trip(session, again, run, stop_line, append_only=True)

    events = [json.loads(line) for line in body.splitlines()]
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))  # strictly increasing, the new event included
    ours = events[stop_line - 1]
    assert ours["type"] == "context.compacted" and ours["seq"] == stop_line
    assert ours["payload"]["checkpointYaml"] == run.summary and ours["payload"]["trigger"] == "user-command"
    assert ours["payload"]["summaryModel"] == run.model
    assert ours["payload"]["tokensBefore"] == run_selectors.preview_for_run(run=run).tokens_before
    conversation = run_selectors.preview_for_run(run=run).messages
    middle = [m.data["seq"] for m in conversation[run.cut_start : run.cut_end] if m.raw_type != "model.usage"]
    assert (ours["payload"]["cut"]["fromSeq"], ours["payload"]["cut"]["toSeq"])[0] == middle[0]
    # The sample's own compaction moved one seq up, and so did the cut it recorded.
    original = [json.loads(line) for line in source.read_text().splitlines()]
    theirs = next(e for e in original if e["type"] == "context.compacted")
    moved = next(e for e in events[stop_line:] if e["type"] == "context.compacted")
    assert moved["seq"] == theirs["seq"] + 1
    inserted = ours["seq"]
    assert theirs["payload"]["cut"]["fromSeq"] < inserted <= theirs["payload"]["cut"]["toSeq"]  # ours is inside
    assert moved["payload"]["cut"] == {
        "fromSeq": theirs["payload"]["cut"]["fromSeq"],
        "toSeq": theirs["payload"]["cut"]["toSeq"] + 1,
    }
    compactions = _compactions(again)
    assert compactions[0].line == stop_line and compactions[0].trigger == "user-command"
    assert compactions[0].after_call == after_call


def test_claude_code_export_with_a_kept_tail_and_records_after_the_point(client_in, tmp_path, offline):  # noqa: F811
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
