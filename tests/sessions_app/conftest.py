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


@pytest.fixture
def migrate_to():
    """Move the test database's schema to a migration (``migrate_to("0024_...")`` returns that state's apps); the
    schema is moved back to the latest migrations afterwards, whatever the test did, so later tests see today's
    tables."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    def migrate(name: str):
        target = [("sessions_app", name)]
        executor = MigrationExecutor(connection)
        executor.migrate(target)
        return executor.loader.project_state(target).apps

    yield migrate
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
