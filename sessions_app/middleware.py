"""Request handling shared by every view."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation, TooManyFilesSent
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, QueryDict
from django.utils.cache import patch_cache_control, patch_vary_headers


def wants_json(request: HttpRequest) -> bool:
    """A JSON twin: ``?format=json`` on any page, or one of the ``.json`` URLs."""
    return request.GET.get("format") == "json" or request.path.endswith(".json")


def too_many_files(exception: Exception | None) -> str | None:
    """The sentence for an upload of more files than one request takes (its limit named), else None."""
    if not isinstance(exception, TooManyFilesSent):
        return None
    most = int(settings.DATA_UPLOAD_MAX_NUMBER_FILES)
    return (
        f"The upload holds more than {most:,} files, the most one upload takes (UPLOAD_MAX_SESSION_FILES). "
        "Upload the folders in parts, or as a zip."
    )


def json_error(message: str, *, status: int) -> JsonResponse:
    """The one shape of a JSON twin's error: what went wrong, in a sentence, and the HTTP status."""
    return JsonResponse({"error": message, "status": status}, status=status, json_dumps_params={"ensure_ascii": False})


class JsonErrorsMiddleware:
    """A JSON twin answers every error in JSON with its status, never with an HTML page.

    A view's ``Http404`` / ``PermissionDenied`` / ``BadRequest`` keeps its sentence; any other error
    response on a JSON request (an unknown ``.json`` address, a wrong method, a refused CSRF token, a
    server error) is rewritten with a sentence for its status, keeping headers such as ``Allow``.
    """

    MESSAGES = {
        400: "The request is malformed.",
        403: "You may not do this.",
        404: "Nothing at this address.",
        405: "This method is not allowed here.",
        500: "The server failed on this request; the error is logged.",
    }

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.status_code < 400 or not wants_json(request) or _is_json(response):
            return response
        status = response.status_code
        message = self.MESSAGES.get(status) or HTTPStatus(status).phrase
        if status == 405 and response.get("Allow"):
            message = f"{request.method} is not allowed here; use {response['Allow']}."
        answer = json_error(message, status=status)
        for header in ("Allow", "Retry-After", "WWW-Authenticate", "Vary"):
            if response.has_header(header):
                answer[header] = response[header]
        return answer

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not wants_json(request):
            return None
        refused = too_many_files(exception)
        if refused is not None:
            return json_error(refused, status=400)
        for kind, status in ((Http404, 404), (PermissionDenied, 403), (BadRequest, 400), (SuspiciousOperation, 400)):
            if isinstance(exception, kind):
                return json_error(str(exception) or self.MESSAGES[status], status=status)
        return None  # Django logs it and answers 500; __call__ turns that page into JSON


def _is_json(response: HttpResponseBase) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


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
        if wants_json(request):
            return json_error("Log in first: this endpoint needs an authenticated reviewer.", status=401)
        return super().handle_no_permission(request, view_func)


class PrivatePagesMiddleware:
    """What a logged-in reviewer is shown is theirs: no shared cache or browser history keeps it
    (``Cache-Control: private, no-store``). Static files are answered before this (WhiteNoise), with their own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            patch_cache_control(response, private=True, no_store=True)
        return response


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
        if wants_json(request):
            response: HttpResponse = json_error(message, status=503)
        else:
            response = HttpResponse(f"<!doctype html><title>Busy</title><p>{message}</p>", status=503)
        response["Retry-After"] = str(self.RETRY_AFTER_S)
        return response


class SessionTooLargeMiddleware:
    """A page that would read a whole session larger than the memory budget (``memory_budget.SessionTooLarge``)
    answers 413 with the sentence that says why and what to do, in JSON for a JSON twin; an htmx request gets the
    sentence as its fragment, answered 200, since htmx swaps no error answer into the page."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.shortcuts import render

        from sessions_app.memory_budget import SessionTooLarge

        if not isinstance(exception, SessionTooLarge):
            return None
        if wants_json(request):
            return json_error(exception.message, status=413)
        context = {"message": exception.message, "session_id": exception.session_id, "analysed": exception.analysed}
        if request.headers.get("HX-Request") == "true":
            return render(request, "sessions/too_large.html#refusal", context)
        return render(request, "sessions/too_large.html", context, status=413)
