"""Writes for background uploads: the request stores the files and returns; the worker imports them.

``start_upload`` (in the request) streams the uploaded files into ``UPLOAD_DIR/<id>/`` and enqueues
``import_upload_task``; ``run_upload`` (in the worker) unpacks and imports them through
``services.import_staged``, writing progress to the ``UploadImport`` row the progress page polls, then
deletes the files. A worker killed meanwhile leaves the row running; the sweep queues it again
(``sweeps.sweep_stale_uploads``), and importing the same files twice changes nothing.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.tasks import task
from django.utils import timezone

from sessions_app import models, services

logger = logging.getLogger(__name__)

Upload = models.UploadImport
PROGRESS_SAVE_EVERY_S = 0.5  # progress is written at most this often (and once more at the end)


def folder_of(*, upload_id: int) -> Path:
    return Path(settings.UPLOAD_DIR) / str(upload_id)


def start_upload(*, files: Sequence[UploadedFile], user: AbstractBaseUser | AnonymousUser | None) -> Upload:
    """Store the uploaded files and queue their import; returns the row the progress page shows."""
    owner: Any = user if user is not None and user.is_authenticated else None
    upload = Upload.objects.create(created_by=owner, names=", ".join(f.name or "" for f in files)[:2000])
    folder = folder_of(upload_id=upload.pk)
    try:
        shutil.rmtree(folder, ignore_errors=True)  # a new row's folder can only be a leftover of a lost database
        folder.mkdir(parents=True, exist_ok=True)
        staged = services.stage_uploads(files=files, into=folder)
    except OSError as exc:
        discard_files(upload_id=upload.pk)
        Upload.objects.filter(pk=upload.pk).update(
            status=Upload.Status.FAILED, error=f"The upload could not be stored: {exc.strerror or exc}"
        )
        upload.refresh_from_db()
        return upload
    with transaction.atomic():
        Upload.objects.filter(pk=upload.pk).update(staged=staged)
        enqueue(upload_id=upload.pk)
    upload.refresh_from_db()  # an immediate backend has already imported it
    return upload


def enqueue(*, upload_id: int) -> None:
    import_upload_task.enqueue(upload_id)


def discard_files(*, upload_id: int) -> None:
    shutil.rmtree(folder_of(upload_id=upload_id), ignore_errors=True)


def _counts(report: services.ImportReport) -> dict[str, Any]:
    return {
        "sessions_found": len({item.session for item in report.imported if item.session is not None}),
        "errors_so_far": len(report.rejected) + sum(len(item.errors) for item in report.imported),
    }


def run_upload(*, upload_id: int) -> Upload:
    """Import a queued upload (in the worker). Every outcome ends in done or failed, and its files are deleted."""
    if not Upload.claim(upload_id):
        return Upload.objects.get(pk=upload_id)  # another worker has it, or it is finished
    upload = Upload.objects.get(pk=upload_id)
    last_save = 0.0

    def on_progress(report: services.ImportReport, done: int, total: int) -> None:
        nonlocal last_save
        now = time.monotonic()
        if done < total and now - last_save < PROGRESS_SAVE_EVERY_S:
            return
        last_save = now
        Upload.objects.filter(pk=upload_id, status=Upload.Status.RUNNING).update(
            files_done=done, files_total=total, heartbeat_at=timezone.now(), **_counts(report)
        )

    try:
        staged = [(str(path), str(label)) for path, label in upload.staged]
        report = services.import_staged(folder=folder_of(upload_id=upload_id), staged=staged, on_progress=on_progress)
    except Exception as exc:
        logger.exception("upload %s failed", upload_id)
        Upload.objects.filter(pk=upload_id).update(
            status=Upload.Status.FAILED,
            error=f"The import stopped on an internal error ({type(exc).__name__}); what was imported before it "
            "stays. The details are in the server log.",
            finished_at=timezone.now(),
        )
    else:
        Upload.objects.filter(pk=upload_id).update(
            status=Upload.Status.DONE, report=report.as_json(), finished_at=timezone.now(), **_counts(report)
        )
    discard_files(upload_id=upload_id)
    return Upload.objects.get(pk=upload_id)


@task()
def import_upload_task(upload_id: int) -> str:
    """Import the files of one browser upload (in ``manage.py db_worker``); returns its final status."""
    return str(run_upload(upload_id=upload_id).status)
