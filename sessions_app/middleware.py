"""Request handling shared by every view."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, QueryDict
from django.utils.cache import patch_vary_headers


class StripNulMiddleware:
    """Drop NUL characters from query and form values: PostgreSQL refuses them in any text parameter."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "%00" in request.META.get("QUERY_STRING", ""):
            request.GET = _without_nul(request.GET)  # type: ignore[assignment]  # immutable, like Django's
        if request.method == "POST" and request.content_type != "multipart/form-data":
            request.POST = _without_nul(request.POST)  # type: ignore[assignment]
        return self.get_response(request)


def _without_nul(values: QueryDict) -> QueryDict:
    clean = QueryDict(mutable=True)
    for key, items in values.lists():
        clean.setlist(key.replace("\x00", ""), [v.replace("\x00", "") for v in items])
    clean._mutable = False
    return clean


class LoginRequiredJsonMiddleware(LoginRequiredMiddleware):
    """Login everywhere; a JSON twin answers 401 in JSON instead of redirecting to the HTML login page."""

    def handle_no_permission(  # type: ignore[override]  # a JSON 401 is not a redirect
        self, request: HttpRequest, view_func: Callable[..., HttpResponseBase]
    ) -> HttpResponseBase:
        if request.GET.get("format") == "json" or request.path.endswith(".json"):
            return JsonResponse({"error": "Log in first: this endpoint needs an authenticated reviewer."}, status=401)
        return super().handle_no_permission(request, view_func)


class VaryOnHtmxMiddleware:
    """Pages answer htmx with a fragment and browsers with the whole page: caches must tell them apart."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        patch_vary_headers(response, ("HX-Request",))
        return response


class DatabaseBusyMiddleware:
    """A write that waited out SQLite's busy timeout (a long import holds the lock) answers 503 with Retry-After
    and a sentence, not a 500 with the database's own words; the request can simply be sent again."""

    RETRY_AFTER_S = 10

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.db import OperationalError
        from django_tasks_db.utils import is_locked_database_exception

        if not (isinstance(exception, OperationalError) and is_locked_database_exception(exception)):
            return None
        message = "The database is busy with a long write (an import?); nothing was changed. Try again in a moment."
        if request.GET.get("format") == "json" or request.path.endswith(".json"):
            response: HttpResponse = JsonResponse({"error": message}, status=503)
        else:
            response = HttpResponse(f"<!doctype html><title>Busy</title><p>{message}</p>", status=503)
        response["Retry-After"] = str(self.RETRY_AFTER_S)
        return response
