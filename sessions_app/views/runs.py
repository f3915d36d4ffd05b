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
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from compaction.strategies.registry import (
    STRATEGY_LABELS,
    STRATEGY_NAMES,
    agent_name,
    default_parameters,
    form_parameters,
)
from compaction.transcript import MAIN, Message
from sessions_app import judge_services, models, run_services
from sessions_app.middleware import json_error
from sessions_app.selectors import comparisons as comparison_selectors
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import exports as export_selectors
from sessions_app.selectors import previews as preview_selectors
from sessions_app.selectors import reviews as review_selectors
from sessions_app.selectors import runs as run_selectors
from sessions_app.selectors import summary_checks as check_selectors
from sessions_app.selectors.parameters import parameter_fields
from sessions_app.views.sessions import HtmxHttpRequest, _json, _session_or_404, wants_json

Run = models.CompactionRun


def _refusal_status(exc: run_services.RunRefused) -> int:
    """403 when the action is someone else's to take; 409 when the run's state does not allow it."""
    return 403 if isinstance(exc, run_services.RunForbidden) else 409


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
        errors.append(f"{name} must be an API call number (1 or more: calls are numbered from 1), not {value!r}.")
        return None
    return number


def _preview_from(data: QueryDict, session: models.Session) -> preview_selectors.Preview:
    strategy = data.get("strategy") or preview_selectors.default_strategy(session)
    errors: list[str] = []
    after_call = _call(data, "at", errors)
    cut_start, cut_end = _call(data, "cut_start", errors), _call(data, "cut_end", errors)
    if errors:
        return preview_selectors.Preview(session=session, strategy_name=strategy, overrides={}, error=" ".join(errors))
    return preview_selectors.build_preview(
        session=session,
        strategy=strategy,
        overrides=form_parameters(strategy, data),
        after_call=after_call,
        cut_start=cut_start,
        cut_end=cut_end,
    )


def _field_value(value: Any) -> str:
    """A parameter as a form sends it back: empty for the agent's default, "true"/"false" for a yes/no."""
    if value is None:
        return ""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _run_inputs(preview: preview_selectors.Preview) -> list[tuple[str, str]]:
    """The preview's inputs as form fields, so "Run" summarises exactly what is shown."""
    fields = [("strategy", preview.strategy_name)]
    for name, value in (("at", preview.after_call), ("cut_start", preview.cut_start), ("cut_end", preview.cut_end)):
        if value is not None:
            fields.append((name, str(value)))
    fields += [(k, _field_value(v)) for k, v in preview.parameters.items()]
    if preview.requests:
        fields.append(("transcript_sha256", preview.transcript_sha256))  # what the reviewer saw
    return fields


def _preview_context(
    request: HttpRequest, session: models.Session, preview: preview_selectors.Preview
) -> dict[str, Any]:
    return {
        "session": session,
        "preview": preview,
        "strategies": [(name, STRATEGY_LABELS[name]) for name in STRATEGY_NAMES],
        "parameter_fields": _parameter_fields(session, preview),
        "real": preview.plan.real_json() if preview.plan is not None else None,
        "run_inputs": _run_inputs(preview),
        "runs": run_selectors.session_runs(session=session, limit=20),
        "at_raw": request.GET.get("at", ""),
        "cut_start_raw": request.GET.get("cut_start", ""),
        "cut_end_raw": request.GET.get("cut_end", ""),
        "offline": not settings.ANTHROPIC_API_KEY,
        "summary_model": preview_selectors.summary_model_for(preview=preview),
        "model_override": request.GET.get("summary_model", ""),
        "json_url": reverse("sessions:preview_json", args=[session.pk])
        + (f"?{request.GET.urlencode()}" if request.GET else ""),
    }


def _parameter_fields(session: models.Session, preview: preview_selectors.Preview) -> list[dict[str, Any]]:
    """The strategy's parameters as typed fields with their labels, units and defaults (selectors/parameters.py)."""
    if preview.strategy_name not in STRATEGY_NAMES:
        return []
    info = conversation_selectors.session_info(session=session)
    return parameter_fields(
        strategy=preview.strategy_name,
        values=preview.parameters,
        defaults=default_parameters(preview.strategy_name, info=info),
    )


