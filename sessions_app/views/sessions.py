"""Thin views: parse the request, call a selector or a service, render a page, a partial or JSON."""

from __future__ import annotations

import itertools
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from compaction.transcript import MAIN
from sessions_app import archive, models, services, sweeps, uploads
from sessions_app.middleware import wants_json
from sessions_app.selectors import agents as agent_selectors
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import overview as overview_selectors
from sessions_app.selectors import search as search_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import subagents as subagent_selectors
from sessions_app.selectors import thresholds as threshold_selectors
from sessions_app.selectors import transcript as transcript_selectors
from sessions_app.views import archive as archive_views


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (typing only)."""

    htmx: HtmxDetails


def _json(data: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, json_dumps_params={"ensure_ascii": False})


def _parse_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _session_or_404(session_id: int) -> models.Session:
    try:
        return session_selectors.get_session(session_id=session_id)
    except session_selectors.SessionNotFound as exc:
        raise Http404(str(exc)) from None


def session_json(session: models.Session) -> dict[str, Any]:
    return {
        "id": session.pk,
        "format": session.format,
        "agent_name": session.get_format_display(),  # the registry's display name (compaction.formats.registry)
        "external_id": session.external_id,
        "title": session.title,
        "project": session.project,
        "model": session.model,
        "agent_version": session.agent_version,
        "started_at": session.started_at.isoformat() if session.started_at else None,
        "ended_at": session.ended_at.isoformat() if session.ended_at else None,
        "messages": session.message_count,
        "api_calls": {"main": session.api_calls_main, "side": session.api_calls_side},
        "peak": call_selectors.session_peak(session=session).as_json(),
        "peak_context": session.peak_context,
        "peak_is_estimate": session.peak_is_estimate,
        # What the calls recorded, as ``manage.py session_stats`` reports it; an estimated peak is no record.
        "max_context": {
            "main": 0 if session.peak_is_estimate else session.peak_context,
            "side": session.peak_context_side,
        },
        "context_window": session.window,
        "size_bytes": session.size_bytes,
        "has_compaction": session.has_compaction,
        "overflowed": session.overflowed,
        "compaction_failed": session.compaction_failed,
        "cost_usd": session.cost_usd,
        "line_errors": session.line_errors,
        "unknown_records": session.unknown_records,
        "search_ready": session.search_ready,  # False: its records are still being indexed for search
        "archived": session.archived_at is not None,  # its file is gone from where it was imported from
        "url": reverse("sessions:detail", args=[session.pk]),
    }


def _pending_json(pending: list[models.Session]) -> list[dict[str, Any]]:
    return [{"session": s.pk, "title": s.title, "url": reverse("sessions:detail", args=[s.pk])} for s in pending]


def _index_workers(pending: list[models.Session]) -> int | None:
    """How many task workers are alive to index the pending sessions (None when nothing is pending): with none, the
    notice says how to start one rather than "in a moment" forever."""
    return len(sweeps.live_workers()) if pending else None


def _say_pending(request: HtmxHttpRequest, pending: list[models.Session]) -> None:
    """A session page read with a search says if the search cannot read it in full yet, in the words the list and
    the search page show in their results (``_search_pending.html``, fragments included), among the page's notices
    (an htmx swap would leave the notice for the next page)."""
    if not pending or request.htmx:
        return
    context = {"search_pending": pending, "search_workers": _index_workers(pending)}
    messages.info(request, render_to_string("sessions/_search_pending.html", context, request=request))


# ---------------------------------------------------------------------------------------------
# Session list


def _list_filters(g: QueryDict) -> session_selectors.SessionFilters:
    """The session list's filters from a query string (the list and the search page read the same names)."""
    return session_selectors.SessionFilters(
        q=g.get("q", "").strip(),
        format=g.get("agent", ""),
        project=g.get("project", ""),
        model=g.get("model", ""),
        since=_parse_date(g.get("since")),
        until=_parse_date(g.get("until")),
        has_compaction=g.get("has_compaction") == "1",
        overflowed=g.get("overflowed") == "1",
        compaction_failed=g.get("compaction_failed") == "1",
        archived=g.get("archived") == "1",
        sort=g.get("sort", "date"),
    )


