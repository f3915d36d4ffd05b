"""Writes for the optional judge (issue 38): a judge run is created with its estimate (the page shows the cost before
it runs), executed by ``run_judge_task`` in the worker (or at once from the command line) through the same
Anthropic summarizer a compaction run uses, and recorded as a run is: model, tokens, cost, duration, status."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.tasks import task
from django.utils import timezone

from compaction.claims import Claim
from compaction.judge import read_verdicts
from compaction.summarize import MAX_ATTEMPTS, SummaryFailed
from sessions_app import models
from sessions_app.run_services import RunRefused, clean_model_override, make_summarizer, stale_after, user_or_none
from sessions_app.selectors import summary_checks as check_selectors

Judge = models.JudgeRun


def create_judge(
    *, run: models.CompactionRun, user: AbstractBaseUser | AnonymousUser | None, model: str | None = None
) -> Judge:
    """A queued judge of ``run``'s undecided claims, with its estimate (not yet enqueued: ``start_judge``)."""
    if not settings.ANTHROPIC_API_KEY:
        raise RunRefused("The judge asks a model: it needs ANTHROPIC_API_KEY.")
    if run.status != models.CompactionRun.Status.SUCCEEDED or not run.summary:
        raise RunRefused("Only a finished summary can be judged.")
    plan = check_selectors.judge_plan(run=run, model=clean_model_override(model))
    if plan is None:
        raise RunRefused("The offline check decided every claim: there is nothing for the judge.")
    cost = plan.estimate.cost_usd
    return Judge.objects.create(
        run=run,
        model=plan.request.model,
        model_note=plan.model_note,
        claims=[{"line": c.line, "text": c.text} for c in plan.claims],
        estimated_input_tokens=plan.estimate.input_tokens,
        estimated_output_tokens=plan.estimate.output_tokens,
        estimated_cost_usd=Decimal(str(round(cost, 6))) if cost is not None else None,
        started_by=user_or_none(user),
    )


def start_judge(
    *, run: models.CompactionRun, user: AbstractBaseUser | AnonymousUser | None, model: str | None = None
) -> Judge:
    with transaction.atomic():
        judge = create_judge(run=run, user=user, model=model)
        run_judge_task.enqueue(judge.pk)
    judge.refresh_from_db()
    return judge


def execute_judge(*, judge_id: int) -> Judge:
    """Ask the model, read its answer, record the run (a judge already claimed or finished is left alone)."""
    claimed = Judge.objects.filter(pk=judge_id, status=Judge.Status.QUEUED).update(
        status=Judge.Status.RUNNING, started_at=timezone.now()
    )
    judge = Judge.objects.select_related("run__session").get(pk=judge_id)
    if not claimed:
        return judge
    started = time.monotonic()
    claims = [Claim(line=c["line"], text=c["text"]) for c in judge.claims]
    try:
        plan = check_selectors.judge_plan(run=judge.run, claims=claims, model=judge.model)
        if plan is None:
            raise SummaryFailed("nothing to judge", reason="rejected", attempts=0)
        summarizer = make_summarizer(offline=False)
        try:
            result = summarizer.summarize(plan.request)
        finally:
            close = getattr(summarizer, "close", None)
            if close is not None:
                close()
    except SummaryFailed as exc:
        Judge.objects.filter(pk=judge.pk).update(
            status=Judge.Status.FAILED,
            error=str(exc),
            attempts=exc.attempts,
            duration_s=time.monotonic() - started,
            finished_at=timezone.now(),
        )
        judge.refresh_from_db()
        return judge
    answers = read_verdicts(result.text, count=len(claims))
    verdicts = [
        {
            "line": c.line,
            "text": c.text,
            "status": answers.get(n, ("unread", ""))[0],
            "reason": answers.get(n, ("", "the answer has no line for this claim"))[1],
        }
        for n, c in enumerate(claims, start=1)
    ]
    Judge.objects.filter(pk=judge.pk).update(
        status=Judge.Status.SUCCEEDED,
        model=result.model,
        answer=result.text,
        verdicts=verdicts,
        raw_response=result.raw,
        input_tokens=result.input_tokens,
        output_tokens=result.output_tokens,
        cost_usd=Decimal(str(round(result.cost_usd, 6))) if result.cost_usd is not None else None,
        attempts=result.attempts,
        duration_s=time.monotonic() - started,
        finished_at=timezone.now(),
    )
    judge.refresh_from_db()
    return judge


def sweep_stale_judges(*, now: datetime | None = None) -> int:
    """Mark failed the judges still running past the longest a judge can take (every attempt at its deadline, and
    the staleness margin): their worker died. Returns how many."""
    now = now or timezone.now()
    longest = timedelta(seconds=MAX_ATTEMPTS * float(settings.SUMMARY_ATTEMPT_TIMEOUT_S)) + stale_after()
    return Judge.objects.filter(status=Judge.Status.RUNNING, started_at__lt=now - longest).update(
        status=Judge.Status.FAILED,
        error="The worker asking the judge stopped; it was probably killed or restarted. Ask again.",
        finished_at=now,
    )


@task()
def run_judge_task(judge_id: int) -> str:
    """Judge one queued judge run (in ``manage.py db_worker``); returns its final status."""
    return str(execute_judge(judge_id=judge_id).status)
