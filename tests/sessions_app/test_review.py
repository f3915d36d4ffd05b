"""Reviews: what a summary lost, verdicts that keep their history, reasons for rejects, filters, line comments."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps
from django.urls import reverse

from compaction.strategies.registry import build_strategy
from compaction.tokens import tiktoken_counts
from sessions_app import models, run_services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import reviews as review_selectors
from tests.conftest import KLAUDE_SAMPLES
from tests.helpers.claude_code_lines import assistant, cc_line, cc_session, compact_boundary, user, write
from tests.helpers.runs import finished_run, imported

pytestmark = pytest.mark.django_db
Run = models.CompactionRun


def test_a_reject_needs_a_reason_and_a_changed_verdict_keeps_its_history(client_in, tmp_path, offline, reviewer):
    run = finished_run(imported(cc_session(tmp_path)))
    refused = client_in.post(f"/runs/{run.pk}/review/?format=json", {"decision": "rejected", "comment": "  "})
    assert refused.status_code == 409 and "needs a reason" in refused.json()["error"]
    assert not models.ReviewVerdict.objects.exists()

    client_in.post(f"/runs/{run.pk}/review/", {"decision": "rejected", "comment": "Loses the failing test."})
    data = client_in.post(f"/runs/{run.pk}/review/?format=json", {"decision": "accepted", "comment": ""}).json()
    assert data["review"]["status"] == "accepted" and data["review"]["by"] == "rev"
    history = data["review"]["history"]
    assert [(h["decision"], h["comment"], h["by"]) for h in history] == [
        ("rejected", "Loses the failing test.", "rev"),
        ("accepted", "", "rev"),
    ]
    assert history[0]["at"] <= history[1]["at"]
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="verdict-history"' in page and "Loses the failing test." in page
    assert client_in.get(f"/runs/{run.pk}.json").json()["review"]["history"] == history


def test_verdicts_given_before_history_existed_become_its_first_entry(tmp_path, offline, reviewer):
    run = finished_run(imported(cc_session(tmp_path)))
    Run.objects.filter(pk=run.pk).update(
        review=Run.Review.ACCEPTED, review_comment="old", reviewed_by=reviewer, reviewed_at=run.created_at
    )
    migration = importlib.import_module("sessions_app.migrations.0006_review_history")
    migration.keep_existing_verdicts(apps, None)
    (verdict,) = models.ReviewVerdict.objects.filter(run=run)
    assert (verdict.decision, verdict.comment, verdict.by, verdict.at) == ("accepted", "old", reviewer, run.created_at)


def test_run_page_and_json_show_what_the_summary_kept_and_its_size(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    run = finished_run(session, cut_start=1, cut_end=3)
    data = client_in.get(f"/runs/{run.pk}.json").json()
    strategy = build_strategy(
        "claude-code", info=conversation_selectors.session_info(session=session), overrides=run.parameters
    )
    assert data["budget_tokens"] == strategy.max_summary_tokens
    assert data["summary_tokens_estimate"] == run.summary_tokens == tiktoken_counts([run.summary])[0]
    middle = conversation_selectors.conversation(session=session)[run.cut_start : run.cut_end]
    replaced = sum(tiktoken_counts([m.text for m in middle]))
    assert data["replaced_tokens_estimate"] == replaced
    assert data["compression_ratio"] == round(replaced / run.summary_tokens, 2)
    coverage = data["coverage"]
    # The summarised range is the tool call on /src/app.py, its result and the reply after it.
    files = [i for i in coverage["items"] if i["kind"] == "file_read"]
    assert [f["key"] for f in files] == ["/src/app.py"]
    assert files[0]["url"] == reverse("sessions:message", args=[session.pk, files[0]["seq"]])
    linked = models.Message.objects.get(session=session, seq=files[0]["seq"])
    assert any(b["kind"] == "tool_use" and json.loads(b["text"]) == {"file_path": "/src/app.py"} for b in linked.blocks)
    assert coverage["figures"]["files"] == {"found": int(files[0]["found"]), "total": 1}
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="coverage"' in page and "/src/app.py" in page and 'id="compression"' in page


def test_reviews_filters_and_coverage_figures(client_in, tmp_path, offline, reviewer, django_user_model):
    session = imported(cc_session(tmp_path))
    klaude = imported(
        KLAUDE_SAMPLES
        / "dot-klaude/projects/home-dev-projects-webapp/sessions/780c4b16a51049faa2b2bbd1c38dbe31/events.jsonl"
    )
    accepted = finished_run(session, cut_start=1, cut_end=3)
    pending = finished_run(session)
    other = finished_run(klaude, strategy="klaude-code")
    colleague = django_user_model.objects.create_user(username="colleague", password="pw")
    run_services.review_run(run=accepted, user=reviewer, decision="accepted", comment="ok")
    run_services.review_run(run=other, user=colleague, decision="rejected", comment="misses the TodoWrite")

    def ids(query: str) -> tuple[list[int], list[int]]:
        data = client_in.get(f"/reviews.json?{query}").json()
        return [r["id"] for r in data["pending"]], [r["id"] for r in data["decided"]]

    assert ids("") == ([pending.pk], [other.pk, accepted.pk])
    assert ids("agent=klaude-code") == ([], [other.pk])
    assert ids("strategy=claude-code") == ([pending.pk], [accepted.pk])
    assert ids(f"session={session.pk}") == ([pending.pk], [accepted.pk])
    assert ids("reviewer=colleague") == ([], [other.pk])
    assert ids("verdict=rejected") == ([], [other.pk])
    assert ids("verdict=pending") == ([pending.pk], [])

    row = client_in.get("/reviews.json").json()["pending"][0]
    expected = review_selectors.run_coverage(run=pending)
    assert expected is not None and row["coverage_line"] == expected.line
    assert row["coverage"] == {name: {"found": f, "total": t} for name, (f, t) in expected.figures().items()}
    page = client_in.get("/reviews/?reviewer=colleague").content.decode()
    assert "misses the TodoWrite" in page and f"run {accepted.pk}<" not in page
    assert "<option selected>colleague</option>" in page
    # A row is coloured by its verdict, not turned green because the run succeeded.
    assert "run-row status-succeeded" not in client_in.get("/reviews/").content.decode()


def test_compare_diffs_sections_and_the_agents_own_summary(client_in, tmp_path, offline):
    compacted = write(
        tmp_path,
        "compacted.jsonl",
        user("u0", None, "start the work on app.py"),
        assistant("a0", "u0", "msg_0", "working", ctx=900),
        compact_boundary("b1", trigger="auto"),
        cc_line(
            type="user",
            uuid="cs",
            parentUuid="b1",
            sessionId="s-1",
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={
                "role": "user",
                "content": "Summary:\n1. Primary Request and Intent: start the work on app.py\n7. Pending Tasks: []\n",
            },
        ),
        user("u1", "cs", "please fix the bug in app.py"),
        assistant("a1", "u1", "msg_1", "Let me look at the file first.", ctx=1000),
    )
    session = imported(compacted)
    agent_seq = models.Message.objects.get(session=session, kind="compact_summary").seq
    run = finished_run(session)
    data = client_in.get(f"/runs/{run.pk}/compare.json", {"with": f"agent-{agent_seq}"}).json()
    sections = {s["name"]: (s["left"], s["right"]) for s in data["diff"]["sections"]}
    assert len(sections) == 9
    # The agent's own summary has two of the nine sections; the second says nothing.
    assert sections["Primary Request and Intent"][0] == "ok" and sections["Pending Tasks"][0] == "empty"
    assert sections["Errors and fixes"][0] == "missing"
    assert "".join(r["text"] for r in data["diff"]["left"]) == data["with"]["text"]
    assert "".join(r["text"] for r in data["diff"]["right"]) == run.summary
    assert {r["tag"] for r in data["diff"]["left"]} <= {"equal", "delete"}
    # The agent's summary is checked against the range its own compaction summarised: the first prompt.
    agent_items = data["with"]["coverage"]["items"]
    assert [(i["kind"], i["found"]) for i in agent_items if i["kind"] == "request"] == [("request", True)]
    assert data["with"]["coverage"]["range"] == {"from": 0, "to": 2}

    here = f"/runs/{run.pk}/compare/?with=agent-{agent_seq}"
    response = client_in.post(f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "", "next": here})
    assert response.status_code == 302 and response["Location"] == here
    elsewhere = client_in.post(
        f"/runs/{run.pk}/review/", {"decision": "accepted", "comment": "", "next": "https://example.org/"}
    )
    assert elsewhere["Location"] == f"/runs/{run.pk}/"  # never redirected off the site
    page = client_in.get(here).content.decode()
    assert 'class="section-row section-flagged" data-section="Errors and fixes"' in page
    assert f'id="review-form-{run.pk}"' in page and f'id="review-{run.pk}">accepted<' in page


def test_compare_names_each_run_by_its_agents_display_name(client_in, tmp_path, offline):
    # "run 3 (khaelor, ...)": the compare page used the strategy's slug where every other page names the agent.
    session = imported(
        write(
            tmp_path,
            "s.jsonl",
            user("u0", None, "start the work on app.py"),
            assistant("a0", "u0", "msg_0", "working", ctx=900),
            user("u1", "a0", "please fix the bug in app.py"),
            assistant("a1", "u1", "msg_1", "Let me look at the file first.", ctx=1000),
        )
    )
    first, second = finished_run(session), finished_run(session)
    page = client_in.get(f"/runs/{second.pk}/compare/", {"with": str(first.pk)}).content.decode()
    assert f"run {first.pk} (Claude Code, {first.model}, offline, pending)" in page
    assert f"run {second.pk} (Claude Code, {second.model}, offline)" in page
    assert "(claude-code," not in page


def test_comments_attach_to_a_line_of_the_summary(client_in, tmp_path, offline):
    run = finished_run(imported(cc_session(tmp_path)))
    lines = run.summary.split("\n")
    response = client_in.post(f"/runs/{run.pk}/comments/?format=json", {"line": "2", "text": "Too vague."})
    assert response.status_code == 201 and response.json() == {"run": run.pk, "line": 2, "text": "Too vague."}
    beyond = client_in.post(f"/runs/{run.pk}/comments/?format=json", {"line": str(len(lines) + 1), "text": "x"})
    assert beyond.status_code == 409 and f"lines 1 to {len(lines)}" in beyond.json()["error"]
    (numbered,) = [line for line in review_selectors.summary_lines(run=run) if line.comments]
    assert numbered.number == 2 and numbered.text == lines[1] and numbered.comments[0].text == "Too vague."
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert '<li value="2">' in page and "Too vague." in page


@pytest.mark.parametrize(
    ("cost", "shown"), [("0", "$0.00"), ("0.001234", "$0.0012"), ("1.5", "$1.50"), ("1234.5", "$1,234.50")]
)
def test_a_runs_cost_reads_as_dollars_and_cents(client_in, tmp_path, offline, reviewer, cost, shown):
    # Below a cent, four places (as the timeline's tooltip shows a call's cost); never the stored six ("$0.000000").
    run = finished_run(imported(cc_session(tmp_path)))
    Run.objects.filter(pk=run.pk).update(cost_usd=cost)
    page = client_in.get(f"/runs/{run.pk}/").content.decode()
    assert f'<dt>Cost</dt><dd class="num">{shown}</dd>' in page
