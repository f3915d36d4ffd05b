"""Pages, JSON twins, commands, runs and the worker on a session larger than the memory budget
(``sessions_app/memory_budget.py``): each refuses with the sentence that says why and what to do (413 on a page and
its JSON twin, a CommandError for a command), never a 500 and never a cut transcript; under the budget each works.
The budgets are lowered to the test session's size, so the sessions stay small."""

from __future__ import annotations

from io import StringIO

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from compaction.transcript import MAIN
from sessions_app import memory_budget, models, run_services, services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import previews as preview_selectors
from tests.helpers.claude_code_lines import small_session
from tests.helpers.htmx import HTMX
from tests.helpers.runs import finished_run

pytestmark = pytest.mark.django_db

REFUSAL = "ANALYSIS_MAX_SESSION_BYTES"


@pytest.fixture(autouse=True)
def fresh_caches(settings):
    """No answer, conversation or diagnosis kept from another test (the budget is checked before any of them)."""
    settings.ANALYSIS_CACHE_SECONDS = 0
    conversation_selectors.forget_conversations()
    diagnosis_selectors._DIAGNOSES.clear()


@pytest.fixture
def session(tmp_path) -> models.Session:
    """A small session as the worker leaves it: imported, estimated, analysed."""
    outcome = services.import_file(path=small_session(tmp_path))
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    services.estimate_session_tokens(session_id=outcome.session)
    assert services.analyse_session(session_id=outcome.session) is not None
    return models.Session.objects.get(pk=outcome.session)


@pytest.fixture
def over(settings, session):
    """The web's budget one byte under the session's weight."""
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    return settings


def _refused_page(client, url: str) -> None:
    page = client.get(url)
    assert page.status_code == 413
    assert REFUSAL in page.content.decode() and 'class="error refusal"' in page.content.decode()


def _refused_json(client, url: str) -> None:
    answer = client.get(url)
    assert answer.status_code == 413 and answer["Content-Type"].startswith("application/json")
    data = answer.json()
    assert data["status"] == 413 and REFUSAL in data["error"] and "raise" in data["error"]


def _refused_command(*args: str) -> None:
    with pytest.raises(CommandError, match=REFUSAL):
        call_command(*args)


def test_the_check_reads_no_record_and_runs_no_query(session, over) -> None:
    with CaptureQueriesContext(connection) as queries, pytest.raises(memory_budget.SessionTooLarge) as refused:
        conversation_selectors.conversation(session=session, agent=MAIN)
    assert queries.captured_queries == []
    assert f"{memory_budget.weight(session=session):,} bytes" in refused.value.message


def test_the_records_of_a_session_at_the_budget_are_not_kept_beside_another_s(session, settings) -> None:
    """The conversations a process keeps weigh at most the budget together: reading a second session more than half
    of it drops the first before its records are read."""
    weighs = memory_budget.weight(session=session)
    settings.ANALYSIS_MAX_SESSION_BYTES = weighs * 2 - 1
    other = models.Session.objects.create(format=session.format, size_bytes=weighs)
    first = conversation_selectors.conversation(session=session, agent=MAIN)
    assert conversation_selectors.conversation(session=session, agent=MAIN) is first  # kept
    assert conversation_selectors.conversation(session=other, agent=MAIN) == []
    assert len(conversation_selectors._CONVERSATIONS) == 1  # the first was dropped to make room
    assert conversation_selectors.conversation(session=session, agent=MAIN) is not first  # read again
    settings.ANALYSIS_MAX_SESSION_BYTES = weighs * 2
    conversation_selectors.conversation(session=other, agent=MAIN)
    assert len(conversation_selectors._CONVERSATIONS) == 2  # both fit


def test_the_preview_is_refused_over_the_budget_on_its_page_json_fragment_and_command(client_in, session, over):
    _refused_page(client_in, reverse("sessions:preview", args=[session.pk]))
    _refused_json(client_in, reverse("sessions:preview_json", args=[session.pk]))
    # htmx swaps no error answer: the fragment says why, in place.
    fragment = client_in.get(reverse("sessions:preview", args=[session.pk]), **HTMX)
    assert fragment.status_code == 200 and REFUSAL in fragment.content.decode()
    assert "<html" not in fragment.content.decode()
    _refused_command("preview", str(session.pk), "--strategy", "claude-code")
    _refused_command("compact", str(session.pk), "--strategy", "claude-code", "--dry-run")


def test_the_preview_works_at_the_budget(client_in, session, settings):
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session)
    assert client_in.get(reverse("sessions:preview", args=[session.pk])).status_code == 200
    assert client_in.get(reverse("sessions:preview_json", args=[session.pk])).status_code == 200
    call_command("preview", str(session.pk), "--strategy", "claude-code", "--json")


def test_a_call_s_detail_is_refused_over_the_budget_and_works_under_it(client_in, session, settings):
    url = reverse("sessions:turn", args=[session.pk]) + "?call=1"
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    _refused_page(client_in, url)
    _refused_json(client_in, url + "&format=json")
    _refused_command("timeline", str(session.pk), "--call", "1")
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session)
    assert client_in.get(url).status_code == 200
    assert client_in.get(url + "&format=json").json()["call"] == 1


