"""Opened by the agent, an export resumes from the accepted summary (issue 32, "Exports that do what they say").

Each agent loads a session from its LAST compaction record (Claude Code's last ``compact_boundary``, klaude-code's
newest ``CompactionEntry``, KHAELOR's last ``context.compacted``, Codex's last ``compacted`` line). For every agent
that exports, a small session of our own with a real compaction AFTER the point is imported, compacted offline at
the point, accepted and exported; the export is then loaded with the agent's own rule (a loader per agent below:
the last boundary, what follows it) and must start from the accepted summary, carry the point's time, and import
back cleanly with the summary as its last compaction. The same holds on the real samples that compacted later,
and klaude-code 2.8.1's own ``Session.load`` reads the klaude exports (its virtualenv: ``tests/klaude_venv.py``).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compaction.formats.context_records import is_compaction_record
from compaction.replay import after_calls
from compaction.strategies.claude_code import format_compact_summary
from compaction.strategies.registry import STRATEGIES, agent_name
from compaction.transcript import MAIN
from sessions_app import models, run_services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import exports as export_selectors
from sessions_app.selectors import previews as preview_selectors
from tests.conftest import CLAUDE_SAMPLES, KLAUDE_SAMPLES, REPO
from tests.helpers.runs import finished_run, imported
from tests.helpers.sample_sessions import khaelor_with_usage
from tests.klaude_venv import KlaudeUnavailable, klaude_python

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
KLAUDE_LOADER = REPO / "tests" / "compaction" / "goldens" / "klaude_2_8_1_loader.py"
KLAUDE_SESSIONS = KLAUDE_SAMPLES / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"


# ------------------------------------------------------------------------------------------ our own sessions


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


def _cc_time(second: int) -> str:
    return f"2026-03-04T10:{second // 60:02d}:{second % 60:02d}.{second * 7 % 1000:03d}Z"


def claude_code_session(path: Path) -> Path:
    """Four calls, Claude Code's own auto compaction, then two more calls (docs/formats/claude-code.md §8)."""
    records: list[dict[str, Any]] = []
    envelope = {"isSidechain": False, "userType": "external", "cwd": "/home/me/app", "sessionId": "cc-own"}

    def add(uuid: str, parent: str | None, **fields: Any) -> None:
        records.append(
            {"parentUuid": parent, **envelope, "version": "2.1.20", "uuid": uuid, "timestamp": _cc_time(len(records))}
            | fields
        )

    def reply(uuid: str, parent: str, number: int, content: list[dict[str, Any]], ctx: int) -> None:
        usage = {"input_tokens": 10, "cache_creation_input_tokens": ctx - 10, "cache_read_input_tokens": 0}
        message = {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": "claude-opus-4-5-20251101"}
        add(
            uuid,
            parent,
            type="assistant",
            requestId=f"req_{number}",
            message=message | {"content": content} | {"usage": usage | {"output_tokens": 20}},
        )

    def prompt(uuid: str, parent: str | None, text: str) -> None:
        add(uuid, parent, type="user", message={"role": "user", "content": text})

    prompt("u1", None, "The totals in report.py are off by one; find out why.")
    reply("a1", "u1", 1, [{"type": "text", "text": "Let me read report.py."}], 2000)
    read = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/home/me/app/report.py"}}
    reply("a2", "a1", 2, [read], 3000)
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "for i in range(1, len(rows)):\n  total += i"}
    add("r1", "a2", type="user", message={"role": "user", "content": [result]})
    reply("a3", "r1", 3, [{"type": "text", "text": "The loop starts at 1 and skips the first row."}], 4000)
    prompt("u2", "a3", "Fix it and add a test.")
    reply("a4", "u2", 4, [{"type": "text", "text": "Fixed: range(len(rows)); test added."}], 5000)
    # Claude Code's own compaction, after the point the test compacts at.
    add(
        "b1",
        None,
        type="system",
        subtype="compact_boundary",
        content="Conversation compacted",
        isMeta=False,
        level="info",
        logicalParentUuid="a4",
        compactMetadata={"trigger": "auto", "preTokens": 5000},
    )
    add(
        "s1",
        "b1",
        type="user",
        message={"role": "user", "content": "This session is being continued from a previous conversation. REAL"},
        isVisibleInTranscriptOnly=True,
        isCompactSummary=True,
    )
    prompt("u3", "s1", "Now run the whole suite.")
    reply("a5", "u3", 5, [{"type": "text", "text": "All 41 tests pass."}], 1500)
    prompt("u4", "a5", "Thanks, commit it.")
    reply("a6", "u4", 6, [{"type": "text", "text": "Committed."}], 1800)
    return _jsonl(path, records)


