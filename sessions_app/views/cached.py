"""JSON twins of analyses, kept per server process until their session changes.

A timeline or a diagnosis of a session is a pure function of the session's stored rows (and the URL's
parameters), and every write to those rows saves the session, which moves ``Session.updated_at``. So the
bytes of an answer can be served again, unchanged, as long as ``updated_at`` is the same: under load the
big session's timeline (about 100 ms) and diagnosis (about 140 ms) are computed once per process and version
instead of once per request (bench/README.md, load benchmark). A live session changes ``updated_at`` with every
import, so its answers are always fresh. ``ANALYSIS_CACHE_SECONDS`` bounds how long an entry may live at all.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse

from sessions_app import models
from sessions_app.views.sessions import wants_json

View = Callable[..., HttpResponse]

# One computation per key at a time in a process: requests arriving while the first computes wait for its answer
# instead of all computing it at once (at start-up, 50 clients asking for one diagnosis made 4 threads compute it).
_computing: dict[str, threading.Lock] = {}
_computing_guard = threading.Lock()


def _lock_for(key: str) -> threading.Lock:
    with _computing_guard:
        return _computing.setdefault(key, threading.Lock())


def _release(key: str) -> None:
    with _computing_guard:
        _computing.pop(key, None)


def _version(session_id: int) -> str | None:
    stamp = models.Session.objects.filter(pk=session_id).values_list("updated_at", flat=True).first()
    return stamp.isoformat() if stamp is not None else None


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
        # Hashed: a URL's query has no bound, a cache key does (250 characters, or memcached refuses it).
        key = f"json:{hashlib.sha256(f'{request.path}?{query}'.encode()).hexdigest()}@{version}"
        cache = caches["analysis"]
        hit = cache.get(key)
        if hit is None:
            with _lock_for(key):
                hit = cache.get(key)  # computed by the request this one waited for
                if hit is None:
                    response = view(request, session_id, *args, **kwargs)
                    if response.status_code != 200 or response.streaming:
                        return response
                    hit = (response["Content-Type"], response.content)
                    cache.set(key, hit, settings.ANALYSIS_CACHE_SECONDS)
            _release(key)
        content_type, body = hit
        return HttpResponse(body, content_type=content_type)

    return wrapper
