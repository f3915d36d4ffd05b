"""Preview a cut, run a compaction, follow it, review it, compare summaries, export the result."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from compaction.strategies.registry import STRATEGY_LABELS, STRATEGY_NAMES, form_parameters
from sessions_app import models, run_selectors, run_services
from sessions_app.views.sessions import HtmxHttpRequest, _json, _session_or_404, wants_json

Run = models.CompactionRun


def _run_or_404(run_id: int) -> Run:
    try:
        return run_selectors.get_run(run_id=run_id)
    except run_selectors.RunNotFound as exc:
        raise Http404(str(exc)) from None


# ---------------------------------------------------------------------------------------------
# Preview


def _call(data: QueryDict, name: str, errors: list[str]) -> int | None:
    """A point given as a main-chain API call number ("after call N"); empty = not given."""
    value = data.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        errors.append(f"{name} must be an API call number (0 or more), not {value!r}.")
        return None
    return number


def _preview_from(data: QueryDict, session: models.Session) -> run_selectors.Preview:
    strategy = data.get("strategy") or run_selectors.default_strategy(session)
    errors: list[str] = []
    at_call = _call(data, "at", errors)
    cut_start, cut_end = _call(data, "cut_start", errors), _call(data, "cut_end", errors)
    if errors:
        return run_selectors.Preview(session=session, strategy_name=strategy, overrides={}, error=" ".join(errors))
    return run_selectors.build_preview(
        session=session,
        strategy=strategy,
        overrides=form_parameters(strategy, data),
        at_call=at_call,
        cut_start=cut_start,
        cut_end=cut_end,
    )


def _run_inputs(preview: run_selectors.Preview) -> list[tuple[str, str]]:
    """The preview's inputs as form fields, so "Run" summarises exactly what is shown."""
    fields = [("strategy", preview.strategy_name)]
    for name, value in (("at", preview.at_call), ("cut_start", preview.cut_start), ("cut_end", preview.cut_end)):
        if value is not None:
            fields.append((name, str(value)))
    fields += [(k, "" if v is None else str(v)) for k, v in preview.parameters.items()]
    if preview.requests:
        fields.append(("transcript_sha256", preview.transcript_sha256))  # what the reviewer saw
    return fields


def _preview_context(request: HttpRequest, session: models.Session, preview: run_selectors.Preview) -> dict[str, Any]:
    return {
        "session": session,
        "preview": preview,
        "strategies": [(name, STRATEGY_LABELS[name]) for name in STRATEGY_NAMES],
        "parameter_fields": [
            {"name": k, "value": v, "is_bool": isinstance(v, bool)} for k, v in preview.parameters.items()
        ],
        "run_inputs": _run_inputs(preview),
        "runs": run_selectors.session_runs(session=session, limit=20),
        "at_raw": request.GET.get("at", ""),
        "cut_start_raw": request.GET.get("cut_start", ""),
        "cut_end_raw": request.GET.get("cut_end", ""),
        "offline": not settings.ANTHROPIC_API_KEY,
        "summary_model": settings.SUMMARY_MODEL,
        "json_url": reverse("sessions:preview_json", args=[session.pk])
        + (f"?{request.GET.urlencode()}" if request.GET else ""),
    }