def klaude_code_session(path: Path) -> Path:
    """klaude-code items (docs/formats/klaude-code.md §1.3; pydantic fills what a line leaves out), its own
    CompactionEntry after the point, then one more task; ``created_at`` naive local time, as klaude writes it."""
    items: list[tuple[str, dict[str, Any]]] = []
    calls = 0

    def add(kind: str, **data: Any) -> None:
        # Seconds with a fraction, and one without: pydantic writes a zero fraction as nothing at all.
        second = len(items)
        fraction = "" if second % 5 == 4 else f".{second * 12345 % 1000000:06d}"
        items.append((kind, data | {"created_at": f"2026-03-04T11:00:{second:02d}{fraction}"}))

    def user(text: str) -> None:
        add("UserMessage", role="user", parts=[{"type": "text", "text": text}])

    def reply(text: str, context: int, *, tool: tuple[str, dict[str, Any]] | None = None) -> None:
        nonlocal calls
        calls += 1
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if tool is not None:
            parts.append(
                {
                    "type": "tool_call",
                    "call_id": f"call_{calls}",
                    "tool_name": tool[0],
                    "arguments_json": json.dumps(tool[1]),
                }
            )
        usage = {"input_tokens": context - 50, "output_tokens": 50, "context_size": context, "context_limit": 200000}
        add("AssistantMessage", role="assistant", parts=parts, usage=usage, stop_reason="tool_use" if tool else "stop")

    def result(text: str) -> None:
        add(
            "ToolResultMessage",
            role="tool",
            call_id=f"call_{calls}",
            tool_name="Read",
            status="success",
            output_text=text,
        )

    user("The totals in report.py are off by one; find out why.")
    reply("Reading report.py.", 3000, tool=("Read", {"file_path": "report.py"}))
    result("for i in range(1, len(rows)):\n    total += i")
    reply("The loop skips the first row.", 3600)
    user("Fix it and add a test.")
    reply("Editing.", 4200, tool=("Read", {"file_path": "tests/test_report.py"}))
    result("def test_total():\n    assert total([1]) == 1")
    reply("Fixed and tested.", 4800)
    user("Now run the whole suite.")
    # klaude's own compaction, after the point the test compacts at: it keeps from the last prompt.
    add(
        "CompactionEntry",
        summary="<summary>REAL klaude summary</summary>",
        first_kept_index=len(items) - 1,
        tokens_before=4800,
        details={"read_files": ["report.py"], "modified_files": []},
        kept_items_brief=[],
    )
    reply("All 41 tests pass.", 1500)
    user("Thanks, commit it.")
    reply("Committed.", 1800)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"type": k, "data": d}, ensure_ascii=False) + "\n" for k, d in items))
    (path.parent / "meta.json").write_text(json.dumps({"id": path.parent.name, "work_dir": "/home/me/app"}))
    return path


