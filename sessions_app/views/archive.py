"""The archive on a session page: whether the session's file is gone (the agent's clean-up deleted it), and its
restore (a POST, CSRF-checked; ``.json`` for its twin)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from sessions_app import archive, models
from sessions_app.middleware import wants_json
from sessions_app.selectors import sessions as session_selectors


def archive_json(session: models.Session) -> dict[str, Any]:
    """The session's place in the archive, as its page shows it (after ``archive.check_sources``)."""
    source = archive.main_file(session)
    return {
        "archived": session.archived_at is not None,
        "archived_at": session.archived_at.isoformat() if session.archived_at else None,
        "source": source.path if source is not None else None,
        "resume_command": archive.resume_command(session),
        "restore_url": reverse("sessions:restore", args=[session.pk]) if source is not None else None,
    }


@require_POST
def restore(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        session = session_selectors.get_session(session_id=session_id)
    except session_selectors.SessionNotFound as exc:
        raise Http404(str(exc)) from None
    try:
        restored = archive.restore_session(session=session)
    except archive.RestoreRefused as exc:
        return _refused(request, session, str(exc))
    except OSError as exc:
        return _refused(request, session, f"Cannot write the file: {exc.strerror or exc} ({exc.filename or ''}).")
    if wants_json(request):
        return JsonResponse(restored.as_json())
    where = ", ".join(f.path for f in restored.files)
    resume = f" Resume it with: {restored.resume_command}" if restored.resume_command else ""
    messages.success(request, f"Restored to {where}.{resume}")
    return redirect("sessions:detail", session_id=session.pk)


def _refused(request: HttpRequest, session: models.Session, why: str) -> HttpResponse:
    if wants_json(request):
        return JsonResponse({"error": why, "status": 409}, status=409)
    messages.error(request, why)
    return redirect("sessions:detail", session_id=session.pk)
