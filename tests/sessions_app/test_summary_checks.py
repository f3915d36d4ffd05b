"""Claim by claim and rule by rule on the pages (issue 38): the run page, its JSON twin, the compare page and
``check_summary`` give one check; accepting a summary that loses a rule or holds a contradicted claim asks first."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from sessions_app import models
from sessions_app.judge_services import execute_judge
from sessions_app.sweeps import sweep_all
from tests.anthropic_server import ok
from tests.conftest import KHAELOR_SAMPLES
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import finished_run, imported

pytestmark = pytest.mark.django_db
Run = models.CompactionRun

# Claims: line 1 says a file was edited that the records only read (cc_session reads /src/app.py, its reply says it
# "Fixed the division by zero", but no tool writes it); line 2 restates the request.
SUMMARY = "- Edited `/src/app.py` to fix the division by zero.\n- The user asked to fix the bug in app.py."


def _run(tmp_path) -> Run:
    run = finished_run(
        imported(cc_session(tmp_path, prompt="please fix the bug in app.py. Don't touch the migrations."))
    )
    assert run.cut_start == 0 and run.cut_end >= 5, (run.cut_start, run.cut_end)
    Run.objects.filter(pk=run.pk).update(summary=SUMMARY)
    run.refresh_from_db()
    return run


def test_the_run_page_its_twin_the_compare_page_and_the_command_give_one_check(client_in, tmp_path, offline):
    run = _run(tmp_path)
    checks = client_in.get(f"/runs/{run.pk}.json").json()["checks"]
    claims = {c["line"]: c for c in checks["claims"]["claims"]}
    assert claims[1]["status"] == "contradicted" and "only read" in claims[1]["why"]
    assert claims[2]["status"] == "supported" and claims[2]["support"][0]["url"].startswith("/sessions/")
    assert checks["score_percent"] == 50 and checks["claims"]["counts"]["contradicted"] == 1
    (rule,) = checks["rules"]["rules"]
    assert (rule["kind"], rule["text"], rule["status"], rule["after_call"]) == (
        "constraint",
        "Don't touch the migrations.",
        "lost",
        0,
    )
    assert len(checks["to_confirm"]) == 2

    out = StringIO()
    call_command("check_summary", str(run.pk), "--json", stdout=out)
    assert {k: v for k, v in json.loads(out.getvalue()).items() if k != "run"} == checks
    assert client_in.get(f"/runs/{run.pk}/compare.json").json()["summary"]["checks"] == checks

    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="checks"' in page and "claim-contradicted" in page and "rule-lost" in page
    assert f'class="claims-score">{checks["score_percent"]}%' in page
    compare = client_in.get(f"/runs/{run.pk}/compare/").content.decode()
    assert 'id="right-checks"' in compare and "Don&#x27;t touch the migrations." in compare


def test_accepting_a_summary_that_loses_a_rule_asks_first(client_in, tmp_path, offline):
    run = _run(tmp_path)
    asked = client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "fine"})
    page = asked.content.decode()
    assert asked.status_code == 200 and 'id="confirm-accept"' in page
    assert "Don&#x27;t touch the migrations." in page and "only read" in page and 'name="confirm"' in page
    assert not models.ReviewVerdict.objects.exists()

    refused = client_in.post(f"/runs/{run.pk}/review/?format=json", {"decision": "accepted"})
    assert refused.status_code == 409 and refused.json()["confirm_required"] and len(refused.json()["to_confirm"]) == 2

    client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "fine", "confirm": "1"})
    run.refresh_from_db()
    assert run.review == Run.Review.ACCEPTED and run.review_comment == "fine"
    # A reject needs no confirmation.
    rejected = client_in.post(f"/runs/{run.pk}/review/?format=json", {"decision": "rejected", "comment": "loses it"})
    assert rejected.status_code == 200 and rejected.json()["review"]["status"] == "rejected"


def test_an_agents_own_summary_is_checked_by_its_compaction_number(offline):
    session = imported(KHAELOR_SAMPLES / "ledger-migration.events.jsonl")
    out = StringIO()
    call_command("check_summary", "--session", str(session.pk), "--compaction", "1", "--json", stdout=out)
    data = json.loads(out.getvalue())
    # The steering the user queued while KHAELOR worked is kept by its checkpoint's decisions.
    (rule,) = data["rules"]["rules"]
    assert rule["text"] == "Also keep the Alembic migrations untouched." and rule["status"] == "kept"
    assert rule["summary_line"] == 12 and data["to_confirm"] == []
    assert data["claims"]["counts"]["contradicted"] == 0 and data["claims"]["counts"]["supported"] >= 7
    with pytest.raises(CommandError, match="no compaction 2"):
        call_command("check_summary", "--session", str(session.pk), "--compaction", "2")
    with pytest.raises(CommandError, match="Give a run id"):
        call_command("check_summary")
    with pytest.raises(CommandError, match="No compaction run with id 99999"):
        call_command("check_summary", "99999")
    with pytest.raises(CommandError, match="give a run id"):
        call_command("check_summary", "--session", str(session.pk), "--compaction", "1", "--judge")


def test_the_preview_lists_the_rules_in_force_at_its_point(client_in, tmp_path, offline):
    session = _run(tmp_path).session
    data = client_in.get(f"/sessions/{session.pk}/preview.json?at=2").json()
    (rule,) = data["rules_in_force"]
    assert (rule["kind"], rule["text"], rule["after_call"], rule["line"]) == (
        "constraint",
        "Don't touch the migrations.",
        0,
        1,
    )
    assert rule["url"] == f"/sessions/{session.pk}/m/{rule['seq']}/"
    # The command line prints the same object.
    out = StringIO()
    call_command("preview", str(session.pk), "--strategy", "claude-code", "--at", "2", "--json", stdout=out)
    assert json.loads(out.getvalue())["rules_in_force"] == data["rules_in_force"]
    page = client_in.get(f"/sessions/{session.pk}/preview/?at=2").content.decode()
    assert 'id="rules-in-force"' in page and "Don&#x27;t touch the migrations." in page


def test_the_judge_shows_its_cost_first_and_is_recorded_like_a_run(client_in, tmp_path, anthropic_api, settings):
    key, settings.ANTHROPIC_API_KEY = settings.ANTHROPIC_API_KEY, ""
    run = _run(tmp_path)  # summarised offline: only the judge asks the scripted API
    settings.ANTHROPIC_API_KEY = key
    prose = "- The reviewer seemed broadly happy with where things were heading overall."
    Run.objects.filter(pk=run.pk).update(summary=f"{SUMMARY}\n{prose}")
    data = client_in.get(f"/runs/{run.pk}.json").json()
    plan = data["judge"]["plan"]
    assert [c["line"] for c in plan["claims"]] == [3] and plan["model"] == "claude-haiku-4-5"
    assert plan["estimate"]["input_tokens"] > 0 and plan["estimate"]["cost_usd"] > 0
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="judge-cost"' in page and f"{plan['estimate']['cost_usd']:.4f}" in page

    asked = client_in.post(f"/runs/{run.pk}/judge/?format=json")
    assert asked.status_code == 201 and asked.json()["status"] == "queued"
    anthropic_api.script(ok("1: unsupported: no record says how the reviewer felt"))
    before = len(anthropic_api.requests)
    judge = execute_judge(judge_id=asked.json()["id"])
    assert judge.status == "succeeded" and judge.input_tokens and judge.cost_usd is not None
    assert judge.verdicts == [
        {"line": 3, "text": prose[2:], "status": "unsupported", "reason": "no record says how the reviewer felt"}
    ]
    body = anthropic_api.requests[before]
    assert body["model"] == "claude-haiku-4-5" and prose[2:] in json.dumps(body["messages"])
    assert "Don't touch the migrations." in json.dumps(body["messages"])  # the records it judges from
    latest = client_in.get(f"/runs/{run.pk}.json").json()["judge"]["latest"]
    assert latest["verdicts"] == judge.verdicts and latest["cost_usd"] == float(judge.cost_usd)

    # The command line: the estimate first, then the answer, recorded as another judge run.
    anthropic_api.script(ok("1: supported: the prompt at line 1"))
    out = StringIO()
    call_command("check_summary", str(run.pk), "--judge", stdout=out)
    text = out.getvalue()
    assert "judge " in text and "≈$" in text and "judge: line 3: supported" in text
    assert models.JudgeRun.objects.filter(run=run).count() == 2


def test_the_judge_needs_a_key(client_in, tmp_path, offline):
    run = _run(tmp_path)
    refused = client_in.post(f"/runs/{run.pk}/judge/?format=json")
    assert refused.status_code == 409 and "ANTHROPIC_API_KEY" in refused.json()["error"]
    assert client_in.get(f"/runs/{run.pk}.json").json()["judge"]["plan"] is None


def test_a_judge_whose_worker_died_is_swept_failed(tmp_path, offline):
    run = _run(tmp_path)
    long_ago = timezone.now() - timedelta(hours=3)
    stuck = models.JudgeRun.objects.create(run=run, model="claude-haiku-4-5", status="running", started_at=long_ago)
    fresh = models.JudgeRun.objects.create(
        run=run, model="claude-haiku-4-5", status="running", started_at=timezone.now()
    )
    assert sweep_all().failed_judges == 1
    stuck.refresh_from_db()
    fresh.refresh_from_db()
    assert stuck.status == "failed" and "stopped" in stuck.error and fresh.status == "running"