@require_GET
def preview(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    result = _preview_from(request.GET, session)
    if wants_json(request):
        return _json(preview_selectors.preview_json(result), status=400 if result.error else 200)
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
        run = run_services.start_run(preview=result, user=request.user, model=request.POST.get("summary_model"))
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
    facts = None
    checks = None
    messages_view: list = []
    if run.status == Run.Status.SUCCEEDED:
        messages_view = conversation_selectors.conversation(session=run.session, agent=MAIN)
        facts = review_selectors.review_facts(run=run, messages=messages_view)
        checks = check_selectors.run_checks(run=run, messages=messages_view)
    # The judge: its cost before it runs (when the offline pass left claims undecided), and its latest answer.
    judge_plan = (
        check_selectors.judge_plan(run=run, messages=messages_view, checks=checks)
        if checks is not None and settings.ANTHROPIC_API_KEY
        else None
    )
    judge = check_selectors.latest_judge(run=run) if checks is not None else None
    # Said before the download: whether the export ends at the point, and why.
    export_info = export_selectors.export_info(run=run, messages=messages_view or None)
    if wants_json(request):
        data = run_selectors.run_json(run)
        if facts is not None:
            data |= facts.as_json(session_id=run.session_id, messages=messages_view)
        data["checks"] = checks.as_json(session_id=run.session_id, messages=messages_view) if checks else None
        data["judge"] = {
            "plan": judge_plan.as_json() if judge_plan else None,
            "latest": check_selectors.judge_json(judge),
            "url": reverse("sessions:run_judge", args=[run.pk]),
        }
        data["export"] = export_info
        return _json(data)
    context = {
        "run": run,
        "session": run.session,
        "Review": Run.Review,
        "can_export": export_selectors.can_export(run),
        "export": export_info,
        "preview_url": run_selectors.preview_url(run),
        "facts": facts,
        "checklist": review_selectors.coverage_links(facts.coverage if facts else None, messages=messages_view),
        "checks": checks,
        "judge_plan": judge_plan,
        "judge": judge,
        "history": review_selectors.verdict_history(run=run),
        "summary_lines": review_selectors.summary_lines(run=run) if run.summary else [],
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
            return _json({"error": str(exc)}, status=_refusal_status(exc))
        messages.error(request, str(exc))
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(run_selectors.run_json(again), status=201)
    return redirect("sessions:run", again.pk)


def _back(request: HttpRequest, run: Run) -> HttpResponse:
    """Back to the page the verdict was given on (the compare page), else the run page."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect("sessions:run", run.pk)


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    """Stop a queued or running run: its starter or staff may (a running one stops within a heartbeat)."""
    run = _run_or_404(run_id)
    try:
        run = run_services.cancel_run(run=run, user=request.user)
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=_refusal_status(exc))
        messages.error(request, str(exc))
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(run_selectors.run_json(run))
    return redirect("sessions:run", run.pk)


@require_POST
def run_review(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    decision = request.POST.get("decision", "")
    if decision == Run.Review.ACCEPTED and not request.POST.get("confirm") and run.summary:
        # A summary that loses a rule or holds a contradicted claim is accepted only once the reviewer has seen why.
        checks = check_selectors.run_checks(run=run)
        if checks is not None and checks.to_confirm:
            if wants_json(request):
                return _json(
                    {
                        "error": "Accepting this summary needs confirm=1: it loses rules or holds contradicted claims.",
                        "confirm_required": True,
                        "to_confirm": checks.to_confirm,
                    },
                    status=409,
                )
            context = {
                "run": run,
                "session": run.session,
                "to_confirm": checks.to_confirm,
                "comment": request.POST.get("comment", ""),
                "next": request.POST.get("next", ""),
            }
            return render(request, "runs/confirm_accept.html", context)
    try:
        run_services.review_run(
            run=run,
            user=request.user,
            decision=decision,
            comment=request.POST.get("comment", ""),
        )
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=_refusal_status(exc))
        messages.error(request, f"Run {run.pk} not reviewed: {exc}")
        return _back(request, run)
    if wants_json(request):
        return _json(run_selectors.run_json(run))
    messages.success(request, f"Run {run.pk} {run.review}.")
    return _back(request, run)


@require_POST
def run_judge(request: HttpRequest, run_id: int) -> HttpResponse:
    """Ask the judge about the run's undecided claims (a background job, recorded like a run)."""
    run = _run_or_404(run_id)
    try:
        judge = judge_services.start_judge(run=run, user=request.user, model=request.POST.get("model"))
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, f"No judge: {exc}")
        return redirect("sessions:run", run.pk)
    if wants_json(request):
        return _json(check_selectors.judge_json(judge) or {}, status=201)
    return redirect(f"{reverse('sessions:run', args=[run.pk])}#judge")


@require_POST
def run_comment(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    try:
        line = int(request.POST.get("line", ""))
    except ValueError:
        line = 0
    try:
        comment = run_services.comment_line(run=run, user=request.user, line=line, text=request.POST.get("text", ""))
    except run_services.RunRefused as exc:
        if wants_json(request):
            return _json({"error": str(exc)}, status=409)
        messages.error(request, f"No comment added: {exc}")
        return _back(request, run)
    if wants_json(request):
        return _json({"run": run.pk, "line": comment.line, "text": comment.text}, status=201)
    return _back(request, run)


# ---------------------------------------------------------------------------------------------
# Reviews


def _review_filters(data: QueryDict) -> review_selectors.ReviewFilters:
    session = data.get("session", "").strip()
    return review_selectors.ReviewFilters(
        agent=data.get("agent", "").strip(),
        strategy=data.get("strategy", "").strip(),
        session=int(session) if session.isdigit() else None,
        reviewer=data.get("reviewer", "").strip(),
        verdict=data.get("verdict", "").strip(),
    )


@require_GET
def reviews(request: HttpRequest) -> HttpResponse:
    filters = _review_filters(request.GET)
    pending, decided = review_selectors.review_queue(filters=filters)
    covered = review_selectors.coverages([*pending, *decided])

    def row(run: Run) -> dict[str, Any]:
        checked = covered.get(run.pk)
        figures = checked.figures() if checked is not None else {}
        return run_selectors.run_json(run) | {
            # The agent and the strategy by their display names, as the table shows them.
            "agent": run.session.format,
            "agent_name": agent_name(run.session.format),
            "strategy_name": agent_name(run.strategy),
            "coverage": {name: {"found": f, "total": t} for name, (f, t) in figures.items()},
            "coverage_line": checked.line if checked is not None else None,
        }

    def line(run: Run) -> str:
        checked = covered.get(run.pk)
        return checked.line if checked is not None else ""

    if wants_json(request):
        return _json({"pending": [row(r) for r in pending], "decided": [row(r) for r in decided]})
    context = {
        "pending_rows": [(r, line(r)) for r in pending],
        "decided_rows": [(r, line(r)) for r in decided],
        "filters": filters,
        "agents": models.Session.FORMAT_CHOICES,
        "strategies": [(name, STRATEGY_LABELS[name]) for name in STRATEGY_NAMES],
        "reviewers": review_selectors.reviewers(),
        "verdicts": Run.Review.choices,
        "query": request.GET.urlencode(),
    }
    return render(request, "runs/reviews.html", context)


# ---------------------------------------------------------------------------------------------
# Side by side


def _candidate_json(c: comparison_selectors.Candidate, *, session_id: int, messages: list[Message]) -> dict[str, Any]:
    return {
        "key": c.key,
        "label": c.label,
        "text": c.text,
        "tokens_estimate": c.tokens,
        "url": c.url,
        "structure": c.structure or None,
        "run": c.run_id,
        "review": c.review or None,
        "coverage": review_selectors.coverage_json(c.coverage, session_id=session_id, messages=messages),
        "checks": c.checks.as_json(session_id=session_id, messages=messages) if c.checks else None,
    }


@require_GET
def compare(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run_or_404(run_id)
    other_key = request.GET.get("with", "").strip()
    conversation = conversation_selectors.conversation(session=run.session, agent=MAIN)
    this = comparison_selectors.with_coverage(
        comparison_selectors.run_candidate(run), session=run.session, messages=conversation
    )
    other = None
    replaced: list[comparison_selectors.ReplacedMessage] = []
    replaced_tokens = 0
    error = ""
    if other_key:
        other = comparison_selectors.candidate(session=run.session, key=other_key)
        if other is None:
            error = f"No summary {other_key!r} in this session."
        else:
            comparison_selectors.with_coverage(other, session=run.session, messages=conversation)
    if other is None:
        preview = preview_selectors.preview_for_run(run=run)
        if preview.error or preview.refused:
            error = error or preview.error or preview.refused
        else:
            replaced, replaced_tokens = comparison_selectors.replaced_messages(preview=preview)
    diff = comparison_selectors.compare_summaries(other, this) if other is not None else None
    status = 404 if other_key and other is None else 200
    if wants_json(request):
        data: dict[str, Any] = {
            "run": run_selectors.run_json(run),
            "summary": _candidate_json(this, session_id=run.session_id, messages=conversation),
            "error": error or None,
        }
        if other is not None and diff is not None:
            data["with"] = _candidate_json(other, session_id=run.session_id, messages=conversation)
            data["diff"] = diff.as_json()
        else:
            data["replaced"] = {
                "tokens_estimate": replaced_tokens,
                "messages": [
                    {"seq": m.seq, "role": m.role, "kind": m.kind, "text": m.text, "truncated": m.truncated}
                    for m in replaced
                ],
            }
        return _json(data, status=status)
    context = {
        "run": run,
        "session": run.session,
        "this": this,
        "other": other,
        "other_key": other_key,
        "diff": diff,
        "facts": review_selectors.review_facts(run=run, messages=conversation) if run.summary else None,
        "this_checklist": review_selectors.coverage_links(this.coverage, messages=conversation),
        "other_checklist": review_selectors.coverage_links(other.coverage if other else None, messages=conversation),
        "replaced": replaced,
        "replaced_tokens": replaced_tokens,
        "choices": comparison_selectors.summary_candidates(session=run.session, exclude_run=run.pk),
        "error": error,
        "here": request.get_full_path(),
    }
    return render(request, "runs/compare.html", context, status=status)


# ---------------------------------------------------------------------------------------------
# Export


@require_GET
def export(request: HttpRequest, run_id: int) -> HttpResponseBase:
    run = _run_or_404(run_id)
    try:
        exported = export_selectors.export_compacted(run=run)
    except export_selectors.ExportRefused as exc:
        if wants_json(request):
            return json_error(str(exc), status=409)
        messages.error(request, f"Not exported: {exc}")
        return redirect("sessions:run", run.pk)
    response = StreamingHttpResponse(exported.chunks, content_type=exported.content_type)
    response["Content-Disposition"] = f'attachment; filename="{exported.filename}"'
    return response
