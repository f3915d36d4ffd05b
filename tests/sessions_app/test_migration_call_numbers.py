"""Migration 0022: stored calls, runs' points and hand cuts move to the numbering from 1, on both databases."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("sessions_app", "0021_unchecked_record_keys")]
AFTER = [("sessions_app", "0022_calls_numbered_from_one")]


@pytest.mark.django_db(transaction=True)
def test_stored_calls_and_points_are_renumbered_from_one() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    session = old.get_model("sessions_app", "Session").objects.create(format="claude-code", peak_context=50)
    file = old.get_model("sessions_app", "SourceFile").objects.create(
        session=session, path="s.jsonl", size=0, sha256="0" * 64
    )
    api_call = old.get_model("sessions_app", "ApiCall")
    for index, context in enumerate([10, 50, 30, 50]):  # 0-based indexes; the first of the equal peaks is index 1
        api_call.objects.create(session=session, file=file, agent="main", index=index, key=f"k{index}", seq=index,
                                line=index + 1, context=context)  # fmt: skip
    api_call.objects.create(session=session, file=file, agent="sub", index=0, key="s0", seq=9, line=10, context=5)
    message = old.get_model("sessions_app", "Message")
    message.objects.create(session=session, file=file, seq=1, line=2, role="assistant", kind="assistant", call_index=1)
    message.objects.create(session=session, file=file, seq=2, line=3, role="user", kind="tool_result", call_index=None)
    run = old.get_model("sessions_app", "CompactionRun").objects.create(
        session=session,
        strategy="claude-code",
        at_call=2,
        cut_start_call=0,
        cut_end_call=None,
        cut_start=1,
        cut_end=3,
        first_kept=3,
        transcript_sha256="0" * 64,
        model="claude-haiku-4-5",
    )
    old.get_model("sessions_app", "SessionAnalysis").objects.create(
        session=session, message_count=2, composition={"calls": [0, 1, 2, 3]}, computed_at=timezone.now()
    )

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    calls = new.get_model("sessions_app", "ApiCall").objects.filter(session_id=session.pk)
    assert sorted(calls.filter(agent="main").values_list("number", "context")) == [(1, 10), (2, 50), (3, 30), (4, 50)]
    assert list(calls.filter(agent="sub").values_list("number", flat=True)) == [1]
    messages = new.get_model("sessions_app", "Message").objects.filter(session_id=session.pk).order_by("seq")
    assert list(messages.values_list("call_number", flat=True)) == [2, None]
    moved = new.get_model("sessions_app", "CompactionRun").objects.get(pk=run.pk)
    assert (moved.after_call, moved.cut_start_call, moved.cut_end_call) == (3, 1, None)
    # The headline peak's call: the first call with the largest context; the analysis is computed again.
    assert new.get_model("sessions_app", "Session").objects.get(pk=session.pk).peak_call == 2
    assert not new.get_model("sessions_app", "SessionAnalysis").objects.filter(session_id=session.pk).exists()

    # And back: the old numbers again.
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    back = executor.loader.project_state(BEFORE).apps
    assert sorted(
        back.get_model("sessions_app", "ApiCall").objects.filter(agent="main").values_list("index", flat=True)
    ) == [0, 1, 2, 3]
    assert back.get_model("sessions_app", "CompactionRun").objects.get(pk=run.pk).at_call == 2
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