def khaelor_session(path: Path) -> Path:
    """KHAELOR events (docs/formats/khaelor.md, the assumed import format, with its optional ``model.usage``),
    its own ``context.compacted`` after the point, then one more turn."""
    events: list[dict[str, Any]] = []
    calls = 0

    def add(kind: str, **payload: Any) -> None:
        seq = len(events) + 1
        events.append(
            {
                "seq": seq,
                "type": kind,
                "ts": f"2026-03-04T12:00:{seq:02d}.{seq * 3:03d}Z",
                "sessionId": "kh-own",
                "payload": payload,
            }
        )

    def reply(text: str, tokens: int) -> None:
        nonlocal calls
        calls += 1
        add("model.usage", input_tokens=tokens, output_tokens=40, requestId=f"req_{calls}")
        add("model.text-block-completed", text=text)

    add("session.started", model="claude-sonnet-4-5", auxModel="claude-haiku-4-5", contextWindow=200000, cwd="/app")
    add("user.message-created", text="The totals in report.py are off by one; find out why.")
    reply("Reading report.py.", 3000)
    add("tool.requested", toolUseId="t1", name="Read", input={"path": "report.py"})
    add("tool.completed", toolUseId="t1", modelText="for i in range(1, len(rows)):\n    total += i")
    reply("The loop skips the first row.", 3600)
    add("user.message-created", text="Fix it and add a test.")
    reply("Editing.", 4200)
    add("tool.requested", toolUseId="t2", name="Read", input={"path": "tests/test_report.py"})
    add("tool.completed", toolUseId="t2", modelText="def test_total():\n    assert total([1]) == 1")
    reply("Fixed and tested.", 4800)
    add("user.message-created", text="Now run the whole suite.")
    # KHAELOR's own compaction, after the point the test compacts at.
    add(
        "context.compacted",
        checkpointYaml="objective: REAL khaelor checkpoint",
        cut={"fromSeq": 3, "toSeq": 11},
        trigger="proactive-token-budget",
        tokensBefore=4800,
        summaryModel="claude-haiku-4-5",
    )
    reply("All 41 tests pass.", 1500)
    add("user.message-created", text="Thanks, commit it.")
    reply("Committed.", 1800)
    return _jsonl(path, events)


def codex_session(path: Path) -> Path:
    """A Codex rollout (docs/formats/codex.md §2, §5): four calls, Codex's own local compaction (a ``compacted``
    line and its ``context_compacted`` event), then two more calls."""
    lines: list[dict[str, Any]] = []
    total = 0

    def add(kind: str, payload: dict[str, Any]) -> None:
        lines.append(
            {"timestamp": f"2026-03-04T13:00:{len(lines):02d}.{len(lines) * 11:03d}Z", "type": kind, "payload": payload}
        )

    def message(role: str, text: str) -> None:
        kind = "output_text" if role == "assistant" else "input_text"
        add("response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    def call(tokens: int, text: str) -> None:
        nonlocal total
        usage = {"input_tokens": tokens, "cached_input_tokens": 0, "output_tokens": 40, "reasoning_output_tokens": 0}
        total += tokens + 40
        info = {
            "total_token_usage": usage | {"total_tokens": total},
            "last_token_usage": usage | {"total_tokens": tokens + 40},
            "model_context_window": 258400,
        }
        add("event_msg", {"type": "token_count", "info": info})
        message("assistant", text)

    meta = {"id": "codex-own", "timestamp": "2026-03-04T13:00:00.000Z", "cwd": "/app", "cli_version": "0.92.0"}
    add("session_meta", meta | {"originator": "codex_cli_rs", "source": "cli"})
    add("turn_context", {"cwd": "/app", "model": "gpt-5.2-codex"})
    message("user", "The totals in report.py are off by one; find out why.")
    call(3000, "The loop skips the first row.")
    message("user", "Fix it and add a test.")
    call(3600, "Fixed.")
    message("user", "Add a test too.")
    call(4200, "Test added.")
    message("user", "Now run the whole suite.")
    call(4800, "All 41 tests pass.")
    # Codex's own compaction, after the point the test compacts at.
    replacement = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "REAL codex"}]}]
    add("compacted", {"message": "REAL codex summary", "replacement_history": replacement})
    add("event_msg", {"type": "context_compacted"})
    message("user", "Thanks, commit it.")
    call(1500, "Committed.")
    message("user", "And push.")
    call(1700, "Pushed.")
    return _jsonl(path, lines)


