"""Preview, offline runs, the run page, review, compare, export and the compact command."""

from __future__ import annotations

import html
import io
import json
import re

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_tasks_db.models import DBTaskResult

from compaction.strategies import claude_code as cc
from compaction.summarize import OFFLINE_MODEL
from compaction.tokens import tiktoken_counts
from sessions_app import models, run_services
from tests.conftest import KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import SESSION_ID, assistant, cc_line, cc_session, compact_boundary, user, write
from tests.helpers.runs import Run, finished_run, imported, queued_run

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


# ---------------------------------------------------------------------------------------------
# Shared helpers


# ---------------------------------------------------------------------------------------------
# Preview


def test_preview_page_fragment_and_json(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    page = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "claude-code"})
    html = page.content.decode()
    assert page.status_code == 200 and "<html" in html
    assert 'id="preview"' in html and "Run compaction" in html
    # The summarizer's transcript is shown, escaped.
    assert "[tool_use Read id=toolu_1]" in html and "Fixed the division by zero" in html
    assert f"/sessions/{session.pk}/m/" in html  # permalinks to the transcript

    fragment = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "claude-code"}, **HTMX)
    text = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in text and text.lstrip().startswith('<div id="preview">')

    data = client_in.get(f"/sessions/{session.pk}/preview.json", {"strategy": "claude-code"}).json()
    # Claude Code's autocompact summarises everything since the last boundary and keeps nothing (select_cut).
    assert data["cut"]["from"] == 0 and data["cut"]["to"] == 7 and data["cut"]["by_hand"] is False
    assert data["cut"]["from_after_call"] is None and data["cut"]["to_after_call"] == 4 and data["after_call"] == 4
    assert data["segments"]["middle"]["count"] == 7 and data["segments"]["tail"]["count"] == 0
    # Claude Code's tokenCountWithEstimation: the last response's usage, prompt (10 + 3990) plus its output (5).
    assert data["tokens_before"] == 4000 + 5
    assert data["should_compact"] is False  # 4,000 tokens is far below any autocompact threshold
    (request,) = data["requests"]
    assert request["system"] == cc.SUMMARIZER_SYSTEM_PROMPT
    shown = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "claude-code"})
    assert shown.context["preview"].requests[0].user_content.endswith(cc.compact_prompt())
    assert request["user_chars"] == len(shown.context["preview"].requests[0].user_content)
    # groupMessagesByApiRound: the preamble [u1], then a new group at each new response id: [a1] [a2 r1] [a3 u2] [a4].
    assert request["rounds"] == 5


