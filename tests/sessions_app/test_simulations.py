"""The settings simulator (issue 36): each session's result is ``manage.py replay`` of that session with the same
parameters, on every shared sample of the four agents; sessions over the memory budget are listed as skipped; the
page's JSON twin and ``manage.py simulate --json`` give the same numbers. A dead worker's simulation: test_sweeps.py."""

from __future__ import annotations

from io import StringIO
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.simulate import EVENT_FIELDS, REPLAY_FIELDS
from sessions_app import memory_budget, models, services, simulations
from tests.conftest import CLAUDE_SAMPLES, CODEX_SAMPLES, KHAELOR_SAMPLES, KLAUDE_SAMPLES

pytestmark = pytest.mark.django_db

# Per agent: its sample folder, a parameter fixed and one parameter's values tried (strategy parameters,
# docs/compaction/).
CASES = {
    "claude-code": (CLAUDE_SAMPLES, [], "pct_override=70,90"),
    "klaude-code": (KLAUDE_SAMPLES / "dot-klaude", ["context_limit=150000"], "reserve_tokens=16384,40000"),
    "khaelor": (KHAELOR_SAMPLES, [], "proactive_ratio=0.6,0.8"),
    "codex": (CODEX_SAMPLES, [], "auto_compact_token_limit=150000,200000"),
}


def _json(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


@pytest.mark.slow
@pytest.mark.parametrize("agent", sorted(CASES))
def test_each_session_equals_manage_py_replay(client_in, settings, agent: str) -> None:
    folder, fixed, tried = CASES[agent]
    assert not services.import_paths(paths=[folder]).rejected
    sessions = list(models.Session.objects.filter(format=agent).exclude(info__has_key="title_attached_to"))
    assert sessions
    # The largest session (of several) is over the budget: listed as skipped, with the reason, never dropped.
    # (weighed as the budget weighs them: their bytes, or their records where these are small)
    largest = max(sessions, key=lambda s: memory_budget.weight(session=s))
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=largest) - (len(sessions) > 1)
    params = [arg for pair in fixed for arg in ("--param", pair)]
    data = _json("simulate", "--strategy", agent, "--agent", agent, *params, "--try", tried)
    assert data["status"] == "done" and data["sessions_done"] == data["sessions_total"] == len(sessions)
    name, values = tried.split("=")
    expected = [dict(pair.split("=") for pair in [*fixed, f"{name}={value}"]) for value in values.split(",")]
    assert data["setting_parameters"] == expected
    skipped = [row for row in data["sessions"] if row.get("skipped")]
    big = [s.pk for s in sessions if memory_budget.weight(session=s) > settings.ANALYSIS_MAX_SESSION_BYTES]
    assert [row["session"] for row in skipped] == big
    assert all("ANALYSIS_MAX_SESSION_BYTES" in row["skipped"] for row in skipped)
    assert data["all"]["skipped"] == len(big) and data["all"]["happened"]["sessions"] == len(sessions) - len(big)
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=largest)  # the replay command reads it too
    compared = 0
    for row in data["sessions"]:
        if row.get("skipped"):
            continue
        sid = str(row["session"])
        overview = orjson.loads(client_in.get(f"/sessions/{sid}.json").content)["overview"]
        assert row["happened"]["compactions"] == overview["compactions"], sid
        assert row["happened"]["peak"] == overview["peak"] and row["happened"]["cost_usd"] == overview["cost_usd"]
        for value, result in zip(values.split(","), row["outcomes"], strict=True):
            replayed = _json("replay", sid, "--strategy", agent, *params, "--param", f"{name}={value}")
            assert {key: result[key] for key in REPLAY_FIELDS} == {key: replayed[key] for key in REPLAY_FIELDS}, sid
            assert result["events"] == [{key: e[key] for key in EVENT_FIELDS} for e in replayed["events"]], sid
            compared += 1
    assert compared == 2 * (len(sessions) - len(big)) > 0


def test_the_page_its_twin_and_the_command_agree(client_in, settings) -> None:
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_short.jsonl", CLAUDE_SAMPLES / "spotter_tool_heavy.jsonl"])
    form = {"strategy": "claude-code", "try_name": "pct_override", "try_values": "60, 90", "autocompact_enabled": "on"}
    response = client_in.post("/simulate/", form)
    assert response.status_code == 302
    queued = client_in.get(response["Location"])
    assert b'hx-trigger="every 1s"' in queued.content and b'id="sessions-total">\xe2\x80\xa6<' in queued.content
    run = models.SimulationRun.objects.get()
    assert run.status == "queued" and run.parameters["try"] == {"name": "pct_override", "values": ["60", "90"]}
    assert simulations.simulate_task.call(run.pk) == "done"  # what the worker runs
    with CaptureQueriesContext(connection) as queries:
        page = client_in.get(response["Location"])
    # Session, user, the run, the live workers: the same few queries whatever the number of sessions simulated.
    assert len(queries) <= 6, [q["sql"] for q in queries]
    assert page.status_code == 200 and b"every 1s" not in page.content  # done: no more polling
    assert b"Recommended: " in page.content or b"keep what you have" in page.content
    twin = orjson.loads(client_in.get(response["Location"].rstrip("/") + ".json").content)
    command = _json("simulate", "--strategy", "claude-code", "--try", "pct_override=60,90")
    assert twin["settings"] == ["Auto-compact at 60 % of the window", "Auto-compact at 90 % of the window"]
    for key in ("settings", "setting_parameters", "all", "projects", "sessions", "parameters"):
        assert twin[key] == command[key], key
    assert twin["sessions_done"] == twin["sessions_total"] == 2
    # Bad input is a sentence, on the page and in the twin, never a 500.
    bad = client_in.post("/simulate/", {**form, "try_values": "sixty"})
    assert bad.status_code == 400 and b"takes a number, not &#x27;sixty&#x27;" in bad.content
    bad_json = client_in.post("/simulate.json", {"strategy": "nope"})
    assert bad_json.status_code == 400 and "Unknown strategy 'nope'" in bad_json.json()["error"]


def test_a_simulation_taken_up_again_keeps_the_sessions_it_replayed(settings) -> None:
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_short.jsonl", CLAUDE_SAMPLES / "spotter_tool_heavy.jsonl"])
    first, second = models.Session.objects.order_by("started_at", "id")
    # The worker's budget is its own: a session over it is listed as skipped, with the setting to raise.
    settings.WORKER_ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=second) - 1
    plan = simulations.selectors.plan(strategy="claude-code", params={})
    run = simulations.create(plan=plan, filters={"agent": "claude-code"})
    # What a worker killed after the first session left (the sweep queued it again), and a deleted session's row.
    kept = {**simulations.session_row(session=first, plan=plan), "kept": True}
    models.SimulationRun.objects.filter(pk=run.pk).update(results=[kept, {"session": 10**6, "skipped": "gone"}])
    assert simulations.simulate_task.call(run.pk) == "done"
    done = models.SimulationRun.objects.get(pk=run.pk)
    assert done.sessions_done == done.sessions_total == 2
    assert [row["session"] for row in done.results] == [first.pk, second.pk]
    assert done.results[0].get("kept") and "kept" not in done.results[1]
    assert "WORKER_ANALYSIS_MAX_SESSION_BYTES" in done.results[1]["skipped"]
