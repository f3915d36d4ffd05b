"""Reads of compaction runs: one run, the runs of a session, the count waiting for review, a run as JSON."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.urls import reverse

from sessions_app import models


class RunNotFound(LookupError):
    pass


def get_run(*, run_id: int) -> models.CompactionRun:
    try:
        return (
            models.CompactionRun.objects.select_related("session", "started_by", "reviewed_by")
            .prefetch_related("verdicts__by")
            .get(pk=run_id)
        )
    except models.CompactionRun.DoesNotExist:
        raise RunNotFound(f"No compaction run with id {run_id}.") from None


def reviewable() -> QuerySet[models.CompactionRun]:
    """Runs with a summary to review (a failed run has none)."""
    return models.CompactionRun.objects.filter(status=models.CompactionRun.Status.SUCCEEDED)


def pending_review_count() -> int:
    return reviewable().filter(review=models.CompactionRun.Review.PENDING).count()


def session_runs(*, session: models.Session, limit: int = 50) -> list[models.CompactionRun]:
    runs = models.CompactionRun.objects.filter(session=session).select_related("session", "started_by", "reviewed_by")
    return list(runs[:limit])


def preview_url(run: models.CompactionRun) -> str:
    """The preview a run was made from: its strategy, parameters, point and hand cut, in the URL."""
    query = [("strategy", run.strategy)]
    for name, value in (("at", run.after_call), ("cut_start", run.cut_start_call), ("cut_end", run.cut_end_call)):
        if value is not None:
            query.append((name, str(value)))
    query += [(k, "" if v is None else str(v)) for k, v in dict(run.parameters).items()]
    return reverse("sessions:preview", args=[run.session_id]) + "?" + urlencode(query)


def record_json(record: models.ModelCallRecord) -> dict[str, Any]:
    """What a compaction run and a judge run both record, as their JSON twins give it."""
    return {
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cost_usd": float(record.cost_usd) if record.cost_usd is not None else None,
        "duration_s": record.duration_s,
        "attempts": record.attempts,
        "error": record.error or None,
        "started_by": record.started_by.get_username() if record.started_by else None,
        "created_at": record.created_at.isoformat() if record.created_at else None,
        "started_at": record.started_at.isoformat() if record.started_at else None,
        "finished_at": record.finished_at.isoformat() if record.finished_at else None,
    }


def run_json(run: models.CompactionRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": reverse("sessions:run", args=[run.pk]),
        "preview_url": preview_url(run),
        "session": run.session_id,
        "strategy": run.strategy,
        "parameters": run.parameters,
        "after_call": run.after_call,
        "at": run.at,
        "cut": {
            "from": run.cut_start,
            "to": run.cut_end,
            "first_kept": run.first_kept,
            "cut_start_call": run.cut_start_call,
            "cut_end_call": run.cut_end_call,
        },
        "transcript_sha256": run.transcript_sha256,
        "transcript_chars": run.transcript_chars,
        "model": run.model,
        "model_source": run.model_source or None,
        "model_note": run.model_note or None,
        "offline": run.offline,
        "status": run.status,
        "finished": run.finished,
        "progress_text": run.progress_text if not run.finished else None,
        "summary": run.summary or None,
        "summary_tokens": run.summary_tokens,
        **record_json(run),
        "heartbeat_at": run.heartbeat_at.isoformat() if run.heartbeat_at else None,
        "review": {
            "status": run.review,
            "comment": run.review_comment,
            "by": run.reviewed_by.get_username() if run.reviewed_by else None,
            "at": run.reviewed_at.isoformat() if run.reviewed_at else None,
            "history": [
                {
                    "decision": v.decision,
                    "comment": v.comment,
                    "by": v.by.get_username() if v.by else None,
                    "at": v.at.isoformat(),
                }
                for v in run.verdicts.all()
            ],
        },
    }
