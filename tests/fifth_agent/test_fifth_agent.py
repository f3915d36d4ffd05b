"""A fifth agent from its two modules and one registry line: every page, command and refusal asks the registries.

The agent (``format.py``, ``strategy.py``) exists only here; ``register_agent`` adds it for a test and takes it out
after. Its name, colour and tool roles must show wherever the profile is read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from compaction.coverage import checklist
from compaction.formats.registry import agent_profile, make_parser
from compaction.strategies.registry import register_agent, unregister_agent
from compaction.summary_diff import sections
from compaction.transcript import Message
from sessions_app import models
from sessions_app.management.commands.import_sessions import Command as ImportSessions
from sessions_app.management.commands.watch_sessions import Command as WatchSessions
from sessions_app.selectors import exports as export_selectors
from tests.fifth_agent import format as fifth_format
from tests.fifth_agent.strategy import FifthStrategy

SESSION = Path(__file__).with_name("session.fifth.jsonl")


@pytest.fixture
def fifth_agent() -> Iterator[None]:
    register_agent(fifth_format, FifthStrategy)  # the one registry line
    yield
    unregister_agent(fifth_format.FORMAT)


@pytest.fixture
def imported(fifth_agent: None, db: None) -> models.Session:
    out = io.StringIO()
    call_command("import_sessions", str(SESSION), stdout=out)
    assert out.getvalue().startswith("new") and "fifth-agent     15 lines" in out.getvalue(), out.getvalue()
    return models.Session.objects.get(format="fifth-agent")


def test_the_profile_reaches_coverage_and_the_summary_diff(fifth_agent: None) -> None:
    parser = make_parser("fifth-agent", agent="main", path=SESSION)
    messages = [r for r in parser.parse(SESSION.open("rb")) if isinstance(r, Message)]
    items = checklist(messages, 0, len(messages), tools=agent_profile("fifth-agent").tools)
    kinds = {(i.kind, i.key or i.text) for i in items}
    assert ("file_read", "src/app.py") in kinds  # peek reads
    assert ("file_written", "src/app.py") in kinds  # scribble edits
    assert ("command", "pytest -q tests/test_app.py") in kinds  # hum runs its tune
    found = {s.name: s.state for s in sections("## Where we are\nfixed\n## What is next\n", strategy="fifth-agent")}
    assert found == {"Where we are": "ok", "What is next": "empty"}


def test_import_command_and_session_list(imported: models.Session, client_in) -> None:  # type: ignore[no-untyped-def]
    assert imported.get_format_display() == "Fifth Agent" and imported.api_calls_main == 6
    page = client_in.get("/").content.decode()
    assert '<span class="agent agent-fifth-agent">Fifth Agent</span>' in page
    listed = client_in.get("/sessions.json").json()
    assert any("Fifth Agent" in str(row) for row in listed["sessions"]), listed
    for command, name in ((WatchSessions(), "watch_sessions"), (ImportSessions(), "import_sessions")):
        assert "~/.fifth/sessions" in command.create_parser("manage.py", name).format_help().replace("\n", " ")


def test_its_colours_are_in_the_served_stylesheet(fifth_agent: None, client_in) -> None:  # type: ignore[no-untyped-def]
    css = client_in.get("/agents.css").content.decode()
    assert "--agent-fifth-agent:#123456" in css and "--replay-fifth-agent:#654321" in css
    assert "--agent-fifth-agent:#abcdef" in css  # the dark page's
    assert ".agent-fifth-agent { --c:var(--agent-fifth-agent);" in css
    assert "agents.css?v=" in client_in.get("/import/").content.decode()


def test_upload_page_names_it_and_its_folder(fifth_agent: None, client_in) -> None:  # type: ignore[no-untyped-def]
    page = client_in.get("/import/").content.decode()
    assert "<strong>Fifth Agent</strong>: logs (*.fifth.jsonl)" in page and "<code>~/.fifth/sessions</code>" in page
    assert "<code>~/.codex/sessions</code>" in page


def test_session_page_draws_its_tools_by_role(imported: models.Session, client_in) -> None:  # type: ignore[no-untyped-def]
    page = client_in.get(f"/sessions/{imported.pk}/").content.decode()
    assert 'class="agent agent-fifth-agent">Fifth Agent' in page
    assert '<span class="del">-return respond(request, 7)</span>' in page  # scribble is an edit: a diff
    assert '<p class="description"><strong>Check fixtures</strong></p>' in page  # summon spawns a subagent


def test_timeline_json(imported: models.Session, client_in) -> None:  # type: ignore[no-untyped-def]
    data = client_in.get(f"/sessions/{imported.pk}/timeline.json").json()
    assert data["format"] == "fifth-agent"
    assert [c["context"] for c in data["series"]["main"]] == [1200, 12000, 23000, 23200, 23400, 900]
    assert [e["kind"] for e in data["events"] if e["kind"] == "compaction"] == ["compaction"]


def test_diagnosis_page_and_json(imported: models.Session, client_in) -> None:  # type: ignore[no-untyped-def]
    data = client_in.get(f"/sessions/{imported.pk}/diagnosis.json").json()
    assert data["agent"] == "Fifth Agent"
    repeated = next(r for r in data["recommendations"] if r["kind"] == "repeated_reads")
    assert "src/app.py" in str(repeated)  # peek is its read tool
    assert data["contributors_by_tool"][0]["tool"] == "peek"
    assert client_in.get(f"/sessions/{imported.pk}/diagnosis/").status_code == 200


def test_export_refuses_it(imported: models.Session, client_in) -> None:  # type: ignore[no-untyped-def]
    run = models.CompactionRun.objects.create(
        session=imported,
        strategy="fifth-agent",
        cut_start=0,
        cut_end=4,
        first_kept=4,
        transcript_sha256="0" * 64,
        model="offline",
        status=models.CompactionRun.Status.SUCCEEDED,
        summary="## Where we are\nfixed\n## What is next\ntests",
        review=models.CompactionRun.Review.ACCEPTED,
    )
    assert not export_selectors.can_export(run)
    answer = client_in.get(f"/runs/{run.pk}/export/?format=json")
    assert answer.status_code == 409 and "agent's own format" in answer.json()["error"]