@require_GET
def preview(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    result = _preview_from(request.GET, session)
    if wants_json(request):
        return _json(run_selectors.preview_json(result), status=400 if result.error else 200)
    template = "runs/preview.html#preview" if request.htmx else "runs/preview.html"
    return render(request, template, _preview_context(request, session, result))


@require_POST
def run_create(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    result = _preview_from(request.POST, session)
    seen = request.POST.get("transcript_sha256")
    try:
        if seen and result.requests and seen != result.transcript_sha256:
            # The session changed between the preview and the click: summarise nothing the reviewer did not see.
            raise run_services.RunRefused("The session changed since this preview; look at the new preview first.")
        run = run_services.start_run(preview=result, user=request.user)
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=400)
        messages.error(request, f"Not run: {exc}")
        query = urlencode([(k, v) for k, v in request.POST.items() if k != "csrfmiddlewaretoken"])
        return redirect(f"{reverse('sessions:preview', args=[session.pk])}?{query}")
    if wants_json(request):
        return _json(run_selectors.run_json(run), status=201)
    return redirect("sessions:run", run.pk)


# ---------------------------------------------------------------------------------------------
# Run page


@require_GET
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = run_services.sweep_if_stale(run=_run_or_404(run_id))
    if wants_json(request):
        return _json(run_selectors.run_json(run))
    context = {
        "run": run,
        "session": run.session,
        "Review": Run.Review,
        "can_export": run_selectors.can_export(run),
        "preview_url": run_selectors.preview_url(run),
    }
    template = "runs/run.html#run-status" if request.htmx else "runs/run.html"
    response = render(request, template, context)
    if request.htmx and run.finished:
        # The partial without hx-trigger stops the polling; say so for clients that look at headers too.
        response["HX-Trigger"] = "run-finished"
    return response


@require_POST
def run_retry(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        again = run_services.retry_run(run=run, user=request.user)
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, str(exc))
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(run_selectors.run_json(again), status=201)
    return redirect("sessions:run", again.pk)


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop a queued or running run: its starter or staff may (a running one stops within a heartbeat)."""
    run = _run_or_404(run_id)
    user = request.user
    if not (user.is_staff or run.started_by_id in (None, user.pk)):
        refusal = "Only the person who started this run, or staff, can cancel it."
        if wants_json(request):
            return _json({"error": refusal}, status=403)
        messages.error(request, refusal)
        return redirect("sessions:run", run.pk)
    try:
        run = run_services.cancel_run(run=run, user=user)
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, str(exc))
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(run_selectors.run_json(run))
    return redirect("sessions:run", run.pk)


@require_POST
def run_review(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        run_services.review_run(
            run=run,
            user=request.user,
            decision=request.POST.get("decision", ""),
            comment=request.POST.get("comment", ""),
        )
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, str(exc))
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(run_selectors.run_json(run))
    messages.success(request, f"Run {run.pk} {run.review}.")
    return redirect("sessions:run", run.pk)


# ---------------------------------------------------------------------------------------------
# Reviews


@require_GET
def reviews(request: HttpRequest) -> HttpResponse:
    pending, decided = run_selectors.review_queue()
    if wants_json(request):
        return _json(
            {
                "pending": [run_selectors.run_json(r) for r in pending],
                "decided": [run_selectors.run_json(r) for r in decided],
            }
        )
    return render(request, "runs/reviews.html", {"pending": pending, "decided": decided})


# ---------------------------------------------------------------------------------------------
# Side by side


def _candidate_json(c: run_selectors.Candidate) -> dict[str, Any]:
    return {"key": c.key, "label": c.label, "text": c.text, "tokens_estimate": c.tokens, "url": c.url}


@require_GET
def compare(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    other_key = request.GET.get("with", "").strip()
    this = run_selectors.run_candidate(run)
    other = None
    replaced: list[run_selectors.ReplacedMessage] = []
    replaced_tokens = 0
    error = ""
    if other_key:
        other = run_selectors.candidate(session=run.session, key=other_key)
        if other is None:
            error = f"No summary {other_key!r} in this session."
    if other is None:
        preview = run_selectors.preview_for_run(run=run)
        if preview.error or preview.refused:
            error = error or preview.error or preview.refused
        else:
            replaced, replaced_tokens = run_selectors.replaced_messages(preview=preview)
    if wants_json(request):
        data: dict[str, Any] = {
            "run": run_selectors.run_json(run),
            "summary": _candidate_json(this),
            "error": error or None,
        }
        if other is not None:
            data["with"] = _candidate_json(other)
        else:
            data["replaced"] = {
                "tokens_estimate": replaced_tokens,
                "messages": [
                    {"seq": m.seq, "role": m.role, "kind": m.kind, "text": m.text, "truncated": m.truncated}
                    for m in replaced
                ],
            }
        return _json(data, status=404 if other_key and other is None else 200)
    context = {
        "run": run,
        "session": run.session,
        "this": this,
        "other": other,
        "other_key": other_key,
        "replaced": replaced,
        "replaced_tokens": replaced_tokens,
        "choices": run_selectors.summary_candidates(session=run.session, exclude_run=run.pk),
        "error": error,
    }
    return render(request, "runs/compare.html", context, status=404 if other_key and other is None else 200)


# ---------------------------------------------------------------------------------------------
# Export


@require_GET
def export(request: HttpRequest, run_id: int) -> HttpResponseBase:
    run = _run_or_404(run_id)
    try:
        exported = run_selectors.export_compacted(run=run)
    except run_selectors.ExportRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, f"Not exported: {exc}")
        return redirect("sessions:run", run.pk)
    response = StreamingHttpResponse(exported.chunks, content_type=exported.content_type)
    response["Content-Disposition"] = f'attachment; filename="{exported.filename}"'
    return response