def _scope_fields(filters: session_selectors.SessionFilters) -> list[tuple[str, str]]:
    """The list filters in force, as (query name, value): what a search from that list stays within."""
    fields = [("agent", filters.format), ("project", filters.project), ("model", filters.model)]
    fields += [("since", filters.since.isoformat() if filters.since else "")]
    fields += [("until", filters.until.isoformat() if filters.until else "")]
    for name in ("has_compaction", "overflowed", "compaction_failed", "archived"):
        fields.append((name, "1" if getattr(filters, name) else ""))
    return [(name, value) for name, value in fields if value]


@require_GET
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    g = request.GET
    filters = _list_filters(g)
    # The records matching the search, found once for both the list and the grouped hits.
    matching = search_selectors.matching_messages(q=filters.q) if filters.q else None
    page = session_selectors.session_page(filters=filters, page=g.get("page"), matching=matching)
    found = session_selectors.search_sessions(filters=filters, matching=matching)
    pending = session_selectors.search_pending(filters=filters) if filters.q else []
    if wants_json(request):
        return _json(
            {
                "count": page.paginator.count,
                "search_pending": _pending_json(pending),
                "search_workers": _index_workers(pending),
                "page": page.number,
                "pages": page.paginator.num_pages,
                "sessions": [session_json(s) for s in page.object_list],
                "matches": [
                    {
                        "session": found_in.session.pk,
                        "records": found_in.matches,
                        "hits": [_hit_json(h, q=filters.q) for h in found_in.hits],
                    }
                    for found_in in found
                ],
            }
        )
    bands = threshold_selectors.peak_bands(sessions=list(page.object_list))
    # The Cost header toggles its sort and keeps every filter (the first page of the new order).
    cost_sort = g.copy()
    cost_sort["sort"] = "-cost" if filters.sort == "cost" else "cost"
    cost_sort.pop("page", None)
    for listed in page.object_list:
        listed.bands = bands.get(listed.pk, {})
    context = {
        "page": page,
        "search_pending": pending,
        "search_workers": _index_workers(pending),
        "found": found,
        "filters": filters,
        "cost_sort_query": cost_sort.urlencode(),
        "search_scope": _scope_fields(filters),
        # The Usage page over the same sessions (its days and model are those of the calls: views/usage.py).
        "usage_query": urlencode(_scope_fields(filters) + ([("q", filters.q)] if filters.q else [])),
        "choices": session_selectors.filter_choices(),
        "formats": models.Session.FORMAT_CHOICES,
        "sorts": [
            ("date", "Newest"),
            ("-date", "Oldest"),
            ("size", "Largest"),
            ("peak", "Peak context"),
            ("cost", "Cost"),
        ],
    }
    template = "sessions/list.html#results" if request.htmx else "sessions/list.html"
    return render(request, template, context)


# ---------------------------------------------------------------------------------------------
# Search across every session (the page behind the header's search field and its Ctrl+K / Cmd+K panel)

SEARCH_SESSIONS = 50  # sessions listed, the most matching records first
SEARCH_HITS_PER_SESSION = 5


@require_GET
def search(request: HtmxHttpRequest) -> HttpResponse:
    """Every session's matching records, grouped by session with snippets, within the list's filters."""
    filters = _list_filters(request.GET)
    found = session_selectors.search_sessions(
        filters=filters, sessions=SEARCH_SESSIONS, hits_per_session=SEARCH_HITS_PER_SESSION
    )
    pending = session_selectors.search_pending(filters=filters) if filters.q else []
    if wants_json(request):
        return _json(
            {
                "q": filters.q,
                "search_pending": _pending_json(pending),
                "search_workers": _index_workers(pending),
                "filters": dict(_scope_fields(filters)),
                "records": sum(f.matches for f in found),
                "sessions": [
                    {
                        "session": session_json(f.session),
                        "records": f.matches,
                        "hits": [_hit_json(h, q=filters.q) for h in f.hits],
                    }
                    for f in found
                ],
            }
        )
    scope = _scope_fields(filters)
    context = {
        "q": filters.q,
        "search_pending": pending,
        "search_workers": _index_workers(pending),
        "filters": filters,
        "found": found,
        "records": sum(f.matches for f in found),
        "search_scope": scope,
        "scope_words": _scope_words(scope),
        "list_query": urlencode([("q", filters.q), *scope]),
        "choices": session_selectors.filter_choices(),
        "formats": models.Session.FORMAT_CHOICES,
    }
    template = "sessions/search.html#results" if request.htmx else "sessions/search.html"
    return render(request, template, context)


