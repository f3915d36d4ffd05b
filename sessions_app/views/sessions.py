"""Thin views: parse the request, call a selector or a service, render a page, a partial or JSON."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.middleware import HtmxDetails

from compaction.transcript import MAIN
from sessions_app import models, selectors, services


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (typing only)."""

    htmx: HtmxDetails


def wants_json(request: HttpRequest) -> bool:
    return request.GET.get("format") == "json" or request.path.endswith(".json")


def _json(data: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, json_dumps_params={"ensure_ascii": False})


def _parse_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def _session_or_404(session_id: int) -> models.Session:
    try:
        return selectors.get_session(session_id=session_id)
    except selectors.SessionNotFound as exc:
        raise Http404(str(exc)) from None


def session_json(session: models.Session) -> dict[str, Any]:
    return {
        "id": session.pk,
        "format": session.format,
        "external_id": session.external_id,
        "title": session.title,
        "project": session.project,
        "model": session.model,
        "agent_version": session.agent_version,
        "started_at": session.started_at.isoformat() if session.started_at else None,
        "ended_at": session.ended_at.isoformat() if session.ended_at else None,
        "messages": session.message_count,
        "api_calls": {"main": session.api_calls_main, "side": session.api_calls_side},
        "peak_context": session.peak_context,
        "context_window": session.window,
        "size_bytes": session.size_bytes,
        "has_compaction": session.has_compaction,
        "overflowed": session.overflowed,
        "compaction_failed": session.compaction_failed,
        "line_errors": session.line_errors,
        "unknown_records": session.unknown_records,
        "url": reverse("sessions:detail", args=[session.pk]),
    }


# ---------------------------------------------------------------------------------------------
# Session list


@require_GET
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    g = request.GET
    filters = selectors.SessionFilters(
        q=g.get("q", "").strip(),
        format=g.get("agent", ""),
        project=g.get("project", ""),
        model=g.get("model", ""),
        since=_parse_date(g.get("since")),
        until=_parse_date(g.get("until")),
        has_compaction=g.get("has_compaction") == "1",
        overflowed=g.get("overflowed") == "1",
        compaction_failed=g.get("compaction_failed") == "1",
        sort=g.get("sort", "date"),
    )
    page = selectors.session_page(filters=filters, page=g.get("page"))
    if wants_json(request):
        return _json(
            {
                "count": page.paginator.count,
                "page": page.number,
                "pages": page.paginator.num_pages,
                "sessions": [session_json(s) for s in page.object_list],
            }
        )
    context = {
        "page": page,
        "filters": filters,
        "choices": selectors.filter_choices(),
        "formats": models.Session.Format.choices,
        "sorts": [("date", "Newest"), ("-date", "Oldest"), ("size", "Largest"), ("peak", "Peak context")],
        "querystring_base": g.copy(),
    }
    template = "sessions/list.html#results" if request.htmx else "sessions/list.html"
    return render(request, template, context)


# ---------------------------------------------------------------------------------------------
# Session page


@require_GET
def session_detail(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    agent = request.GET.get("agent", MAIN)
    q = request.GET.get("q", "").strip()
    page = selectors.transcript_page(session=session, agent=agent, page=request.GET.get("page"), q=q)
    if wants_json(request):
        return _json(
            {
                "session": session_json(session),
                "agent": agent,
                "agents": [_agent_json(a) for a in selectors.agents(session=session)],
                "page": page.number,
                "pages": page.paginator.num_pages,
                "messages": [_message_json(m) for m in page.object_list],
            }
        )
    context = {
        "session": session,
        "agent": agent,
        "agents": selectors.agents(session=session),
        "page": page,
        "q": q,
        "issues": selectors.line_issues(session=session),
        "unknown": selectors.unknown_records(session=session),
    }
    template = "sessions/detail.html#transcript" if request.htmx else "sessions/detail.html"
    return render(request, template, context)


def _agent_json(a: selectors.AgentSummary) -> dict[str, Any]:
    return {"agent": a.agent, "messages": a.messages, "calls": a.calls, "peak": a.peak}


def _message_json(m: selectors.RenderedMessage) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "line": m.line,
        "role": m.role,
        "kind": m.kind,
        "type": m.raw_type,
        "agent": m.agent,
        "timestamp": m.timestamp.isoformat() if m.timestamp else None,
        "model": m.model,
        "call": m.call_index,
        "context": m.context,
        "tokens_estimate": m.tokens,
        "blocks": [
            {
                "kind": b.kind,
                "text": b.text,
                "truncated": b.truncated,
                "chars": b.full_chars,
                "tool_id": b.tool_id or None,
                "tool_name": b.tool_name or None,
                "is_error": b.is_error,
            }
            for b in m.blocks
        ],
        "results": [_message_json(r) for r in m.results],
    }


