"""One answer per question: ``manage.py preview --json`` and the page's JSON twin are the same object.

Over every shared sample of every agent, at every 10th main-chain call (and the end), for each strategy.
"""

from __future__ import annotations

import gc
import io
import json

import pytest
from django.core.management import call_command

from compaction.replay import after_calls
from compaction.strategies.registry import STRATEGY_NAMES
from compaction.transcript import MAIN
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from tests.helpers.claude_code_lines import assistant, small_session, user
from tests.helpers.sample_sessions import SAMPLE_GROUPS, import_group

pytestmark = pytest.mark.django_db
EVERY = 10


def cli_preview(session: models.Session, strategy: str, after_call: int | None) -> dict:
    out = io.StringIO()
    args = [str(session.pk), "--strategy", strategy, "--json"]
    if after_call is not None:
        args += ["--at", str(after_call)]
    call_command("preview", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("paths", SAMPLE_GROUPS, ids=lambda paths: paths[0].name)
def test_cli_preview_json_equals_the_web_json_twin(client_in, paths):
    compared = 0
    for session in import_group(paths):
        messages = conversation_selectors.conversation(session=session, agent=MAIN)
        calls = [point.call for point in after_calls(messages)]
        points: list[int | None] = [*calls[::EVERY], None]
        for strategy in STRATEGY_NAMES:
            for after_call in points:
                query = {"strategy": strategy} | ({} if after_call is None else {"at": after_call})
                response = client_in.get(f"/sessions/{session.pk}/preview.json", query)
                assert response.status_code == 200, response.content[:500]
                web = response.json()
                cli = cli_preview(session, strategy, after_call)
                assert web.keys() == cli.keys()
                for key in web:
                    assert web[key] == cli[key], (session.external_id, strategy, after_call, key)
                expected_call = after_call if after_call is not None else (calls[-1] if calls else None)
                assert web["after_call"] == expected_call and web["error"] is None
                compared += 1
    assert compared >= len(STRATEGY_NAMES)


def test_a_cached_conversations_after_call_points_are_computed_once(tmp_path):
    session = models.Session.objects.get(pk=services.import_file(path=small_session(tmp_path)).session)
    messages = conversation_selectors.conversation(session=session, agent=MAIN)
    points = conversation_selectors.after_calls_of(messages)
    assert points == after_calls(messages) and len(points) == 2
    assert conversation_selectors.after_calls_of(messages) is points  # kept with the cached conversation
    copy = list(messages)  # a list the conversation cache does not hold: computed each time, never kept
    assert (
        conversation_selectors.after_calls_of(copy) == points
        and conversation_selectors.after_calls_of(copy) is not points
        and conversation_selectors.after_calls_of(copy) is not conversation_selectors.after_calls_of(copy)
    )


def test_the_points_of_a_conversation_no_longer_cached_are_dropped(tmp_path):
    session = models.Session.objects.get(pk=services.import_file(path=small_session(tmp_path)).session)
    old = conversation_selectors.conversation(session=session, agent=MAIN)
    old_points = conversation_selectors.after_calls_of(old)
    conversation_selectors._CONVERSATIONS.clear()
    new = conversation_selectors.conversation(session=session, agent=MAIN)
    assert new is not old
    assert conversation_selectors.after_calls_of(new) is not old_points
    assert len(gc.get_referrers(old_points)) == 1  # only the dropped conversation holds them: they go with it


def test_a_preview_after_an_import_adds_calls_shows_the_new_calls(client_in, tmp_path):
    path = small_session(tmp_path)
    session_id = services.import_file(path=path).session
    before = client_in.get(f"/sessions/{session_id}/preview.json").json()
    with path.open("a") as f:
        f.write(user("u3", "a2", "and more"))
        f.write(assistant("a3", "u3", "msg_3", "ok", ctx=2500))
    assert services.import_file(path=path).lines == 2
    after = client_in.get(f"/sessions/{session_id}/preview.json").json()
    assert (before["after_call"], after["after_call"]) == (2, 3)
    fresh = client_in.get(f"/sessions/{session_id}/preview.json", {"at": 3}).json()  # after the new third call
    assert fresh["error"] is None and fresh["after_call"] == 3