def test_the_timeline_is_drawn_over_the_budget_and_each_replay_says_why_not(client_in, session, over):
    """The timeline reads calls, not records: it works; a what-if replay (every record) is refused in its row."""
    data = client_in.get(reverse("sessions:timeline_json", args=[session.pk]) + "?replay=claude-code").json()
    assert data["series"][MAIN] and data["composition_status"] == "ready"
    assert REFUSAL in data["replays"]["claude-code"]["error"] and "points" not in data["replays"]["claude-code"]
    page = client_in.get(reverse("sessions:timeline", args=[session.pk]) + "?replay=claude-code")
    assert page.status_code == 200 and REFUSAL in page.content.decode()
    assert call_command("timeline", str(session.pk), "--json") is None  # the series, no record read
    _refused_command("replay", str(session.pk), "--strategy", "claude-code")
    _refused_command("layers", str(session.pk), "--at", "2")


def test_the_timeline_replays_work_under_the_budget(client_in, session, settings):
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session)
    data = client_in.get(reverse("sessions:timeline_json", args=[session.pk]) + "?replay=claude-code").json()
    assert "error" not in data["replays"]["claude-code"] and data["replays"]["claude-code"]["points"]


def test_the_diagnosis_the_worker_stored_is_served_over_the_budget(client_in, session, over, capsys):
    """Stored: the page, its JSON twin and ``diagnose --json`` read the report, not the records."""
    assert client_in.get(reverse("sessions:diagnosis", args=[session.pk])).status_code == 200
    assert client_in.get(reverse("sessions:diagnosis_json", args=[session.pk])).json()["verdict"]
    call_command("diagnose", str(session.pk), "--json")
    assert orjson.loads(capsys.readouterr().out)["session"] == session.pk
    _refused_command("diagnose", str(session.pk))  # the text report computes it again from the records


def test_a_diagnosis_not_stored_yet_is_refused_over_the_budget(client_in, session, over):
    models.SessionAnalysis.objects.filter(session=session).delete()
    _refused_page(client_in, reverse("sessions:diagnosis", args=[session.pk]))
    _refused_json(client_in, reverse("sessions:diagnosis_json", args=[session.pk]))


def test_a_run_is_refused_over_the_budget_and_its_pages_and_export_say_why(client_in, session, settings, offline):
    run = finished_run(session)
    run_services.review_run(run=run, user=None, decision="accepted", comment="")
    assert client_in.get(reverse("sessions:run_export", args=[run.pk])).status_code == 200
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    conversation_selectors.forget_conversations()
    started = client_in.post(reverse("sessions:run_create", args=[session.pk]) + "?format=json", {})
    assert started.status_code == 413 and REFUSAL in started.json()["error"]
    assert models.CompactionRun.objects.count() == 1  # nothing queued
    _refused_page(client_in, reverse("sessions:run", args=[run.pk]))
    _refused_json(client_in, reverse("sessions:run_json", args=[run.pk]))
    _refused_page(client_in, reverse("sessions:run_compare", args=[run.pk]))
    _refused_json(client_in, reverse("sessions:run_export", args=[run.pk]) + "?format=json")


def test_a_run_queued_before_the_budget_was_lowered_fails_with_the_sentence(session, settings, offline):
    preview = preview_selectors.build_preview(session=session, strategy="claude-code", overrides={})
    queued = run_services.create_run(preview=preview, user=None)
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    conversation_selectors.forget_conversations()
    run = run_services.execute_run(run_id=queued.pk)
    assert run.status == models.CompactionRun.Status.FAILED and REFUSAL in run.error


def test_the_worker_analyses_a_session_over_the_web_budget_without_storing_its_records(session, over):
    """Between the budgets: the composition and the diagnosis are stored (pages read them); the records are not
    (no page of this process may load them)."""
    analysis = services.analyse_session(session_id=session.pk)
    assert analysis is not None and analysis.diagnosis is not None and analysis.composition
    assert analysis.conversation is None
    assert len(conversation_selectors._CONVERSATIONS) == 0  # nothing kept in the worker after it


def test_a_session_over_the_worker_budget_is_not_analysed_and_its_pages_say_so(client_in, session, settings):
    models.SessionAnalysis.objects.filter(session=session).delete()
    settings.WORKER_ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session) - 1
    assert services.analyse_session(session_id=session.pk) is None
    assert not models.SessionAnalysis.objects.filter(session=session).exists()
    overview = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()["overview"]
    assert overview["computing"] is False and "WORKER_ANALYSIS_MAX_SESSION_BYTES" in overview["not_analysed"]
    page = client_in.get(reverse("sessions:detail", args=[session.pk]))
    assert page.status_code == 200 and "WORKER_ANALYSIS_MAX_SESSION_BYTES" in page.content.decode()
    timeline = client_in.get(reverse("sessions:timeline_json", args=[session.pk])).json()
    assert timeline["composition_status"] == "too_large" and timeline["composition_refused"]
    assert client_in.get(reverse("sessions:timeline", args=[session.pk])).status_code == 200
    # The diagnosis page says why there is none, and what to do.
    refused = client_in.get(reverse("sessions:diagnosis_json", args=[session.pk])).json()
    assert refused["status"] == 413 and "raise ANALYSIS_MAX_SESSION_BYTES" in refused["error"]