def test_hand_cut_keeps_head_and_tail(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    auto = client_in.get(f"/sessions/{session.pk}/preview.json").json()
    # After call 1 (a1) up to after call 3 (a3 and the prompt u2 that followed it): positions [2, 6).
    response = client_in.get(f"/sessions/{session.pk}/preview/", {"cut_start": 1, "cut_end": 3})
    data = client_in.get(f"/sessions/{session.pk}/preview/", {"format": "json", "cut_start": 1, "cut_end": 3}).json()
    assert data["cut"]["by_hand"] is True and data["cut"]["refused"] is None
    cut = data["cut"]
    assert (cut["from"], cut["to"], cut["from_after_call"], cut["to_after_call"]) == (2, 6, 1, 3)
    assert [data["segments"][s]["count"] for s in ("head", "middle", "tail")] == [2, 4, 1]
    content = response.context["preview"].requests[0].user_content
    assert "Fixed the division by zero" in content and "now add tests" in content
    assert "please fix the bug" not in content
    # The hand cut summarises less than the strategy's own cut: fewer tokens leave the context.
    assert data["tokens_before"] == auto["tokens_before"]
    assert data["tokens_after_estimate"] > auto["tokens_after_estimate"]
    html = response.content.decode()
    assert "(by hand)" in html and f'id="tokens-after">{data["tokens_after_estimate"]:,}<' in html


def test_hand_cut_ending_before_it_starts_is_refused_with_its_reason(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    response = client_in.get(f"/sessions/{session.pk}/preview/", {"cut_start": 3, "cut_end": 2})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Cut refused, not applied" in html and "the cut must start before it ends" in html
    assert "cut_start 3 is not before cut_end 2" in html
    assert "Run compaction" not in html and 'id="segment-middle"' not in html
    data = client_in.get(f"/sessions/{session.pk}/preview.json", {"cut_start": 3, "cut_end": 2}).json()
    assert data["cut"]["refused"].startswith("the cut must start before it ends") and data["runnable"] is False
    assert data["tokens_after_estimate"] == data["tokens_before"]  # a refused cut is never applied
    assert data["requests"] == []
    # And a run of it is refused too (no 500).
    posted = client_in.post(f"/sessions/{session.pk}/runs/", {"strategy": "claude-code", "cut_start": 3, "cut_end": 2})
    assert posted.status_code == 302 and Run.objects.count() == 0


def test_preview_bad_input_is_an_error_not_a_500(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    url = f"/sessions/{session.pk}/preview/"
    assert "Unknown strategy" in client_in.get(url, {"strategy": "nope"}).content.decode()
    bad = client_in.get(url, {"format": "json", "strategy": "claude-code", "pct_override": "lots"})
    assert bad.status_code == 400 and "pct_override" in bad.json()["error"]
    assert (
        "call 99 does not exist: the main chain has calls 1 to 4"
        in client_in.get(url, {"format": "json", "at": 99}).json()["error"]
    )
    assert "must be an API call number" in client_in.get(url, {"format": "json", "at": "c42"}).json()["error"]
    assert "must be an API call number" in client_in.get(url, {"format": "json", "cut_end": "-1"}).json()["error"]
    # Calls are numbered from 1 (call 0 is refused as missing): the message said "0 or more".
    refused = client_in.get(url, {"format": "json", "at": "-1"}).json()["error"]
    assert "(1 or more: calls are numbered from 1)" in refused and "0 or more" not in refused
    assert "cut_end: call 42 does not exist" in client_in.get(url, {"format": "json", "cut_end": 42}).json()["error"]


def test_preview_at_an_api_call(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    # Main API call 2 is msg_2, the tool call at position 2: the session as it stood when it answered.
    data = client_in.get(f"/sessions/{session.pk}/preview.json", {"at": 2}).json()
    # After call 2: its tool call and the result that answered it (positions 0-3).
    assert data["at"] == 4 and data["after_call"] == 2
    # Claude Code counts the call's usage and output plus an estimate of the result that arrived since.
    assert data["tokens_before"] > 2000 + 7


def test_editable_parameters_change_the_decision(client_in, tmp_path):
    session = imported(cc_session(tmp_path))
    url = f"/sessions/{session.pk}/preview.json"
    # CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=1 puts the threshold at 1% of the effective window: 4,000 tokens is over it.
    assert client_in.get(url, {"pct_override": "1"}).json()["should_compact"] is True
    assert client_in.get(url, {"pct_override": "1", "autocompact_enabled": "false"}).json()["should_compact"] is False


def test_klaude_sample_preview_matches_klaudes_own_decision(client_in):
    folder = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/780c4b16a51049faa2b2bbd1c38dbe31"
    expected = json.loads((KLAUDE_SAMPLES / "expected" / "long_tool_results.json").read_text())
    evaluation = next(e for e in expected["evaluations"] if e["config_context_limit"] is None)
    session = imported(folder / "events.jsonl")
    data = client_in.get(f"/sessions/{session.pk}/preview.json", {"strategy": "klaude-code"}).json()
    assert data["should_compact"] == evaluation["should_compact_threshold"]
    assert data["cut"]["to"] == evaluation["cut"]["adjusted_cut_index"]
    kinds = [r["kind"] for r in data["requests"]]
    # A split task with nothing before it: only the task-prefix request (klaude §3.8).
    assert kinds == (["history"] if evaluation["cut"]["summarized_indices"] else []) + (
        ["task_prefix"] if evaluation["cut"]["task_prefix_indices"] else []
    )


# ---------------------------------------------------------------------------------------------
# Runs, offline


def test_run_compaction_offline_through_the_task(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    response = client_in.post(
        f"/sessions/{session.pk}/runs/", {"strategy": "claude-code", "cut_start": 1, "cut_end": 3}
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.status == Run.Status.QUEUED and run.offline and run.model == OFFLINE_MODEL
    assert (run.cut_start, run.cut_end, run.at) == (2, 6, 7)
    assert (run.cut_start_call, run.cut_end_call, run.after_call) == (1, 3, None)
    assert run.started_by is not None and run.started_by.get_username() == "rev"
    # The task was enqueued with the run id only.
    (task,) = DBTaskResult.objects.filter(task_path="sessions_app.run_services.run_compaction_task")
    assert task.args_kwargs["args"] == [run.pk]

    # Polling while queued keeps the trigger.
    polling = client_in.get(f"/runs/{run.pk}/", **HTMX).content.decode()
    assert 'id="run-status"' in polling and 'hx-trigger="every 1s"' in polling and "<html" not in polling

    assert run_services.run_compaction_task.call(run.pk) == "succeeded"
    run.refresh_from_db()
    # Offline, in Claude Code's own shape: formatCompactSummary's "Summary:" and the first of the nine sections.
    assert run.status == Run.Status.SUCCEEDED and run.summary.startswith("Summary:\n1. Primary Request and Intent:")
    assert run.summary_tokens == tiktoken_counts([run.summary])[0]
    assert run.cost_usd == 0 and run.duration_s is not None and run.finished_at is not None

    done = client_in.get(f"/runs/{run.pk}/", **HTMX).content.decode()
    assert "hx-trigger" not in done and "offline: no model was called" in done and "Pending Tasks" in done
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert "<html" in page and "offline summary" in page and "Accept" in page
    assert "Summary vs budget" in page
    data = client_in.get(f"/runs/{run.pk}.json").json()
    assert data["status"] == "succeeded" and data["offline"] is True and data["review"]["status"] == "pending"
    # Parameters the strategy can no longer be built with: no budget is known, and the page says so in words.
    Run.objects.filter(pk=run.pk).update(parameters={"auto_compact_window": "lots"})
    unknown = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert "Summary size" in unknown and "no budget known" in unknown and "of no budget" not in unknown


def test_run_create_json_twin(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    response = client_in.post(f"/sessions/{session.pk}/runs/?format=json", {"strategy": "claude-code"})
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and body["after_call"] is None
    assert body["cut"] == {"from": 0, "to": 7, "first_kept": 7, "cut_start_call": None, "cut_end_call": None}
    refused = client_in.post(f"/sessions/{session.pk}/runs/?format=json", {"cut_start": 3, "cut_end": 2})
    assert refused.status_code == 400 and "the cut must start before it ends" in refused.json()["error"]


def test_runs_need_login_and_csrf(client, tmp_path, reviewer):
    session = imported(cc_session(tmp_path))
    for url in [f"/sessions/{session.pk}/preview/", "/reviews/"]:
        assert client.get(url).status_code == 302
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    assert strict.post(f"/sessions/{session.pk}/runs/", {"strategy": "claude-code"}).status_code == 403


def test_a_changed_session_fails_the_run_instead_of_summarising_something_else(tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = queued_run(session, cut_start=1, cut_end=3)
    Run.objects.filter(pk=run.pk).update(transcript_sha256="0" * 64)
    run = run_services.execute_run(run_id=run.pk)
    assert run.status == Run.Status.FAILED and "session changed" in run.error


def test_sweep_marks_dead_runs_failed_and_retry_requeues(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = queued_run(session)
    from datetime import timedelta

    from django.utils import timezone

    long_ago = timezone.now() - timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago)
    fresh = queued_run(session)
    Run.objects.filter(pk=fresh.pk).update(
        status=Run.Status.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )

    # The run page sweeps when it polls a run whose heartbeat is old.
    fragment = client_in.get(f"/runs/{run.pk}/", **HTMX).content.decode()
    assert "hx-trigger" not in fragment and "worker" in fragment
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "stopped" in run.error
    assert Run.objects.get(pk=fresh.pk).status == Run.Status.RUNNING  # a live worker's run is left alone

    response = client_in.post(f"/runs/{run.pk}/retry/")
    again = Run.objects.exclude(pk__in=[run.pk, fresh.pk]).get()
    assert response["Location"] == f"/runs/{again.pk}/"
    assert again.status == Run.Status.QUEUED and (again.cut_start, again.cut_end) == (run.cut_start, run.cut_end)
    assert client_in.post(f"/runs/{again.pk}/retry/?format=json").status_code == 409  # only failed runs


# ---------------------------------------------------------------------------------------------
# Review, compare, export


def test_review_accept_with_comment_and_review_list(client_in, tmp_path, offline, reviewer):
    session = imported(cc_session(tmp_path))
    run = finished_run(session, cut_start=1, cut_end=3)
    other = finished_run(session)
    listing = client_in.get("/reviews/").content.decode()
    assert f"/runs/{run.pk}/" in listing and f"/runs/{other.pk}/" in listing
    # The nav shows the pending count on every page.
    assert 'href="/reviews/">Reviews <span class="badge">2</span>' in client_in.get("/").content.decode()

    response = client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "Keeps the fix."})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.review == Run.Review.ACCEPTED and run.review_comment == "Keeps the fix."
    assert run.reviewed_by == reviewer and run.reviewed_at is not None
    data = client_in.get("/reviews.json").json()
    assert [r["id"] for r in data["pending"]] == [other.pk]
    verdict = {"comment": "Keeps the fix.", "by": "rev", "at": run.reviewed_at.isoformat()}
    assert data["decided"][0]["review"] == {
        "status": "accepted",
        **verdict,
        "history": [{"decision": "accepted", **verdict}],
    }
    assert "Keeps the fix." in client_in.get("/reviews/").content.decode()
    bad = client_in.post(f"/runs/{other.pk}/review/?format=json", {"decision": "maybe"})
    assert bad.status_code == 409
    # Without JSON the refusal is said on the page the reviewer lands on, never silently dropped.
    refused = client_in.post(f"/runs/{other.pk}/review/", {"decision": "maybe"}, follow=True).content.decode()
    assert 'class="flash-error"' in refused


def test_compare_replaced_messages_agent_summary_and_other_run(client_in, tmp_path, offline):
    compacted = write(
        tmp_path,
        "compacted.jsonl",
        user("u0", None, "start the work"),
        assistant("a0", "u0", "msg_0", "working", ctx=900),
        compact_boundary("b1", trigger="auto"),
        cc_line(
            type="user",
            uuid="cs",
            parentUuid="b1",
            sessionId=SESSION_ID,
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={"role": "user", "content": "This session is being continued. AGENT-OWN-SUMMARY"},
        ),
        user("u1", "cs", "please fix the bug in app.py"),
        assistant("a1", "u1", "msg_1", "Let me look at the file first.", ctx=1000),
        user("u2", "a1", "now add tests"),
        assistant("a2", "u2", "msg_2", "Adding tests.", ctx=1200),
    )
    session = imported(compacted)
    agent_seq = models.Message.objects.get(session=session, kind="compact_summary").seq
    run = finished_run(session)
    last_call = models.ApiCall.objects.filter(session=session, agent="main").order_by("-number")[0].number
    second = finished_run(session, cut_start=last_call - 1)  # from after msg_1: less than the first run

    page = client_in.get(f"/runs/{run.pk}/compare/").content.decode()
    assert "Replaced messages" in page and "please fix the bug" in page and "Primary Request and Intent" in page
    data = client_in.get(f"/runs/{run.pk}/compare.json").json()
    replaced_texts = [m["text"] for m in data["replaced"]["messages"]]
    assert "please fix the bug in app.py" in replaced_texts and "start the work" not in replaced_texts
    assert data["replaced"]["tokens_estimate"] == sum(tiktoken_counts(replaced_texts))
    assert data["summary"]["tokens_estimate"] == tiktoken_counts([run.summary])[0]

    with_agent = client_in.get(f"/runs/{run.pk}/compare.json", {"with": f"agent-{agent_seq}"}).json()
    assert "AGENT-OWN-SUMMARY" in with_agent["with"]["text"]
    assert with_agent["with"]["tokens_estimate"] == tiktoken_counts([with_agent["with"]["text"]])[0]
    with_run = client_in.get(f"/runs/{run.pk}/compare/", {"with": str(second.pk)}).content.decode()
    assert f"run {second.pk}" in with_run and f"agent&#x27;s own summary at #{agent_seq}" in with_run
    assert client_in.get(f"/runs/{run.pk}/compare/", {"with": "agent-99999"}).status_code == 404


def _download(response) -> bytes:
    return b"".join(response.streaming_content)


def test_export_claude_code_reimports_with_the_compaction_in_place(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = finished_run(session, cut_start=1, cut_end=3)
    assert client_in.get(f"/runs/{run.pk}/export/?format=json").status_code == 409  # not accepted yet
    client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "ok"})

    response = client_in.get(f"/runs/{run.pk}/export/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="{SESSION_ID}.compacted-run{run.pk}.jsonl"'
    body = _download(response)
    original = cc_session(tmp_path).read_bytes().splitlines(keepends=True)
    lines = body.splitlines(keepends=True)
    # Head re-emitted byte for byte, then boundary and summary, then the kept records.
    assert lines[:2] == original[:2]
    boundary, summary = orjson.loads(lines[2]), orjson.loads(lines[3])
    assert boundary["subtype"] == "compact_boundary" and boundary["compactMetadata"]["trigger"] == "manual"
    assert boundary["compactMetadata"]["preTokens"] == 4000 + 5
    assert summary["isCompactSummary"] is True and summary["parentUuid"] == boundary["uuid"]
    assert summary["message"]["content"] == cc.continuation_message(run.summary, version="2.1.20", auto=False)
    kept = [orjson.loads(line) for line in lines[4:]]
    assert [k["uuid"] for k in kept] == ["a4"]
    assert kept[0]["parentUuid"] == summary["uuid"]  # re-linked past the summarised records
    assert len(lines) == 5

    path = tmp_path / "exported" / "exported.jsonl"
    path.parent.mkdir()
    path.write_bytes(body)
    again = imported(path)
    assert again.pk != session.pk
    event = models.ContextEvent.objects.get(session=again, kind="compaction")
    assert event.trigger == "manual" and event.pre_tokens == 4000 + 5
    rows = list(models.Message.objects.filter(session=again).order_by("seq"))
    head_seqs = [m.seq for m in rows if m.uuid in ("u1", "a1")]
    kept_seqs = [m.seq for m in rows if m.uuid in ("u2", "a4")]
    assert max(head_seqs) < event.seq < min(kept_seqs)
    assert not any(m.uuid in ("a2", "r1", "a3") for m in rows)


def test_export_klaude_appends_a_compaction_entry(client_in, tmp_path, offline):
    folder = KLAUDE_SAMPLES / "dot-klaude/projects/home-dev-projects-webapp/sessions/780c4b16a51049faa2b2bbd1c38dbe31"
    session = imported(folder / "events.jsonl")
    run = finished_run(session, strategy="klaude-code")
    run_services.review_run(run=run, user=None, decision="accepted", comment="")
    body = _download(client_in.get(f"/runs/{run.pk}/export/"))
    lines = body.splitlines(keepends=True)
    original = (folder / "events.jsonl").read_bytes().splitlines(keepends=True)
    assert lines[:-1] == original
    entry = json.loads(lines[-1])
    assert entry["type"] == "CompactionEntry"
    assert entry["data"]["first_kept_index"] == run.first_kept == run.cut_end
    assert entry["data"]["summary"] == run.summary
    assert set(entry["data"]) == {
        "summary",
        "first_kept_index",
        "tokens_before",
        "details",
        "kept_items_brief",
        "created_at",
    }

    target = tmp_path / "k" / "events.jsonl"
    target.parent.mkdir()
    target.write_bytes(body)
    (target.parent / "meta.json").write_bytes((folder / "meta.json").read_bytes())
    again = imported(target)
    assert models.ContextEvent.objects.filter(session=again, kind="compaction").count() == 1


# ---------------------------------------------------------------------------------------------
# manage.py compact


def test_compact_command_dry_run_and_offline_run(tmp_path, offline):
    session = imported(cc_session(tmp_path))
    out = io.StringIO()
    call_command("compact", str(session.pk), "--strategy", "claude-code", "--dry-run", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["cut"]["to"] == 7 and Run.objects.count() == 0

    out = io.StringIO()
    call_command("compact", SESSION_ID, "--cut-start", "1", "--cut-end", "3", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["status"] == "succeeded" and data["offline"] is True
    assert Run.objects.get().summary == data["summary"]

    with pytest.raises(CommandError, match="must start before it ends"):
        call_command("compact", str(session.pk), "--cut-start", "3", "--cut-end", "2", stdout=io.StringIO())
    with pytest.raises(CommandError, match="Unknown parameter"):
        call_command("compact", str(session.pk), "--param", "nope=1", "--dry-run", stdout=io.StringIO())


def test_the_run_page_links_back_to_the_exact_preview_it_was_made_from(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = queued_run(session, cut_start=1, cut_end=3)
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert "after call" not in page.split("Point</dt>")[1][:40]  # no point given: the end
    href = re.search(r'href="([^"]*/preview/\?[^"]*)">preview</a>', page)
    assert href is not None
    url = html.unescape(href.group(1))
    assert "cut_start=1" in url and "cut_end=3" in url
    data = client_in.get(url + "&format=json").json()
    assert data["transcript_sha256"] == run.transcript_sha256 and data["cut"]["by_hand"] is True
    assert client_in.get(f"/runs/{run.pk}.json").json()["preview_url"] == url
