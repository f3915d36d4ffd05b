"""One answer per question: ``manage.py preview --json`` and the page's JSON twin are the same object.

Over every shared sample of every agent, at every 10th main-chain call (and the end), for each strategy.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from compaction.replay import after_calls
from compaction.strategies.registry import STRATEGY_NAMES
from compaction.transcript import MAIN
from sessions_app import models, selectors
from tests.sessions_app.test_composition import SAMPLE_GROUPS, import_group

pytestmark = pytest.mark.django_db
EVERY = 10


def cli_preview(session: models.Session, strategy: str, at_call: int | None) -> dict:
    out = io.StringIO()
    args = [str(session.pk), "--strategy", strategy, "--json"]
    if at_call is not None:
        args += ["--at", str(at_call)]
    call_command("preview", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("paths", SAMPLE_GROUPS, ids=lambda paths: paths[0].name)
def test_cli_preview_json_equals_the_web_json_twin(client_in, paths):
    compared = 0
    for session in import_group(paths):
        messages = selectors.conversation(session=session, agent=MAIN)
        calls = [point.call for point in after_calls(messages)]
        points: list[int | None] = [*calls[::EVERY], None]
        for strategy in STRATEGY_NAMES:
            for at_call in points:
                query = {"strategy": strategy} | ({} if at_call is None else {"at": at_call})
                response = client_in.get(f"/sessions/{session.pk}/preview.json", query)
                assert response.status_code == 200, response.content[:500]
                web = response.json()
                cli = cli_preview(session, strategy, at_call)
                assert web.keys() == cli.keys()
                for key in web:
                    assert web[key] == cli[key], (session.external_id, strategy, at_call, key)
                expected_call = at_call if at_call is not None else (calls[-1] if calls else None)
                assert web["at_call"] == expected_call and web["error"] is None
                compared += 1
    assert compared >= len(STRATEGY_NAMES)
