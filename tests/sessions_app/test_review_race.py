"""Reviewers racing on one run (issue 34, item 4): verdicts are taken one after the other, so the run's current
verdict is always the last of its history and a reviewer never overwrites another's verdict unseen.

Threads each hold their own connection and start together at a barrier, so on PostgreSQL the transactions really
overlap (SQLite serialises writers, which must give the same answer).
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from sessions_app import models, run_services
from tests.helpers.claude_code_lines import cc_session
from tests.helpers.runs import finished_run, imported

pytestmark = pytest.mark.django_db(transaction=True)

REVIEWERS = 6


def test_concurrent_verdicts_leave_one_reviewer_and_a_history_that_agrees(tmp_path, offline, django_user_model):
    run = finished_run(imported(cc_session(tmp_path)))
    users = [django_user_model.objects.create_user(username=f"r{i}", password="pw-for-tests") for i in range(REVIEWERS)]
    barrier = threading.Barrier(REVIEWERS)
    outcomes: list[object] = [None] * REVIEWERS

    def review(index: int) -> None:
        try:
            mine = models.CompactionRun.objects.get(pk=run.pk)  # each reviewer read the run before the others wrote
            barrier.wait(timeout=30)
            decision = "accepted" if index % 2 else "rejected"
            outcomes[index] = run_services.review_run(run=mine, user=users[index], decision=decision, comment="why")
        except BaseException as exc:  # reported below, in the test's thread
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=review, args=(i,)) for i in range(REVIEWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    taken = [o for o in outcomes if isinstance(o, models.CompactionRun)]
    refused = [o for o in outcomes if isinstance(o, run_services.RunForbidden)]
    assert len(taken) == 1 and len(refused) == REVIEWERS - 1, outcomes
    history = list(models.ReviewVerdict.objects.filter(run=run).order_by("at", "id"))
    current = models.CompactionRun.objects.get(pk=run.pk)
    assert len(history) == 1
    assert (current.review, current.reviewed_by_id) == (history[-1].decision, history[-1].by_id)