# ------------------------------------------------------------------------------ each agent's own loading rule


@dataclass(frozen=True, slots=True)
class Resumed:
    """What an agent resumes from: its last compaction record's summary and time, and the records after it."""

    summary: str
    timestamp: str | None
    after: list[dict[str, Any]]


def claude_code_loads(body: bytes) -> Resumed:
    """Claude Code: the last compact_boundary of the main chain, then the summary message that follows it
    (docs/formats/claude-code.md §8.1-8.2, §8.5); its parent chain from the newest record stops at that boundary."""
    records = [r for r in map(json.loads, body.splitlines()) if not r.get("isSidechain")]
    last = max(i for i, r in enumerate(records) if r.get("type") == "system" and r.get("subtype") == "compact_boundary")
    boundary, summary = records[last], records[last + 1]
    assert summary["isCompactSummary"] is True and summary["parentUuid"] == boundary["uuid"]
    assert boundary["timestamp"] == summary["timestamp"]
    by_uuid = {r["uuid"]: r for r in records if "uuid" in r}
    chain, uuid = [], records[-1].get("uuid")
    while uuid is not None:
        chain.append(uuid)
        uuid = by_uuid[uuid]["parentUuid"]
    assert chain[-2:] == [summary["uuid"], boundary["uuid"]], "the newest record's chain must end at the boundary"
    return Resumed(summary["message"]["content"], boundary["timestamp"], records[last + 2 :])


def klaude_code_loads(body: bytes) -> Resumed:
    """klaude-code: the newest CompactionEntry's summary, then the items from its first_kept_index on
    (docs/formats/klaude-code.md §3.12)."""
    items = [json.loads(line) for line in body.splitlines() if line.strip()]
    last = max(i for i, item in enumerate(items) if item["type"] == "CompactionEntry")
    entry = items[last]["data"]
    assert 0 <= entry["first_kept_index"] <= last
    return Resumed(entry["summary"], entry["created_at"], items[last + 1 :])


def khaelor_loads(body: bytes) -> Resumed:
    """KHAELOR: the last context.compacted event's checkpoint replaces its cut; what follows it is appended."""
    events = [json.loads(line) for line in body.splitlines()]
    last = max(i for i, e in enumerate(events) if e["type"] == "context.compacted")
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), "seqs stay strictly increasing"
    return Resumed(events[last]["payload"]["checkpointYaml"], events[last]["ts"], events[last + 1 :])


def codex_loads(body: bytes) -> Resumed:
    """Codex: the last ``compacted`` line's replacement history, which ends with the summary (docs/formats/
    codex.md §5)."""
    lines = [json.loads(line) for line in body.splitlines()]
    last = max(i for i, line in enumerate(lines) if line["type"] == "compacted")
    payload = lines[last]["payload"]
    assert payload["replacement_history"][-1]["content"][0]["text"] == payload["message"]
    after = [line for line in lines[last + 1 :] if line["payload"].get("type") != "context_compacted"]
    return Resumed(payload["message"], lines[last]["timestamp"], after)


# ------------------------------------------------------------------------------------------------ the checks


def _point_before_compaction(session: models.Session, strategy: str, *, which: int) -> dict[str, int | None]:
    """A point before the session's ``which``-th real compaction where the strategy can run, with a cut: found
    through the conversation's own after-call points, never from a call number's value."""
    conversation = conversation_selectors.conversation(session=session, agent=MAIN)
    points = after_calls(conversation)
    compaction = [i for i, m in enumerate(conversation) if is_compaction_record(m)][which]
    before = [p for p in points if p.position <= compaction]
    for point in reversed(before):
        # After the first call to the strategy's edge; the strategy's own cut; from the start to an earlier point
        # (klaude-code summarises from its base, and a small session is below its own cut's thresholds).
        cuts = [
            (points[0].call, None),
            (None, None),
            *((None, p.call) for p in reversed(before) if p.call < point.call),
        ]
        for cut_start, cut_end in cuts:
            if point.call in (cut_start, cut_end):
                continue
            preview = preview_selectors.build_preview(
                session=session,
                strategy=strategy,
                overrides={},
                after_call=point.call,
                cut_start=cut_start,
                cut_end=cut_end,
            )
            if preview.runnable:
                return {"after_call": point.call, "cut_start": cut_start, "cut_end": cut_end}
    raise AssertionError("no runnable point before the compaction")


