"""Answers for requests that fail before a view runs, with what went wrong in a sentence (never a bare page)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from sessions_app.middleware import json_error, too_many_files, wants_json


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 400 handler: an upload of too many files names the limit; any other malformed request says so."""
    message = too_many_files(exception) or "The request is malformed."
    if wants_json(request):
        return json_error(message, status=400)
    return render(request, "400.html", {"message": message}, status=400)
