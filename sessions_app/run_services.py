"""Writes for compaction runs: create, execute (in the worker), sweep dead runs, retry, review.

A run is created from a preview and executed by ``run_compaction_task`` (which takes only
the run id). The worker rebuilds the preview from what the run stored, checks it is the transcript the
reviewer saw, calls the summarizer, and writes progress and the result to the run row.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection, transaction
from django.db.models import F, Q
from django.tasks import task
from django.utils import timezone

from compaction.strategies.base import ModelChoice
from compaction.summarize import (
    BACKOFF_BASE_S,
    OFFLINE_MODEL,
    AnthropicSummarizer,
    OfflineSummarizer,
    Summarizer,
    SummaryFailed,
    SummaryResult,
)
from compaction.tokens import tiktoken_counts
from sessions_app import memory_budget, models
from sessions_app.selectors import previews as preview_selectors

logger = logging.getLogger(__name__)

Run = models.CompactionRun
# A running run whose heartbeat is older than settings.STALE_AFTER_S is taken for dead (its worker was killed);
# the worker beats every settings.WORKER_HEARTBEAT_S while the summarizer is busy, well inside it.
# Progress text is written at most this often (each write is one UPDATE).
PROGRESS_SAVE_EVERY_S = 0.5


class RunRefused(ValueError):
    """The preview cannot be run; the message says why."""


class RunCancelled(Exception):
    """Someone cancelled the run while the worker was summarising it."""


def stale_after() -> timedelta:
    """How long a worker may go without a beat, or a task without progress, before the sweeps call it dead."""
    return timedelta(seconds=float(settings.STALE_AFTER_S))


def user_or_none(user: AbstractBaseUser | AnonymousUser | None) -> Any:
    return user if user is not None and user.is_authenticated else None


# A model name as the Messages API takes it ("claude-opus-4-5-20251101", "claude-haiku-4-5[1m]", a proxy's
# "anthropic/claude-sonnet-4-5"): what a reviewer may type as an override.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]{0,199}$")


def clean_model_override(value: str | None) -> str | None:
    """A reviewer's model override, stripped; None when empty. ``RunRefused`` for what no API names a model."""
    text = (value or "").strip()
    if not text:
        return None
    if not _MODEL_NAME.match(text):
        raise RunRefused(
            f"{text[:60]!r} is not a model name: letters, digits and . _ - : / @ [ ] only, at most 200 characters."
        )
    return text


def offline_note(choice: ModelChoice) -> str:
    return (
        f"offline extractive summary, no model called; with an API key this run would send {choice.model} "
        f"({choice.note})"
    )


def create_run(
    *, preview: preview_selectors.Preview, user: AbstractBaseUser | AnonymousUser | None, model: str | None = None
) -> Run:
    """A queued run of a runnable preview (not yet enqueued: see ``start_run``); ``model`` overrides the agent's."""
    if preview.error or preview.refused:
        raise RunRefused(preview.error or f"the cut is refused: {preview.refused}")
    cut = preview.applied_cut
    if preview.plan is None or cut is None or not preview.requests:
        raise RunRefused("There is nothing to summarise at this point with this strategy.")
    offline = not settings.ANTHROPIC_API_KEY
    choice = preview_selectors.summary_model_for(preview=preview, override=clean_model_override(model))
    return Run.objects.create(
        session=preview.session,
        strategy=preview.strategy_name,
        parameters=preview.parameters,
        after_call=preview.after_call,
        cut_start_call=preview.cut_start,
        cut_end_call=preview.cut_end,
        at=preview.plan.at,
        cut_start=cut.start,
        cut_end=cut.end,
        first_kept=cut.first_kept,
        transcript_sha256=preview.transcript_sha256,
        transcript_chars=len(preview.transcript),
        model=OFFLINE_MODEL if offline else choice.model,
        model_source=Run.ModelSource.OFFLINE if offline else choice.source,
        model_note=offline_note(choice) if offline else choice.note,
        offline=offline,
        started_by=user_or_none(user),
    )


def enqueue_run(*, run: Run) -> None:
    # The database backend stores the task in the same transaction as the run: both or neither.
    run_compaction_task.enqueue(run.pk)


def start_run(
    *, preview: preview_selectors.Preview, user: AbstractBaseUser | AnonymousUser | None, model: str | None = None
) -> Run:
    with transaction.atomic():
        run = create_run(preview=preview, user=user, model=model)
        enqueue_run(run=run)
    run.refresh_from_db()  # an immediate backend may already have finished it
    return run