@dataclass
class Exported:
    session: models.Session
    run: Run
    body: bytes
    path: Path
    point_time: str  # the time of the last record at or before the point, as its file wrote it


def _export(client, tmp_path: Path, source: Path, strategy: str, *, which: int = 0, name: str) -> Exported:
    session = imported(source)
    run = finished_run(session, strategy=strategy, **_point_before_compaction(session, strategy, which=which))
    plan = preview_selectors.preview_for_run(run=run).plan
    assert plan is not None and plan.following_line is not None
    # Said before the download, on the page and in its JSON twin.
    run_services.review_run(run=run, user=None, decision="accepted", comment="resume from this")
    said = client.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["ends_at_point"] is True and said["available"] is True and said["later_compactions"] >= 1
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="export-shape"' in page and "export ends at the point" in page
    response = client.get(f"/runs/{run.pk}/export/")
    assert response.status_code == 200, response.content
    body = b"".join(response.streaming_content)
    path = tmp_path / "exported" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    if source.with_name("meta.json").exists() and name == "events.jsonl":
        (path.parent / "meta.json").write_bytes(source.with_name("meta.json").read_bytes())
    before = source.read_bytes().splitlines()[: plan.following_line - 1]
    return Exported(session, run, body, path, _written_time(before[-1], strategy))


def _written_time(line: bytes, strategy: str) -> str:
    record = json.loads(line)
    return {
        "claude-code": lambda: record["timestamp"],
        "klaude-code": lambda: record["data"]["created_at"],
        "khaelor": lambda: record["ts"],
        "codex": lambda: record["timestamp"],
    }[strategy]()


def _check_resumes(exported: Exported, loads: Callable[[bytes], Resumed], *, expected_summary: str) -> None:
    resumed = loads(exported.body)
    assert resumed.summary == expected_summary
    assert resumed.after == [], "nothing follows the accepted summary: the export ends at the point"
    assert resumed.timestamp == exported.point_time


def _check_reimport(exported: Exported, *, summary_text: str) -> models.Session:
    """Our own importer reads the export cleanly, with the accepted summary as its last compaction."""
    again = imported(exported.path)
    assert again.pk != exported.session.pk
    assert not models.LineIssue.objects.filter(session=again).exists()
    last = models.ContextEvent.objects.filter(session=again, agent=MAIN, kind="compaction").order_by("seq").last()
    assert last is not None
    summary = (
        models.Message.objects.filter(session=again, agent=MAIN, kind="compact_summary", line__gte=last.line)
        .order_by("seq")
        .first()
    )
    assert summary is not None and summary_text in "\n".join(b.get("text") or "" for b in summary.blocks)
    return again


def test_claude_code_export_resumes_from_the_accepted_summary(client_in, tmp_path, offline):
    exported = _export(client_in, tmp_path, claude_code_session(tmp_path / "cc.jsonl"), "claude-code", name="cc.jsonl")
    resumed = claude_code_loads(exported.body)
    assert format_compact_summary(exported.run.summary) in resumed.summary and "REAL" not in resumed.summary
    assert resumed.after == [] and resumed.timestamp == exported.point_time
    _check_reimport(exported, summary_text=format_compact_summary(exported.run.summary))


def test_klaude_code_export_resumes_from_the_accepted_summary(client_in, tmp_path, offline):
    source = klaude_code_session(tmp_path / "own" / "events.jsonl")
    exported = _export(client_in, tmp_path, source, "klaude-code", name="events.jsonl")
    _check_resumes(exported, klaude_code_loads, expected_summary=exported.run.summary)
    _check_reimport(exported, summary_text=exported.run.summary)
    _check_klaude_loads(exported)


