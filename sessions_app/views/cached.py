"""JSON twins of analyses, kept per server process until their session changes.

A timeline or a diagnosis of a session is a pure function of the session's stored rows (and the URL's
parameters), and every write to those rows saves the session, which moves ``Session.updated_at``. So the
bytes of an answer can be served again, unchanged, as long as ``updated_at`` is the same: under load the
big session's timeline (about 100 ms) and diagnosis (about 140 ms) are computed once per process and version
instead of once per request (docs/performance.md). A live session changes ``updated_at`` with every import, so
its answers are always fresh. ``ANALYSIS_CACHE_SECONDS`` bounds how long an entry may live at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from sessions_app import models
from sessions_app.process_cache import ProcessCache
from sessions_app.views.sessions import wants_json

View = Callable[..., HttpResponse]

# (content type, body) of answers, or the response itself while it is not one to keep (not 200, or streamed).
# 64 answers, and 64 MiB of them: the 53 MB session's timeline is about 2 MB, a 300 MB session's 10-13 MB (one per
# what-if replay asked for), so a process holds at most 64 MiB of them whatever the sessions (bench/memory_bench.py).
JSON_ANSWERS: ProcessCache[str, tuple[str, bytes] | HttpResponse] = ProcessCache(
    max_entries=64, max_weight=64 * 1024 * 1024, weigh=lambda answer: len(answer[1]) if isinstance(answer, tuple) else 0
)


def _version(session_id: int) -> str | None:
    stamp = models.Session.objects.filter(pk=session_id).values_list("updated_at", flat=True).first()
    return stamp.isoformat() if stamp is not None else None


def _kept(answer: tuple[str, bytes] | HttpResponse) -> bool:
    return not isinstance(answer, HttpResponse)


def json_cached_until_session_changes(view: View) -> View:
    """Serve a view's JSON answer from the process cache while its session's ``updated_at`` is unchanged."""

    @wraps(view)
    def wrapper(request: HttpRequest, session_id: int, *args: Any, **kwargs: Any) -> HttpResponse:
        if not wants_json(request) or settings.ANALYSIS_CACHE_SECONDS == 0:
            return view(request, session_id, *args, **kwargs)
        version = _version(session_id)
        if version is None:
            return view(request, session_id, *args, **kwargs)  # the view answers 404
        query = "&".join(sorted(request.GET.urlencode().split("&")))
        # Hashed: a URL's query has no bound, and the key should not grow with it.
        key = f"json:{hashlib.sha256(f'{request.path}?{query}'.encode()).hexdigest()}@{version}"

        def answer() -> tuple[str, bytes] | HttpResponse:
            response = view(request, session_id, *args, **kwargs)
            if response.status_code != 200 or response.streaming:
                return response
            return (response["Content-Type"], response.content)

        found = JSON_ANSWERS.get_or_compute(key, answer, keep=_kept, max_age_s=settings.ANALYSIS_CACHE_SECONDS)
        if isinstance(found, HttpResponse):
            return found
        content_type, body = found
        return HttpResponse(body, content_type=content_type)

    return wrapper