# Counted by records as well as bytes: the small session's records are a few hundred bytes each, so its records
# weigh more than its bytes (``memory_budget.RECORD_WEIGHT_BYTES`` each), as a session of one-word records does.


def test_a_session_of_small_records_is_weighed_by_its_records(session) -> None:
    assert session.message_count * memory_budget.RECORD_WEIGHT_BYTES > session.size_bytes
    assert memory_budget.weight(session=session) == session.message_count * memory_budget.RECORD_WEIGHT_BYTES
    large = models.Session(size_bytes=10 * memory_budget.RECORD_WEIGHT_BYTES, message_count=2)
    assert memory_budget.weight(session=large) == large.size_bytes  # large records: their bytes


def test_a_session_whose_bytes_fit_but_records_do_not_is_refused_naming_its_records(client_in, session, settings):
    settings.ANALYSIS_MAX_SESSION_BYTES = session.size_bytes  # its bytes alone would pass
    records = f"{session.message_count:,} records count as"
    turn = reverse("sessions:turn", args=[session.pk]) + "?call=1"
    for url in (reverse("sessions:preview", args=[session.pk]), turn):
        _refused_page(client_in, url)
        assert records in client_in.get(url).content.decode()
    _refused_json(client_in, reverse("sessions:preview_json", args=[session.pk]))
    assert records in client_in.get(reverse("sessions:preview_json", args=[session.pk])).json()["error"]
    fragment = client_in.get(reverse("sessions:preview", args=[session.pk]), **HTMX)
    assert fragment.status_code == 200 and records in fragment.content.decode()
    with pytest.raises(CommandError, match=f"{REFUSAL}.*raise {REFUSAL} above"):
        call_command("replay", str(session.pk), "--strategy", "claude-code")


def test_the_worker_does_not_analyse_a_session_whose_records_are_over_its_budget(client_in, session, settings):
    models.SessionAnalysis.objects.filter(session=session).delete()
    settings.WORKER_ANALYSIS_MAX_SESSION_BYTES = session.size_bytes  # its bytes alone would pass
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session, reads="calls")  # the timeline's
    assert services.analyse_session(session_id=session.pk) is None
    overview = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()["overview"]
    assert "WORKER_ANALYSIS_MAX_SESSION_BYTES" in overview["not_analysed"]
    assert f"{session.message_count:,} records count as" in overview["not_analysed"]
    timeline = client_in.get(reverse("sessions:timeline_json", args=[session.pk])).json()
    assert timeline["composition_status"] == "too_large" and "records count as" in timeline["composition_refused"]


def test_the_timeline_is_refused_when_its_calls_are_over_the_budget(client_in, session, settings):
    """The timeline reads every call and no record: it weighs its calls (295,374 calls took a web process to 1 GB)."""
    calls = memory_budget.weight(session=session, reads="calls")
    assert calls == (session.api_calls_main + session.api_calls_side) * memory_budget.CALL_WEIGHT_BYTES > 0
    settings.ANALYSIS_MAX_SESSION_BYTES = calls - 1
    said = f"{session.api_calls_main + session.api_calls_side:,} API calls count as"
    page = client_in.get(reverse("sessions:timeline", args=[session.pk]))
    assert page.status_code == 413 and said in page.content.decode() and REFUSAL in page.content.decode()
    _refused_json(client_in, reverse("sessions:timeline_json", args=[session.pk]))
    assert said in client_in.get(reverse("sessions:timeline_json", args=[session.pk])).json()["error"]
    _refused_command("timeline", str(session.pk), "--json")
    settings.ANALYSIS_MAX_SESSION_BYTES = calls
    assert client_in.get(reverse("sessions:timeline_json", args=[session.pk])).json()["series"][MAIN]


def test_the_session_page_keeps_its_transcript_when_its_calls_are_over_the_budget(client_in, session, settings):
    """The first glance's sparkline and subagent costs read every call: over the budget they say why, and the
    session page, its JSON twin and `session_stats` still answer (the transcript reads one page of records)."""
    settings.ANALYSIS_MAX_SESSION_BYTES = memory_budget.weight(session=session, reads="calls") - 1
    said = f"{session.api_calls_main + session.api_calls_side:,} API calls count as"
    page = client_in.get(reverse("sessions:detail", args=[session.pk]))
    assert page.status_code == 200 and said in page.content.decode()
    data = client_in.get(reverse("sessions:detail_json", args=[session.pk])).json()
    assert said in data["overview"]["sparkline"]["refused"] and said in data["subagents"]["refused"]
    assert data["messages"]
    out = StringIO()
    call_command("session_stats", str(session.pk), "--json", stdout=out)
    assert said in orjson.loads(out.getvalue())["subagents"]["refused"]
