"""What filled the context, over every shared sample: the parts add up at every call; page, JSON and CLI agree."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from compaction.composition import BASELINE_PART
from sessions_app import models
from sessions_app.selectors import composition as composition_selectors
from sessions_app.selectors import conversation as conversation_selectors
from tests.conftest import CLAUDE_SAMPLES, KHAELOR_SAMPLES
from tests.helpers.claude_code_lines import long_tool_session
from tests.helpers.htmx import HTMX
from tests.helpers.sample_sessions import SAMPLE_GROUPS, import_group

pytestmark = pytest.mark.django_db


def parts_total(detail: dict) -> int:
    return sum(part["tokens"] for part in detail["composition"])


@dataclass(frozen=True)
class ComposedSession:
    """What the two tests over every sample read of one imported session: its calls' recorded context, the calls
    that follow a context event, and every call's turn detail (the composition)."""

    name: str
    recorded: dict[tuple[str, int], int]
    first_after_event: set[tuple[str, int]]
    details: dict[tuple[str, int], dict]


def composed(session: models.Session) -> ComposedSession:
    recorded = {
        (agent, number): context
        for agent, number, context in models.ApiCall.objects.filter(session=session).values_list(
            "agent", "number", "context"
        )
    }
    # The call right after an event after call N is call N + 1.
    first_after_event = {
        (agent, after_call + 1)
        for agent, after_call in models.ContextEvent.objects.filter(
            session=session, kind__in=["compaction", "microcompact", "prune"]
        ).values_list("agent", "after_call")
    }
    details = {
        (agent, number): composition_selectors.turn_detail(session=session, agent=agent, call=number)
        for agent, number in sorted(recorded)
    }
    return ComposedSession(str(session), recorded, first_after_event, details)


@pytest.fixture(scope="module")
def composed_group() -> Callable[[list[Path]], list[ComposedSession]]:
    """One import and one turn detail per call for each sample group, shared by the tests of this module: the
    first test to ask imports the group (in its own test transaction) and keeps what it read; the next reuses it."""
    read: dict[tuple[Path, ...], list[ComposedSession]] = {}

    def of(paths: list[Path]) -> list[ComposedSession]:
        if tuple(paths) not in read:
            read[tuple(paths)] = [composed(session) for session in import_group(paths)]
        return read[tuple(paths)]

    return of


@pytest.mark.parametrize("paths", SAMPLE_GROUPS, ids=lambda paths: paths[0].name)
def test_the_composition_adds_up_to_the_recorded_context_at_every_call(paths, composed_group):
    checked_after_events = 0
    for session in composed_group(paths):
        recorded, first_after_event = session.recorded, session.first_after_event
        for agent, number in sorted(recorded):
            detail = session.details[(agent, number)]
            assert all(part["tokens"] > 0 and part["estimated"] for part in detail["composition"])
            if recorded[(agent, number)] == 0:
                # A call that recorded no usage: its context is the estimate, and says so.
                assert detail["estimated"] and parts_total(detail) == detail["context"]
                continue
            assert not detail["estimated"] and detail["context"] == recorded[(agent, number)]
            where = (session.name, agent, number)
            assert abs(parts_total(detail) - detail["context"]) <= detail["context"] / 100, where
            checked_after_events += (agent, number) in first_after_event
        # A log without usage (KHAELOR) counts its replies as calls but records none: nothing recorded to check.
        if any(agent == "main" for agent, _ in first_after_event) and any(agent == "main" for agent, _ in recorded):
            assert checked_after_events, "the calls right after a compaction or microcompact were checked"


@pytest.mark.parametrize("paths", SAMPLE_GROUPS, ids=lambda paths: paths[0].name)
def test_the_system_prompt_row_is_one_number_per_session(paths, composed_group):
    for session in composed_group(paths):
        for agent in {agent for agent, _ in session.recorded}:
            details = [
                session.details[(call_agent, number)]
                for (call_agent, number), context in session.recorded.items()
                if call_agent == agent and context > 0
            ]
            rows = {
                part["tokens"]
                for detail in details
                for part in detail["composition"]
                if part["part"] == BASELINE_PART and not detail["notes"]
            }
            assert len(rows) <= 1, (session.name, agent, rows)