def retry_run(*, run: Run, user: AbstractBaseUser | AnonymousUser | None) -> Run:
    """A new queued run with the same inputs as a failed one (the failed run stays, for the record)."""
    if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
        raise RunRefused("Only a failed or cancelled run can be retried.")
    _check_owner(run=run, user=user, action="retry")
    with transaction.atomic():
        again = Run.objects.create(
            session=run.session,
            strategy=run.strategy,
            parameters=run.parameters,
            after_call=run.after_call,
            cut_start_call=run.cut_start_call,
            cut_end_call=run.cut_end_call,
            at=run.at,
            cut_start=run.cut_start,
            cut_end=run.cut_end,
            first_kept=run.first_kept,
            transcript_sha256=run.transcript_sha256,
            transcript_chars=run.transcript_chars,
            # The same model, for the same reason, as the failed run, unless that one ran offline.
            **_retry_model(run),
            offline=not settings.ANTHROPIC_API_KEY,
            started_by=user_or_none(user),
        )
        enqueue_run(run=again)
    again.refresh_from_db()
    return again


def _retry_model(run: Run) -> dict[str, str]:
    """The model fields of a retry: the failed run's choice again, worked out afresh when that run was offline."""
    online = bool(settings.ANTHROPIC_API_KEY)
    if online and run.model != OFFLINE_MODEL:
        return {"model": run.model, "model_source": run.model_source, "model_note": run.model_note}
    choice = preview_selectors.summary_model_for(preview=preview_selectors.preview_for_run(run=run))
    if online:
        return {"model": choice.model, "model_source": choice.source, "model_note": choice.note}
    return {"model": OFFLINE_MODEL, "model_source": Run.ModelSource.OFFLINE, "model_note": offline_note(choice)}


class RunForbidden(RunRefused):
    """The user may not do this to someone else's run or verdict; the message says whose it is."""


def _is_staff(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(getattr(user, "is_staff", False))


def _check_owner(*, run: Run, user: AbstractBaseUser | AnonymousUser | None, action: str) -> None:
    """Only the person who started a run, or staff, may retry or cancel it (a run started from the CLI: anyone)."""
    owner = run.started_by_id
    if owner is None or _is_staff(user) or owner == getattr(user, "pk", None):
        return
    raise RunForbidden(f"Only the person who started this run, or staff, can {action} it.")


def review_run(*, run: Run, user: AbstractBaseUser | AnonymousUser | None, decision: str, comment: str) -> Run:
    """Record a verdict: who, when, why. A change of verdict adds to the run's history, never replaces it.

    A reject needs a reason: the next reviewer (or the next run) must know what was wrong with this summary.
    """
    if decision not in (Run.Review.ACCEPTED, Run.Review.REJECTED):
        raise RunRefused("Choose accept or reject.")
    reason = comment.strip()
    if decision == Run.Review.REJECTED and not reason:
        raise RunRefused("A reject needs a reason: say what the summary lost or got wrong.")
    reviewer = user_or_none(user)
    with transaction.atomic():
        # The checks read the run as it is now, locked until this verdict is written: two reviewers posting at
        # once are taken one after the other, so the second sees the first's verdict (PostgreSQL: the row lock;
        # SQLite: an IMMEDIATE transaction holds the write lock from its start, config/settings.py).
        locked = Run.objects.select_for_update().get(pk=run.pk)
        earlier = locked.reviewed_by_id
        if earlier is not None and earlier != getattr(user, "pk", None) and not _is_staff(user):
            name = locked.reviewed_by.get_username() if locked.reviewed_by else "another reviewer"
            raise RunForbidden(f"This verdict is {name}'s: only they, or staff, can change it.")
        if locked.status != Run.Status.SUCCEEDED:
            raise RunRefused("Only a finished summary can be reviewed.")
        now = timezone.now()
        models.ReviewVerdict.objects.create(run=locked, decision=decision, comment=reason, by=reviewer, at=now)
        run.review = decision
        run.review_comment = reason
        run.reviewed_by = reviewer
        run.reviewed_at = now
        run.save(update_fields=["review", "review_comment", "reviewed_by", "reviewed_at"])
    # A run read with its history prefetched would otherwise answer with the history before this verdict.
    getattr(run, "_prefetched_objects_cache", {}).pop("verdicts", None)
    return run


def comment_line(
    *, run: Run, user: AbstractBaseUser | AnonymousUser | None, line: int, text: str
) -> models.SummaryComment:
    """A comment on line ``line`` (1-based) of a run's summary."""
    if run.status != Run.Status.SUCCEEDED or not run.summary:
        raise RunRefused("Only a finished summary can be commented on.")
    lines = run.summary.count("\n") + 1
    if not 1 <= line <= lines:
        raise RunRefused(f"The summary has lines 1 to {lines}; there is no line {line}.")
    if not text.strip():
        raise RunRefused("A comment needs some text.")
    return models.SummaryComment.objects.create(run=run, line=line, text=text.strip(), by=user_or_none(user))


def cancel_run(*, run: Run, user: AbstractBaseUser | AnonymousUser | None) -> Run:
    """Stop a queued or running run. A running one stops at its next heartbeat or progress write."""
    _check_owner(run=run, user=user, action="cancel")
    if run.finished:
        raise RunRefused("This run has already finished.")
    who = getattr(user_or_none(user), "username", "") or "someone"
    Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
        status=Run.Status.CANCELLED, error=f"Cancelled by {who}.", finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def sweep_stale_runs(*, older_than: timedelta | None = None) -> int:
    """Mark running runs whose worker stopped beating as failed; returns how many."""
    now = timezone.now()
    limit = now - (older_than if older_than is not None else stale_after())
    stale = Run.objects.filter(status=Run.Status.RUNNING).filter(
        Q(heartbeat_at__lt=limit) | Q(heartbeat_at__isnull=True, started_at__lt=limit)
    )
    count = 0
    for run in stale.only("id", "heartbeat_at", "started_at"):
        last = run.heartbeat_at or run.started_at
        seen = last.strftime("%Y-%m-%d %H:%M:%S UTC") if last else "never"
        count += Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.FAILED,
            error=(
                f"The worker running this summary stopped (last heartbeat {seen}); it was probably killed "
                "or restarted. Retry the run."
            ),
            finished_at=now,
        )
    return count