def test_khaelor_export_resumes_from_the_accepted_checkpoint(client_in, tmp_path, offline):
    source = khaelor_session(tmp_path / "own.events.jsonl")
    exported = _export(client_in, tmp_path, source, "khaelor", name="own.events.jsonl")
    _check_resumes(exported, khaelor_loads, expected_summary=exported.run.summary)
    _check_reimport(exported, summary_text=exported.run.summary)


def test_codex_export_resumes_from_the_accepted_summary(client_in, tmp_path, offline):
    source = codex_session(tmp_path / "rollout-2026-03-04T13-00-00-codex-own.jsonl")
    exported = _export(client_in, tmp_path, source, "codex", name="rollout-2026-03-04T13-00-00-exported.jsonl")
    _check_resumes(exported, codex_loads, expected_summary=exported.run.summary)
    _check_reimport(exported, summary_text=exported.run.summary)


def test_without_a_later_compaction_the_export_keeps_every_line_after_the_point(client_in, tmp_path, offline):
    """Today's behaviour where nothing would hide the summary: the lines after the point follow it unchanged."""
    source = khaelor_session(tmp_path / "own.events.jsonl")
    original = source.read_text().splitlines(keepends=True)
    cut_at = next(i for i, line in enumerate(original) if '"context.compacted"' in line)
    source.write_text("".join(original[:cut_at] + original[cut_at + 1 :]))  # the same session, never compacted
    session = imported(source)
    conversation = conversation_selectors.conversation(session=session, agent=MAIN)
    points = after_calls(conversation)
    run = finished_run(session, strategy="khaelor", after_call=points[-3].call, cut_start=points[0].call)
    run_services.review_run(run=run, user=None, decision="accepted", comment="keep the rest")
    said = client_in.get(f"/runs/{run.pk}.json").json()["export"]
    assert said["ends_at_point"] is False and said["later_compactions"] == 0 and "every line" in said["why"]
    body = b"".join(client_in.get(f"/runs/{run.pk}/export/").streaming_content)
    plan = preview_selectors.preview_for_run(run=run).plan
    assert plan is not None and plan.following_line is not None
    kept = [json.loads(line) for line in original[:cut_at] + original[cut_at + 1 :]]
    events = [json.loads(line) for line in body.splitlines()]
    after = events[plan.following_line :]
    assert [(e["type"], e["payload"]) for e in after] == [
        (e["type"], e["payload"]) for e in kept[plan.following_line - 1 :]
    ]
    assert khaelor_loads(body).summary == run.summary and len(khaelor_loads(body).after) == len(after)


# ------------------------------------------------------------------------------------------- the real samples


