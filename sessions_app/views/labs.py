"""The compaction-instructions lab: write instruction variants, run them at chosen points in the background, and
compare them side by side on size, cost and the checklist score."""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from compaction.strategies.registry import STRATEGY_LABELS, STRATEGY_NAMES
from sessions_app import run_services
from sessions_app.selectors import labs as lab_selectors
from sessions_app.selectors import previews as preview_selectors
from sessions_app.views.sessions import HtmxHttpRequest, _json, _session_or_404, wants_json

VARIANT_FIELDS = 3  # instruction boxes on the form


def parse_points(text: str) -> list[int]:
    """ "12, 40 57" -> [12, 40, 57]; ValueError naming what is not a call number."""
    points: list[int] = []
    for part in re.split(r"[\s,]+", text.strip()):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"{part!r} is not a call number (after call N, N from 1)")
        points.append(int(part))
    if not points:
        raise ValueError("Name at least one point (after call N).")
    return points


@require_http_methods(["GET", "POST"])
def lab_new(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    data = request.POST if request.method == "POST" else request.GET
    strategy = data.get("strategy") or preview_selectors.default_strategy(session)
    points_text = data.get("points", "")
    variants = [data.get(f"variant{i}", "") for i in range(1, VARIANT_FIELDS + 1)]
    if request.method == "POST":
        chosen = [v for v in variants if v.strip()] + ([""] if data.get("baseline") else [])
        try:
            key = run_services.start_lab(
                session=session,
                strategy=strategy,
                points=parse_points(points_text),
                variants=chosen,
                user=request.user,
            )
        except (ValueError, run_services.RunRefused) as exc:  # RunRefused is a ValueError too
            if wants_json(request):
                return _json({"error": str(exc)}, status=400)
            messages.error(request, f"Not run: {exc}")
        else:
            if wants_json(request):
                return _json(lab_selectors.lab(key=key).as_json(), status=201)
            return redirect("sessions:lab", key)
    context = {
        "session": session,
        "strategy": strategy,
        "strategies": [(name, STRATEGY_LABELS.get(name, name)) for name in STRATEGY_NAMES],
        "points": points_text,
        "variants": variants,
        "baseline": request.method == "GET" or bool(data.get("baseline")),
        "labs": [
            (created, reverse("sessions:lab", args=[key]))
            for key, created in lab_selectors.session_labs(session=session)[:10]
        ],
    }
    return render(request, "runs/lab_new.html", context)


@require_GET
def lab_detail(request: HtmxHttpRequest, key: str) -> HttpResponse:
    try:
        found = lab_selectors.lab(key=key)
    except lab_selectors.LabNotFound as exc:
        raise Http404(str(exc)) from None
    if wants_json(request):
        return _json(found.as_json())
    template = "runs/lab.html#lab-grid" if request.htmx else "runs/lab.html"
    return render(request, template, {"lab": found, "session": found.session})
