"""The settings simulator: the form (a strategy, its parameters, one parameter's values to try, the session list's
filters), a simulation's live progress and results, and their JSON twins (numbers: selectors/simulations.py)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from compaction.formats.registry import FORMAT_CHOICES
from compaction.strategies.registry import (
    EDITABLE,
    STRATEGY_LABELS,
    STRATEGY_NAMES,
    default_parameters,
    form_parameters,
    parameter_kinds,
    parameter_specs,
    strategy_for_format,
)
from sessions_app import models, simulations, sweeps
from sessions_app.middleware import json_error, wants_json
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import simulations as selectors
from sessions_app.selectors.parameters import parameter_fields


def _strategy(data: QueryDict) -> str:
    """The strategy asked for; by default the agent filtered on's own, else the first."""
    name = data.get("strategy") or ""
    if name in STRATEGY_NAMES:
        return name
    return strategy_for_format(data.get("agent") or STRATEGY_NAMES[0])


def _form_context(data: QueryDict, *, error: str | None = None) -> dict[str, Any]:
    strategy = _strategy(data)
    specs = parameter_specs(strategy)
    return {
        "strategy": strategy,
        "strategies": [(name, STRATEGY_LABELS[name]) for name in STRATEGY_NAMES],
        "params": parameter_fields(
            strategy=strategy,
            values=form_parameters(strategy, data),
            defaults=default_parameters(strategy),
        ),
        "try_choices": [(key, specs[key].label) for key in EDITABLE[strategy]],
        "try_name": data.get("try_name", ""),
        "try_values": data.get("try_values", ""),
        "filters": selectors.filters_of(data),
        "formats": FORMAT_CHOICES,
        "choices": session_selectors.filter_choices(),
        "runs": [(run, selectors.plan_of(run).labels()) for run in selectors.recent_runs()],
        "error": error,
    }


def _plan(data: QueryDict) -> selectors.Plan:
    strategy = data.get("strategy") or _strategy(data)
    if strategy not in STRATEGY_NAMES:
        raise selectors.SimulationError(f"Unknown strategy {strategy!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    defaults = default_parameters(strategy)
    kinds = parameter_kinds(strategy)

    def as_default(key: str, value: str) -> bool:
        default = defaults.get(key)
        if kinds[key] == "bool":
            return default is not None and (value.lower() in ("1", "true", "yes", "on")) == bool(default)
        return value == str(default)

    # Only what the form changed from the agent's defaults is a parameter of the setting: a value left as shown
    # keeps the agent's own rule (which may differ per session, by version or model).
    params = {
        key: value.strip()
        for key, value in form_parameters(strategy, data).items()
        if value.strip() and not as_default(key, value.strip())
    }
    values = [v for v in data.get("try_values", "").split(",") if v.strip()]
    return selectors.plan(strategy=strategy, params=params, try_name=data.get("try_name", ""), try_values=values)


@require_http_methods(["GET", "POST"])
def simulator(request: HttpRequest) -> HttpResponse:
    """GET: the form and recent simulations; POST: start one (the answer is its progress page)."""
    if request.method == "GET":
        if wants_json(request):
            return JsonResponse({"simulations": [_run_json(run) for run in selectors.recent_runs()]})
        template = "sessions/simulator.html#form" if getattr(request, "htmx", False) else "sessions/simulator.html"
        return render(request, template, _form_context(request.GET))
    try:
        plan = _plan(request.POST)
    except selectors.SimulationError as exc:
        if wants_json(request):
            return json_error(str(exc), status=400)
        return render(request, "sessions/simulator.html", _form_context(request.POST, error=str(exc)), status=400)
    run = simulations.start(plan=plan, filters=request.POST, user=request.user)
    if wants_json(request):
        return JsonResponse(_run_json(run), status=202)
    return redirect("sessions:simulation", run.pk)


def _run_json(run: models.SimulationRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "status": run.status,
        "strategy": run.strategy,
        "parameters": run.parameters,
        "filters": run.filters,
        "sessions_done": run.sessions_done,
        "sessions_total": run.sessions_total,
        "url": reverse("sessions:simulation", args=[run.pk]),
    }


@require_GET
def simulation(request: HttpRequest, run_id: int) -> HttpResponse:
    """A simulation: sessions done of all while the worker replays them (the page polls itself, reading no result),
    then the results per project and per session beside what happened, and the recommendation."""
    run = models.SimulationRun.objects.defer("results").filter(pk=run_id).first()
    user = request.user
    if run is None or not (user.is_staff or run.created_by_id in (None, user.pk)):
        raise Http404("No such simulation.")
    if wants_json(request):
        return JsonResponse(selectors.report(run=run), json_dumps_params={"ensure_ascii": False})
    # The results are read once the worker is done: a poll of a long simulation reads only its progress.
    data = selectors.report(run=run) if run.finished else None
    settings = selectors.plan_of(run).labels()
    context = {
        "run": run,
        "settings": settings,
        "data": data,
        "groups": [data["all"], *data["projects"]] if data else [],
        "columns": ["what happened", *settings],
        "skip_span": 4 * (len(settings) + 1),
        "workers": len(sweeps.live_workers()) if not run.finished else None,
    }
    template = "sessions/simulation.html#progress" if getattr(request, "htmx", False) else "sessions/simulation.html"
    return render(request, template, context)
