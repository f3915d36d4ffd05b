"""The compaction-instructions lab: variants × points queued as runs with their instructions, compared side by side;
the page, its JSON twin and the command give the same figures."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sessions_app import models, run_services
from sessions_app.selectors import labs as lab_selectors
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import imported
from tests.helpers.worker import run_worker

pytestmark = pytest.mark.django_db
Run = models.CompactionRun
VARIANTS = ["Keep every file path.", "Be brief: five lines at most."]


def _command(*args: str) -> str:
    out = StringIO()
    call_command("compaction_lab", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)  # db_worker closes the connection when it is done
def test_a_lab_runs_each_variant_at_each_point_and_compares_them(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    response = client_in.post(
        f"/sessions/{session.pk}/lab/",
        {"points": "2, 4", "variant1": VARIANTS[0], "variant2": VARIANTS[1], "variant3": "  "},
    )
    assert response.status_code == 302
    key = response["Location"].rstrip("/").rsplit("/", 1)[-1]
    runs = list(Run.objects.filter(lab=key).order_by("pk"))
    assert [(r.after_call, r.instructions) for r in runs] == [
        (2, VARIANTS[0]),
        (2, VARIANTS[1]),
        (4, VARIANTS[0]),
        (4, VARIANTS[1]),
    ]
    queued = client_in.get(f"/labs/{key}/").content.decode()
    assert 'data-finished="false"' in queued and 'hx-trigger="every 1s"' in queued

    run_worker()  # the real db_worker drains the queue
    data = client_in.get(f"/labs/{key}.json").json()
    assert data["finished"] is True and data["points"] == [2, 4]
    assert [v["instructions"] for v in data["variants"]] == VARIANTS
    for variant in data["variants"]:
        assert [r["status"] for r in variant["runs"]] == ["succeeded", "succeeded"]
        assert variant["summary_tokens"] == sum(r["summary_tokens"] for r in variant["runs"]) > 0
        assert variant["checklist"]["total"] == sum(r["checklist"]["total"] for r in variant["runs"]) > 0
    # Offline, the instructions still count in the prompt's size: the longer variant sent more.
    sent = [sum(r["input_tokens"] for r in v["runs"]) for v in data["variants"]]
    assert sent[0] < sent[1]
    page = client_in.get(f"/labs/{key}/").content.decode()
    assert 'data-finished="true"' in page and "hx-trigger" not in page.split('id="lab-grid"')[1].split(">")[0]
    assert page.count('class="lab-variant"') == 2 and page.count('data-status="succeeded"') == 4
    assert json.loads(_command("--show", key, "--json")) == data
    run = client_in.get(f"/runs/{runs[0].pk}.json").json()
    assert (run["instructions"], run["lab"]) == (VARIANTS[0], key)


def test_the_instructions_reach_the_summarizer_and_a_lab_from_the_command(tmp_path, anthropic_api):
    from tests.anthropic_server import ok

    session = imported(cc_session(tmp_path))
    anthropic_api.script(ok("<summary>1. Primary Request: fix app.py</summary>"), ok("<summary>1. x</summary>"))
    out = _command(str(session.pk), "--at", "4", "--variant", VARIANTS[0], "--baseline", "--now")
    assert "variant 1: 1/1 finished" in out and "variant 2: 1/1 finished" in out
    prompts = [body["messages"][-1]["content"][-1]["text"] for body in anthropic_api.requests]
    assert f"Additional Instructions:\n{VARIANTS[0]}" in prompts[0]
    assert "Additional Instructions" not in prompts[1]  # the baseline: the agent's own prompt alone


def test_a_lab_refuses_what_it_cannot_run(client_in, tmp_path, offline):
    session = imported(cc_session(tmp_path))
    page = client_in.post(f"/sessions/{session.pk}/lab/", {"points": "2, x", "variant1": "a"}, follow=True)
    assert page.status_code == 200 and "Not run: &#x27;x&#x27; is not a call number" in page.content.decode()
    answer = client_in.post(f"/sessions/{session.pk}/lab/?format=json", {"points": "2", "baseline": "1"})
    assert answer.status_code == 201 and answer.json()["variants"][0]["instructions"] == ""
    Run.objects.all().delete()
    assert client_in.get("/labs/nope/").status_code == 404
    with pytest.raises(run_services.RunRefused, match="same instructions"):
        run_services.start_lab(session=session, strategy="claude-code", points=[4], variants=["a", "a"], user=None)
    with pytest.raises(CommandError, match="at least one point"):
        _command(str(session.pk), "--variant", "x")
    assert not Run.objects.exists()
    with pytest.raises(lab_selectors.LabNotFound):
        lab_selectors.lab(key="nope")
