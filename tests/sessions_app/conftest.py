"""Fixtures of the Django tests that need a session imported from the shared samples."""

from __future__ import annotations

import pytest

from sessions_app import models, services
from sessions_app.selectors import agents as agent_selectors
from tests.helpers.sample_sessions import SPOTTER, SUBAGENT


@pytest.fixture
def spotter() -> models.Session:
    services.import_paths(paths=[SPOTTER, SPOTTER.with_suffix("") / "subagents" / f"agent-{SUBAGENT}.jsonl"])
    session = models.Session.objects.get(files__path=str(SPOTTER.resolve()))
    assert SUBAGENT in {a.agent for a in agent_selectors.agents(session=session)}
    return session