def test_after_a_microcompact_and_a_compaction_nothing_gone_is_counted():
    # entirecli_7662d755ef9f-2 (SOURCES.md): a slice of a longer session; a microcompact clears 42 results
    # from before its first line (153,093 -> 129,080), then the session compacts.
    (session,) = import_group([CLAUDE_SAMPLES / "entirecli_7662d755ef9f-2_full.jsonl"])
    events = {e.kind: e for e in models.ContextEvent.objects.filter(session=session, agent="main")}
    before = composition_selectors.turn_detail(session=session, agent="main", call=events["microcompact"].after_call)
    after = composition_selectors.turn_detail(session=session, agent="main", call=events["microcompact"].after_call + 1)
    compacted = composition_selectors.turn_detail(
        session=session, agent="main", call=events["compaction"].after_call + 1
    )
    assert (before["context"], after["context"]) == (153_093, 129_080)
    for detail in (before, after, compacted):
        assert parts_total(detail) == detail["context"]
    baseline = [p["tokens"] for p in before["composition"] if p["part"] == BASELINE_PART]
    assert baseline and baseline == [p["tokens"] for p in after["composition"] if p["part"] == BASELINE_PART]
    assert after["cleared_not_in_log"] == 42 and after["unlogged"] < before["unlogged"]
    # After the compaction only the summary and what followed it remain; no earlier history is left over.
    assert compacted["compacted_records"] > 0 and compacted["unlogged"] < before["unlogged"] / 10
    assert any(p["part"] == "compaction summary" for p in compacted["composition"])


def test_cli_call_json_is_the_call_panel_json(client_in):
    (session,) = import_group([CLAUDE_SAMPLES / "entirecli_a6e4c2a0fbd1-0_full.jsonl"])
    compaction = models.ContextEvent.objects.get(session=session, kind="compaction")
    # The first call, the call before the compaction and the call after it.
    for call in (1, compaction.after_call, compaction.after_call + 1):
        out = io.StringIO()
        call_command("timeline", str(session.pk), "--call", str(call), "--json", stdout=out)
        cli = json.loads(out.getvalue())
        web = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"call": call, "format": "json"}).json()
        assert cli == web
        assert cli["call"] == call and cli["estimated"] is False and parts_total(cli) == cli["context"]
        assert set(cli["composition"][0]) == {"part", "kind", "tokens", "estimated"}
        html = client_in.get(f"/sessions/{session.pk}/timeline/turn/", {"call": call}, **HTMX).content.decode()
        for part in cli["composition"]:
            assert f'<td>{part["part"]}</td><td class="num">{part["tokens"]:,}</td>' in html


def test_cli_call_of_a_log_without_usage_is_an_estimate():
    (session,) = import_group([KHAELOR_SAMPLES])
    out = io.StringIO()
    call_command("timeline", str(session.pk), "--call", "6", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["call"] == 6 and data["estimated"] is True and data["context"] > 0
    assert parts_total(data) == data["context"]
    text = io.StringIO()
    call_command("timeline", str(session.pk), "--call", "6", stdout=text)
    assert f"context {data['context']:,} (estimated)" in text.getvalue()


def test_cli_unknown_call_is_a_clear_error():
    (session,) = import_group([CLAUDE_SAMPLES / "spotter_short.jsonl"])
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No call 99"):
        call_command("timeline", str(session.pk), "--call", "99", "--json", stdout=io.StringIO())


def test_call_panel_queries_do_not_grow_with_the_session(client_in, tmp_path):
    small = long_tool_session(tmp_path, n=3)
    (tmp_path / "big").mkdir()
    big = long_tool_session(tmp_path / "big", n=300)

    def queries(session_id: int) -> int:
        conversation_selectors._CONVERSATIONS.clear()  # both read cold
        with CaptureQueriesContext(connection) as captured:
            response = client_in.get(f"/sessions/{session_id}/timeline/turn/", {"call": 3, "format": "json"})
        assert response.status_code == 200 and parts_total(response.json()) == response.json()["context"]
        return len(captured)

    assert queries(big) == queries(small)