@require_GET
def message_block(request: HttpRequest, session_id: int, seq: int, index: int) -> HttpResponse:
    session = _session_or_404(session_id)
    try:
        block = selectors.message_block(session=session, seq=seq, index=index)
    except models.Message.DoesNotExist:
        raise Http404("No such block.") from None
    if wants_json(request):
        return _json({"seq": seq, "index": index, "kind": block.kind, "text": block.text, "chars": block.full_chars})
    return render(request, "sessions/detail.html#block", {"session": session, "seq": seq, "block": block})


@require_GET
def message_permalink(request: HttpRequest, session_id: int, seq: int) -> HttpResponse:
    session = _session_or_404(session_id)
    message = models.Message.objects.filter(session=session, seq=seq).only("agent", "seq").first()
    if message is None:
        raise Http404("No such message.")
    page = selectors.page_of_message(session=session, agent=message.agent, seq=seq)
    url = reverse("sessions:detail", args=[session.pk])
    return redirect(f"{url}?agent={message.agent}&page={page}#m{seq}")


# ---------------------------------------------------------------------------------------------
# Upload


def _safe_name(name: str) -> PurePosixPath | None:
    """A relative path inside an upload, or None if it tries to leave the folder."""
    parts = [p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or parts[0].startswith("/"):
        return None
    return PurePosixPath(*parts)


def _import_uploads(files: list[UploadedFile]) -> services.ImportReport:
    report = services.ImportReport()
    workdir = Path(tempfile.mkdtemp(prefix="si-upload-"))
    try:
        staged: list[tuple[Path, str]] = []
        for i, upload in enumerate(files):
            name = upload.name or f"upload-{i}"
            target = workdir / f"u{i}" / Path(name).name
            target.parent.mkdir(parents=True)
            with target.open("wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            if zipfile.is_zipfile(target):
                staged.extend(_unzip(target, workdir / f"z{i}", report, label=name))
            else:
                staged.append((target, name))
        # Main transcripts first so subagent files find their parent.
        staged.sort(key=lambda item: (services._is_subagent_path(item[0]), item[1]))
        for path, name in staged:
            outcome = services.import_file(path=path, name=f"upload:{name}")
            if isinstance(outcome, services.Rejected):
                report.rejected.append(outcome)
            else:
                report.imported.append(outcome)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _unzip(archive: Path, into: Path, report: services.ImportReport, *, label: str) -> list[tuple[Path, str]]:
    staged = []
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            rel = _safe_name(info.filename)
            if rel is None:
                report.rejected.append(
                    services.Rejected(path=f"{label}:{info.filename}", message="Unsafe path in zip.")
                )
                continue
            is_session_file = rel.suffix == ".jsonl" or rel.name == "meta.json"
            if not is_session_file or rel.name == "journal.jsonl" or "tool-results" in rel.parts:
                continue
            target = into / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out, 1024 * 1024)
            if rel.suffix == ".jsonl":
                staged.append((target, f"{label}/{rel}"))
    return staged


@require_http_methods(["GET", "POST"])
def upload(request: HtmxHttpRequest) -> HttpResponse:
    report = None
    if request.method == "POST":
        files = request.FILES.getlist("files")
        if not files:
            report = services.ImportReport(rejected=[services.Rejected(path="", message="Choose at least one file.")])
        else:
            report = _import_uploads(files)
        if wants_json(request):
            return _json(report.as_json(), status=200 if report.imported or not report.rejected else 400)
    template = "sessions/upload.html#report" if request.htmx else "sessions/upload.html"
    return render(request, template, {"report": report})
