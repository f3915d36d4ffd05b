"""Compaction runs in tests: a file imported, a run queued from a preview, a run executed to success."""

from __future__ import annotations

from pathlib import Path

from sessions_app import models, run_services, services
from sessions_app.selectors import previews as preview_selectors

Run = models.CompactionRun


def imported(path: Path) -> models.Session:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None, outcome
    return models.Session.objects.get(pk=outcome.session)


def queued_run(session: models.Session, **kwargs) -> Run:
    preview = preview_selectors.build_preview(
        session=session, strategy=kwargs.pop("strategy", "claude-code"), overrides={}, **kwargs
    )
    assert preview.runnable, preview.error or preview.refused
    return run_services.create_run(preview=preview, user=None)


def finished_run(session: models.Session, **kwargs) -> Run:
    run = run_services.execute_run(run_id=queued_run(session, **kwargs).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run