def _scope_words(scope: list[tuple[str, str]]) -> str:
    """The filters a search stays within, as the reader would say them ("" when none)."""
    flags = {
        "has_compaction": "has compaction",
        "overflowed": "overflowed",
        "compaction_failed": "compaction failed",
        "archived": "archived",
    }
    names = dict(models.Session.FORMAT_CHOICES)
    words = []
    for name, value in scope:
        if name == "agent":
            words.append(names.get(value, value))
        elif name in flags:
            words.append(flags[name])
        else:
            words.append(f"{name} {value}")
    return ", ".join(words)


# ---------------------------------------------------------------------------------------------
# Session page


@require_GET
def session_detail(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    if not request.htmx:
        archive.check_sources(sessions=[session])  # is its file still where it was imported from?
    agent = request.GET.get("agent", MAIN)
    q = request.GET.get("q", "").strip()
    show = transcript_selectors.parse_show(request.GET.get("show", ""))
    page = transcript_selectors.transcript_page(
        session=session, agent=agent, page=request.GET.get("page"), q=q, show=show
    )
    hits = search_selectors.search_session(session=session, q=q)
    # The overview heads the full page only: an htmx transcript swap does not need it.
    at_a_glance = overview_selectors.overview(session=session) if wants_json(request) or not request.htmx else None
    if wants_json(request):
        return _json(
            {
                "session": session_json(session),
                "archive": archive_views.archive_json(session),
                "overview": {
                    **(at_a_glance or {}),
                    "diagnosis_url": reverse("sessions:diagnosis", args=[session.pk]),
                },
                "agent": agent,
                "hits": [_hit_json(h, q=q) for h in hits],
                "agents": [_agent_json(a) for a in agent_selectors.agents(session=session)],
                "subagents": subagent_selectors.subagents(session=session).as_json(),
                # The lines the import could not read, by file and line, as the page lists them.
                "line_issues": transcript_selectors.line_issues(session=session).as_json(),
                "page": page.number,
                "pages": page.paginator.num_pages,
                "messages": [_message_json(m) for m in page.object_list],
            }
        )
    if q:
        _say_pending(request, [] if session.search_ready else [session])
    agent_rows = agent_selectors.agents(session=session)
    # The Agents panel fetching itself again on a live session (detail.html#agents) needs its subagents' costs too.
    panel = bool(request.htmx) and request.htmx.target == "agents"
    subagents = subagent_selectors.subagents(session=session) if not request.htmx or panel else None
    context = {
        "session": session,
        "agent": agent,
        "agents": agent_rows,
        "subagents": subagents,
        "subagent_rows": subagents.by_agent() if subagents is not None else {},
        "spawn": next((a.spawn for a in agent_rows if a.agent == agent), None),
        "overview": at_a_glance,
        "archive": archive_views.archive_json(session) if session.archived_at else None,
        "overview_poll_seconds": settings.LIVE_POLL_SECONDS,  # while "computing" (detail.html#overview)
        "page": page,
        "q": q,
        "hits": hits,
        "show": ",".join(show),
        "show_chips": _show_chips(agent=agent, q=q, show=show),
        "mark": q or request.GET.get("mark", "").strip(),
        "issues": transcript_selectors.line_issues(session=session),
        "unknown": transcript_selectors.unknown_records(session=session),
    }
    template = (
        "sessions/detail.html#agents"
        if panel
        else "sessions/detail.html#transcript"
        if request.htmx
        else "sessions/detail.html"
    )
    return render(request, template, context)


@require_GET
def subagent_records(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    """A subagent's first page of records, opened in place in its parent's transcript (detail.html's
    subagent_inline); its JSON twin adds the subagent's numbers (``selectors.subagents``)."""
    session = _session_or_404(session_id)
    agent = request.GET.get("agent", "")
    row = subagent_selectors.subagents(session=session).by_agent().get(agent)
    if row is None:
        raise Http404(f"Session {session.pk} has no subagent {agent!r}.")
    page = transcript_selectors.transcript_page(session=session, agent=agent, page=1)
    if wants_json(request):
        return _json(
            {
                "session": session.pk,
                "subagent": row.as_json(),
                "pages": page.paginator.num_pages,
                "messages": [_message_json(m) for m in page.object_list],
            }
        )
    context = {"session": session, "agent": agent, "page": page, "mark": ""}
    return render(request, "sessions/detail.html#subagent_records", context)


def _show_chips(*, agent: str, q: str, show: tuple[str, ...]) -> list[dict[str, Any]]:
    """The transcript's filter chips: each a link to this page with that chip toggled (the URL holds the state)."""
    chips = []
    for name, label in transcript_selectors.SHOW_CHOICES:
        on = name in show
        toggled = [n for n in show if n != name] if on else [*show, name]
        query = [("agent", agent)] + ([("q", q)] if q else [])
        query += [("show", ",".join(transcript_selectors.parse_show(",".join(toggled))))] if toggled else []
        chips.append({"name": name, "label": label, "on": on, "query": urlencode(query)})
    return chips


@require_GET
def export_html(request: HttpRequest, session_id: int) -> StreamingHttpResponse:
    """The session as one HTML file to download (sessions_app/html_export.py), streamed a transcript page at a time;
    over the memory budget, the budget's 413 page (its first chunk is made before the answer starts)."""
    # Here, not at the top: detect-secrets loads requests with it (0.2 s), which no other page needs.
    from sessions_app import html_export

    session = _session_or_404(session_id)
    chunks = html_export.export_html(session=session)
    first = next(chunks)  # raises SessionTooLarge here, while the middleware can still answer with its page
    response = StreamingHttpResponse(itertools.chain([first], chunks), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{html_export.filename(session=session)}"'
    return response


def _hit_json(hit: search_selectors.SearchHit, *, q: str) -> dict[str, Any]:
    return {
        "agent": hit.agent,
        "seq": hit.seq,
        "kind": hit.kind,
        "snippet": {"before": hit.snippet.before, "match": hit.snippet.match, "after": hit.snippet.after},
        "url": f"{reverse('sessions:message', args=[hit.session_id, hit.seq])}?{urlencode({'q': q})}",
    }


def _agent_json(a: agent_selectors.AgentSummary) -> dict[str, Any]:
    spawn = a.spawn
    return {
        "agent": a.agent,
        "messages": a.messages,
        "calls": a.calls,
        "peak": a.peak,
        "peak_is_estimate": a.peak_is_estimate,
        "compaction": a.compaction,
        "depth": a.depth,
        "spawn": None
        if spawn is None
        else {
            "parent": spawn.parent,
            "seq": spawn.seq,
            "call": spawn.call,
            "tool_id": spawn.tool_id,
            "description": spawn.description,
            "subagent_type": spawn.subagent_type,
        },
    }


def _message_json(m: transcript_selectors.RenderedMessage) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "line": m.line,
        "role": m.role,
        "kind": m.kind,
        "type": m.raw_type,
        "agent": m.agent,
        "timestamp": m.timestamp.isoformat() if m.timestamp else None,
        "model": m.model,
        "call": m.call_number,
        "context": m.context,
        "tokens_estimate": m.tokens,
        "tokens_estimate_method": m.tokens_method or None,
        "blocks": [
            {
                "kind": b.kind,
                "text": b.text,
                "truncated": b.truncated,
                "chars": b.full_chars,
                "tool_id": b.tool_id or None,
                "tool_name": b.tool_name or None,
                "is_error": b.is_error,
                "subagent": b.subagent or None,
                "target": b.target or None,
                "diff": [list(row) for row in b.diff] if b.diff is not None else None,
                "diff_lines": b.diff_lines if b.diff is not None else None,
                "diff_cut": b.diff_cut,
            }
            for b in m.blocks
        ],
        "results": [_message_json(r) for r in m.results],
    }


@require_GET
def message_block(request: HttpRequest, session_id: int, seq: int, index: int) -> HttpResponse:
    session = _session_or_404(session_id)
    try:
        block = transcript_selectors.message_block(session=session, seq=seq, index=index)
    except models.Message.DoesNotExist:
        raise Http404("No such block.") from None
    if wants_json(request):
        return _json(
            {
                "seq": seq,
                "index": index,
                "kind": block.kind,
                "text": block.text,
                "chars": block.full_chars,
                "target": block.target or None,
                "diff": [list(row) for row in block.diff] if block.diff is not None else None,
            }
        )
    context = {"session": session, "seq": seq, "block": block, "mark": request.GET.get("mark", "").strip()}
    return render(request, "sessions/detail.html#block", context)


@require_GET
def message_permalink(request: HttpRequest, session_id: int, seq: int) -> HttpResponse:
    session = _session_or_404(session_id)
    message = models.Message.objects.filter(session=session, seq=seq).only("agent", "seq").first()
    if message is None:
        raise Http404("No such message.")
    page = transcript_selectors.page_of_message(session=session, agent=message.agent, seq=seq)
    url = reverse("sessions:detail", args=[session.pk])
    query = {"agent": message.agent, "page": page}
    if request.GET.get("q", "").strip():
        # A search hit lands on its record with the search's matches marked (the agent's whole transcript).
        query["mark"] = request.GET["q"].strip()
    return redirect(f"{url}?{urlencode(query)}#m{seq}")


# ---------------------------------------------------------------------------------------------
# Upload


@require_http_methods(["GET", "POST"])
def upload(request: HtmxHttpRequest) -> HttpResponse:
    """Store the uploaded files and hand them to the worker; the answer is the import's progress page."""
    if request.method == "GET":
        return render(request, "sessions/upload.html", {"report": None})
    refusal = _upload_refusal(request)
    if refusal is not None:
        report = services.ImportReport(rejected=[services.Rejected(path="", message=refusal)])
        if wants_json(request):
            return _json(report.as_json(), status=413 if "bytes" in refusal else 400)
        template = "sessions/upload.html#report" if request.htmx else "sessions/upload.html"
        return render(request, template, {"report": report}, status=200 if request.htmx else 400)
    started = uploads.start_upload(files=request.FILES.getlist("files"), user=request.user)
    url = reverse("sessions:import_progress", args=[started.pk])
    if wants_json(request):
        return _json(_upload_json(started), status=202)
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def _upload_refusal(request: HttpRequest) -> str | None:
    """Why an upload request is refused before anything is stored, or None."""
    most = int(settings.UPLOAD_MAX_REQUEST_BYTES)
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    if size > most:
        return f"The upload is {size:,} bytes, more than {most:,} bytes per upload. Upload the folders in parts."
    if not request.FILES.getlist("files"):
        return "Choose at least one file."
    return None


def _upload_json(upload: models.UploadImport) -> dict[str, Any]:
    return {
        "id": upload.pk,
        "status": upload.status,
        "names": upload.names,
        "files_done": upload.files_done,
        "files_total": upload.files_total,
        "sessions_found": upload.sessions_found,
        "errors_so_far": upload.errors_so_far,
        "error": upload.error or None,
        "report": upload.report if upload.status == models.UploadImport.Status.DONE else None,
        "created_at": upload.created_at.isoformat(),
        "finished_at": upload.finished_at.isoformat() if upload.finished_at else None,
        "url": reverse("sessions:import_progress", args=[upload.pk]),
    }


@require_GET
def import_progress(request: HtmxHttpRequest, upload_id: int) -> HttpResponse:
    """An upload's import: files done of all, sessions found, errors so far; then its report. Polls itself."""
    found = models.UploadImport.objects.filter(pk=upload_id).first()
    user = request.user
    if found is None or not (user.is_staff or found.created_by_id in (None, user.pk)):
        raise Http404("No such import.")
    if wants_json(request):
        return _json(_upload_json(found))
    context = {
        "upload": found,
        "report": found.report if found.status == models.UploadImport.Status.DONE else None,
        "workers": len(sweeps.live_workers()) if not found.finished else None,
    }
    template = "sessions/import_progress.html#progress" if request.htmx else "sessions/import_progress.html"
    return render(request, template, context)