def sweep_if_stale(*, run: Run, older_than: timedelta | None = None) -> Run:
    """Called by the run page while it polls: a dead worker's run turns failed instead of spinning forever
    (the workers sweep on a schedule too; this only makes the page say so at once)."""
    older_than = older_than if older_than is not None else stale_after()
    last = run.heartbeat_at or run.started_at
    if run.status == Run.Status.RUNNING and last is not None and timezone.now() - last > older_than:
        sweep_stale_runs(older_than=older_than)
        run.refresh_from_db()
    return run


# ---------------------------------------------------------------------------------------------
# Execution (in the worker)


class _Heartbeat:
    """Beats from a thread while the summarizer waits on the network (no progress to write meanwhile)."""

    def __init__(self, run_id: int, every: float) -> None:
        self.run_id = run_id
        self.every = every
        self.cancelled = threading.Event()  # set when a beat finds the run no longer running (cancelled)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"run-{run_id}-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.every):
                beating = Run.objects.filter(pk=self.run_id, status=Run.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
                if not beating:
                    self.cancelled.set()
        except Exception:  # a missed beat is not worth crashing the run for
            logger.exception("heartbeat of run %s failed", self.run_id)
        finally:
            connection.close()  # this thread's own connection


def make_summarizer(*, offline: bool, sleep: Callable[[float], None] = time.sleep) -> Summarizer:
    if offline:
        return OfflineSummarizer()
    if not settings.ANTHROPIC_API_KEY:
        raise SummaryFailed(
            "This run was queued for the Anthropic API but the worker has no ANTHROPIC_API_KEY.",
            reason="rejected",
            attempts=0,
        )
    return AnthropicSummarizer(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL or None,
        # Tests shorten the backoff; production keeps Claude Code's 500 ms base.
        backoff_base=float(getattr(settings, "SUMMARY_BACKOFF_BASE_S", BACKOFF_BASE_S)),
        attempt_deadline_s=float(settings.SUMMARY_ATTEMPT_TIMEOUT_S),
        sleep=sleep,
        prices=settings.MODEL_PRICES,
    )


def _claim(run_id: int) -> bool:
    now = timezone.now()
    return (
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.RUNNING, started_at=now, heartbeat_at=now, attempts=F("attempts") + 1
        )
        == 1
    )


def _fail(run_id: int, error: str, started: float, *, attempts: int | None = None) -> None:
    extra: dict[str, Any] = {"attempts": attempts} if attempts else {}
    # Only a run this worker still holds: one the sweep already declared dead keeps that verdict.
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(
        **extra,
        status=Run.Status.FAILED,
        error=error,
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
        duration_s=time.monotonic() - started,
    )