REAL_SAMPLES = [
    # Two auto compactions, both after a point before the first.
    pytest.param(CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl", "claude-code", id="claude-code-two-later"),
    # Three CompactionEntries after a point before the first (samples/klaude-code/README.md).
    pytest.param(
        KLAUDE_SESSIONS / "4ca67353d824444b81c156cf264ca243" / "events.jsonl", "klaude-code", id="klaude-multi"
    ),
    pytest.param(
        KLAUDE_SESSIONS / "bd8ec9a1f80345edbd7c9ec7081ab44d" / "events.jsonl", "klaude-code", id="klaude-compacted"
    ),
    pytest.param(None, "khaelor", id="khaelor-ledger"),
]


@pytest.mark.parametrize(("source", "strategy"), REAL_SAMPLES)
def test_a_real_sample_that_compacted_later_resumes_from_the_accepted_summary(
    client_in,
    tmp_path,
    offline,
    source: Path | None,
    strategy: str,
) -> None:
    if source is None:
        # The KHAELOR sample records no usage; with one usage event per response its points lie inside it.
        source = khaelor_with_usage(tmp_path / "ledger.events.jsonl")
    name = "events.jsonl" if strategy == "klaude-code" else source.name
    if strategy == "klaude-code":
        # The sample's folder holds its meta.json beside events.jsonl, as klaude keeps them.
        local = tmp_path / "sample" / "events.jsonl"
        local.parent.mkdir()
        local.write_bytes(source.read_bytes())
        (local.parent / "meta.json").write_bytes(source.with_name("meta.json").read_bytes())
        source = local
    exported = _export(client_in, tmp_path, source, strategy, name=name)
    loads = {"claude-code": claude_code_loads, "klaude-code": klaude_code_loads, "khaelor": khaelor_loads}[strategy]
    if strategy == "claude-code":
        resumed = loads(exported.body)
        assert format_compact_summary(exported.run.summary) in resumed.summary
        assert resumed.after == [] and resumed.timestamp == exported.point_time
        _check_reimport(exported, summary_text=format_compact_summary(exported.run.summary))
    else:
        _check_resumes(exported, loads, expected_summary=exported.run.summary)
        _check_reimport(exported, summary_text=exported.run.summary)
    if strategy == "klaude-code":
        _check_klaude_loads(exported)


# --------------------------------------------------------------------------- klaude-code 2.8.1's own loader


def _check_klaude_loads(exported: Exported) -> None:
    """klaude-code 2.8.1's ``Session.load`` reads the export, and ``get_llm_history`` starts from our summary."""
    try:
        python = klaude_python()
    except KlaudeUnavailable as exc:
        pytest.skip(f"klaude-code 2.8.1 is not available: {exc}")
    report = exported.path.with_name("klaude-reads.json")
    done = subprocess.run(
        [str(python), str(KLAUDE_LOADER), str(exported.path), str(report)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(report.read_text())
    lines = exported.body.splitlines()
    assert read["lines"] == len(lines) == len(read["items"])  # every line decodes in klaude, none is skipped
    newest = read["compaction_entries"][-1]
    assert newest["index"] == len(lines) - 1  # ours is klaude's newest entry
    assert newest["summary_sha256"] == hashlib.sha256(exported.run.summary.encode()).hexdigest()
    assert newest["first_kept_index"] == exported.run.first_kept
    # What klaude sends its model now: our summary (None), then the items it kept.
    history = read["llm_history_at_end"]
    assert history[0] is None and all(i >= newest["first_kept_index"] for i in history[1:])


def test_the_export_object_says_why_there_is_none_yet(client_in, tmp_path, offline, reviewer):
    """Before the verdict the shape is already said; a foreign agent's run has no export, and says why."""
    session = imported(claude_code_session(tmp_path / "cc.jsonl"))
    own = finished_run(session, **_point_before_compaction(session, "claude-code", which=0))
    said = client_in.get(f"/runs/{own.pk}.json").json()["export"]
    assert said["available"] is False and said["url"] is None and said["ends_at_point"] is True
    assert said["refused"] == "Only an accepted summary can be exported."
    assert "Once accepted: The export ends at the point" in client_in.get(f"/runs/{own.pk}/").content.decode()
    foreign = finished_run(session, strategy="klaude-code", cut_end=2)
    run_services.review_run(run=foreign, user=reviewer, decision="accepted", comment="ok")
    said = client_in.get(f"/runs/{foreign.pk}.json").json()["export"]
    assert said["available"] is False and said["ends_at_point"] is None and "session's own agent" in said["refused"]
    refused = client_in.get(f"/runs/{foreign.pk}/export/?format=json")
    assert refused.status_code == 409 and refused.json() == {"error": export_selectors.FOREIGN_EXPORT, "status": 409}


def test_the_foreign_export_refusal_names_every_agent_the_registry_exports() -> None:
    """The agents are named from the registry, as every page names them: none is left out of the sentence."""
    exporting = [agent_name(cls.name) for cls in STRATEGIES if cls.export_suffix is not None]
    assert len(exporting) == len(STRATEGIES) == 4
    assert f"({', '.join(exporting[:-1])} or {exporting[-1]})." in export_selectors.FOREIGN_EXPORT
