"""Writes for the settings simulator: a request (or ``manage.py simulate``) creates a ``SimulationRun``; the worker
(``manage.py db_worker``, ``simulate_task``) replays every selected session with each setting tried, writing its
progress (sessions done of all) and each session's result (JSON) to the row the page polls.

Each session's result is ``selectors.simulations.replay_session`` (what ``manage.py replay`` prints) summed up by
``compaction.simulate.outcome``. A session larger than the memory budget in force (the worker's
``WORKER_ANALYSIS_MAX_SESSION_BYTES``; the command's ``ANALYSIS_MAX_SESSION_BYTES``) is listed as skipped with the
reason, as is one a setting cannot be built for. A worker killed meanwhile leaves the row running; the sweep queues
it again (``sweeps.sweep_stale_simulations``): replaying is idempotent, and the sessions already done are kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.tasks import task
from django.utils import timezone

from compaction.simulate import outcome
from sessions_app import memory_budget, models
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import simulations as selectors

logger = logging.getLogger(__name__)

Run = models.SimulationRun
PROGRESS_SAVE_EVERY_S = 0.5  # progress is written at most this often (and once more at the end)
RESULTS_SAVE_EVERY_S = 10.0  # the results so far (kept if the worker dies) are written at most this often
BEAT_EVERY_S = 5.0  # within a session's replays (many settings of a large one), the row's heartbeat at most this often


def create(
    *,
    plan: selectors.Plan,
    filters: Mapping[str, Any],
    user: AbstractBaseUser | AnonymousUser | None = None,
) -> Run:
    """A new simulation of ``plan`` over the sessions ``filters`` select, not started."""
    owner: Any = user if user is not None and user.is_authenticated else None
    clean = {key: str(filters.get(key) or "") for key in selectors.FILTER_NAMES if filters.get(key)}
    return Run.objects.create(created_by=owner, strategy=plan.strategy, parameters=plan.as_json(), filters=clean)


def start(*, plan: selectors.Plan, filters: Mapping[str, Any], user: AbstractBaseUser | AnonymousUser | None) -> Run:
    """Create a simulation and hand it to the worker; returns the row its progress page shows."""
    run = create(plan=plan, filters=filters, user=user)
    with transaction.atomic():
        enqueue(run_id=run.pk)
    run.refresh_from_db()  # an immediate backend has already run it
    return run


def enqueue(*, run_id: int) -> None:
    simulate_task.enqueue(run_id)


def session_row(
    *, session: models.Session, plan: selectors.Plan, replayed: Callable[[], None] | None = None
) -> dict[str, Any]:
    """One session's result: what it recorded, and each setting's replay (or why it was skipped); ``replayed`` is
    called after each replay (the worker's heartbeat: a large session replayed with many settings takes a while)."""
    row: dict[str, Any] = {
        "session": session.pk,
        "title": session.title or session.external_id or f"session {session.pk}",
        "project": session.project,
        "agent": session.format,
        "agent_label": session.get_format_display(),
        "size_bytes": session.size_bytes,
    }
    try:
        memory_budget.check(session=session)  # the budget in force: the worker's in its task, the command's inline
    except memory_budget.SessionTooLarge as exc:
        row["skipped"] = exc.message
        return row
    row["happened"] = selectors.happened(session=session)
    outcomes = []
    for overrides in plan.settings():
        try:
            result, messages = selectors.replay_session(session=session, strategy=plan.strategy, overrides=overrides)
        except memory_budget.SessionTooLarge as exc:
            row["skipped"] = exc.message
            return row
        except selectors.ReplayFailed as exc:
            row["skipped"] = str(exc)
            return row
        except (TypeError, ValueError) as exc:
            label = selectors.setting_label(strategy=plan.strategy, setting=overrides)
            row["skipped"] = f"The setting {label} does not apply to it: {exc}"
            return row
        summary = outcome(
            result, messages=messages, real_cost_usd=session.cost_usd, prices=settings.MODEL_PRICES or None
        )
        outcomes.append(summary.as_json())
        if replayed is not None:
            replayed()
    row["outcomes"] = outcomes
    return row


def simulate(*, run_id: int) -> Run:
    """Replay a queued (or swept) simulation here and now; every outcome ends in done or failed.

    Sessions already in ``results`` (a run a dead worker left) are kept, not replayed again."""
    if not Run.claim(run_id):
        return Run.objects.get(pk=run_id)  # another worker has it, or it is finished
    run = Run.objects.get(pk=run_id)
    plan = selectors.plan_of(run)
    sessions = selectors.selected_sessions(filters=run.filters)
    selected = {session.pk for session in sessions}
    results = [row for row in run.results if row["session"] in selected]
    done = {row["session"] for row in results}
    total = len(sessions)
    Run.objects.filter(pk=run_id).update(sessions_total=total, sessions_done=len(results))
    last_save, last_beat = 0.0, time.monotonic()
    last_results = last_beat

    def beat() -> None:
        nonlocal last_beat
        if time.monotonic() - last_beat >= BEAT_EVERY_S:
            last_beat = time.monotonic()
            Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(heartbeat_at=timezone.now())

    try:
        for session in sessions:
            if session.pk in done:
                continue
            try:
                results.append(session_row(session=session, plan=plan, replayed=beat))
            finally:
                conversation_selectors.forget_conversations()  # the records of one session at a time
            moment = time.monotonic()
            if moment - last_save < PROGRESS_SAVE_EVERY_S:
                continue
            last_save = last_beat = moment
            progress: dict[str, Any] = {"sessions_done": len(results), "heartbeat_at": timezone.now()}
            if moment - last_results >= RESULTS_SAVE_EVERY_S:
                # What a worker killed now leaves for the next to keep: written less often, it grows with the run.
                last_results = moment
                progress["results"] = results
            Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(**progress)
    except Exception as exc:
        logger.exception("simulation %s failed", run_id)
        Run.objects.filter(pk=run_id).update(
            status=Run.Status.FAILED,
            results=results,
            sessions_done=len(results),
            error=f"The simulation stopped on an internal error ({type(exc).__name__}); the sessions replayed "
            "before it are shown. The details are in the server log.",
            finished_at=timezone.now(),
        )
    else:
        Run.objects.filter(pk=run_id).update(
            status=Run.Status.DONE, results=results, sessions_done=len(results), finished_at=timezone.now()
        )
    return Run.objects.get(pk=run_id)


@task()
def simulate_task(run_id: int) -> str:
    """Replay one simulation (in ``manage.py db_worker``), within the worker's memory budget; its final status."""
    with memory_budget.worker_budget():
        return str(simulate(run_id=run_id).status)