def execute_run(*, run_id: int, heartbeat_every: float | None = None) -> Run:
    """Summarise a queued run; every outcome ends in succeeded, failed or cancelled (never left running)."""
    sweep_stale_runs()
    if not _claim(run_id):
        return Run.objects.get(pk=run_id)  # already taken by another worker, finished, or cancelled
    started = time.monotonic()
    every = heartbeat_every if heartbeat_every is not None else float(settings.WORKER_HEARTBEAT_S)
    try:
        run = Run.objects.select_related("session").get(pk=run_id)
        with _Heartbeat(run_id, every) as heartbeat:
            _summarise(run, started, heartbeat.cancelled)
    except RunCancelled:
        pass  # the row already says cancelled, by whom
    except SummaryFailed as exc:
        _fail(run_id, str(exc), started, attempts=exc.attempts)
    except memory_budget.SessionTooLarge as exc:  # the budget was lowered since the run was started
        _fail(run_id, exc.message, started)
    except BaseException as exc:
        _fail(run_id, f"internal error: {type(exc).__name__}: {exc}", started)
        raise
    return Run.objects.get(pk=run_id)


def _summarise(run: Run, started: float, cancelled: threading.Event) -> None:
    preview = preview_selectors.preview_for_run(run=run)
    if preview.error or preview.refused or not preview.requests:
        raise SummaryFailed(
            f"The run's cut no longer applies: {preview.error or preview.refused or 'nothing to summarise'}",
            reason="rejected",
            attempts=0,
        )
    if preview.transcript_sha256 != run.transcript_sha256:
        raise SummaryFailed(
            "The session changed since the preview: the transcript differs from the one reviewed.",
            reason="rejected",
            attempts=0,
        )
    done: list[str] = []
    last_save = 0.0

    def beat() -> None:
        if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(heartbeat_at=timezone.now()):
            raise RunCancelled()

    def on_progress(text: str) -> None:
        # Raised from inside the stream, so a cancelled run stops reading the API's answer at once.
        nonlocal last_save
        if cancelled.is_set():
            raise RunCancelled()
        now = time.monotonic()
        if now - last_save < PROGRESS_SAVE_EVERY_S:
            return
        last_save = now
        saved = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            progress_text="\n\n".join([*done, text]), heartbeat_at=timezone.now()
        )
        if not saved:
            raise RunCancelled()

    def sleep(seconds: float) -> None:
        beat()  # a backoff is a sign of life, not of death
        time.sleep(seconds)

    summarizer = make_summarizer(offline=run.offline, sleep=sleep)
    results: list[tuple[str, SummaryResult]] = []
    try:
        for request in preview.requests:
            result = summarizer.summarize(request.summary_request(model=run.model), on_progress=on_progress)
            results.append((request.kind, result))
            done.append(result.text)
    finally:
        close = getattr(summarizer, "close", None)
        if close is not None:
            close()

    replies = {kind: result.text for kind, result in results}
    try:
        summary = preview.final_summary(replies)
    except ValueError as exc:  # e.g. klaude's "Summarizer returned empty output"
        raise SummaryFailed(f"the summary could not be parsed: {exc}", reason="rejected", attempts=0) from None
    if not summary.strip():
        raise SummaryFailed("the summarizer returned an empty summary", reason="rejected", attempts=0)
    costs = [r.cost_usd for _, r in results]
    (summary_tokens,) = tiktoken_counts([summary])
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.SUCCEEDED,
        summary=summary,
        progress_text="\n\n".join(done),
        raw_response={
            "requests": [
                {
                    "kind": kind,
                    "text": result.text,
                    "model": result.model,
                    "attempts": result.attempts,
                    "dropped_rounds": result.dropped_rounds,
                    "input_tokens": result.input_tokens,
                    "output_tokens": result.output_tokens,
                    "raw": result.raw,
                }
                for kind, result in results
            ],
        },
        model=results[-1][1].model if results else run.model,
        input_tokens=sum(r.input_tokens for _, r in results),
        output_tokens=sum(r.output_tokens for _, r in results),
        attempts=sum(r.attempts for _, r in results),
        summary_tokens=summary_tokens,
        cost_usd=None if any(c is None for c in costs) else Decimal(str(round(sum(c or 0 for c in costs), 6))),
        duration_s=time.monotonic() - started,
        error="",
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
    )


def run_now(
    *, preview: preview_selectors.Preview, user: AbstractBaseUser | AnonymousUser | None, model: str | None = None
) -> Run:
    """Create a run and execute it in this process (``manage.py compact`` without ``--dry-run``)."""
    run = create_run(preview=preview, user=user, model=model)
    return execute_run(run_id=run.pk)


@task()
def run_compaction_task(run_id: int) -> str:
    """Summarise one queued compaction run (in ``manage.py db_worker``); returns its final status."""
    return str(execute_run(run_id=run_id).status)
