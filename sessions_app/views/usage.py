"""The Usage page across sessions, its JSON twin and its CSV download (numbers: selectors/usage.py).

The URL holds the page's whole state: the grouping (``by``), the chart's stacks (``stack``: model or agent), the
time zone (``tz``), the days (``since``, ``until``) and the session list's filters, by the list's own names.
"""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import date
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from compaction.formats.registry import FORMAT_CHOICES
from sessions_app.middleware import json_error, wants_json
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import usage as usage_selectors

STACKS = ("model", "agent")
BY_LABELS = {
    "day": "Day",
    "week": "Week",
    "month": "Month",
    "project": "Project",
    "model": "Model",
    "agent": "Agent",
    "session": "Session",
}


def _date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


def usage_query(g: QueryDict) -> usage_selectors.UsageQuery:
    """The report a query string asks for (unknown names are the selector's to refuse: UsageError)."""
    return usage_selectors.UsageQuery(
        by=g.get("by", "day"),  # type: ignore[arg-type]  # checked by usage_report
        since=_date(g.get("since")),
        until=_date(g.get("until")),
        time_zone=g.get("tz", "").strip(),
        model=g.get("model", ""),
        sessions=session_selectors.SessionFilters(
            q=g.get("q", "").strip(),
            format=g.get("agent", ""),
            project=g.get("project", ""),
            has_compaction=g.get("has_compaction") == "1",
            overflowed=g.get("overflowed") == "1",
            compaction_failed=g.get("compaction_failed") == "1",
            archived=g.get("archived") == "1",
        ),
    )


CHART_BARS = 40  # bars of a grouping that is no time line (sessions, projects): the most expensive, then "others"


def chart_data(*, report: usage_selectors.UsageReport, stack: str) -> dict[str, Any]:
    """The stacked chart's data (static/usage.js): one bar per group, one stack per model or agent, in USD.

    A time line keeps every period; sessions and projects (rows ordered by cost) keep the largest CHART_BARS - 1
    and fold the rest into one bar, so the chart stays readable over thousands of sessions (the table lists all)."""
    rows = report.rows
    folded: list[usage_selectors.Row] = []
    if report.query.by not in usage_selectors.TIME_GROUPINGS and len(rows) > CHART_BARS:
        rows, folded = rows[: CHART_BARS - 1], rows[CHART_BARS - 1 :]

    def stacks(row: usage_selectors.Row) -> dict[str, usage_selectors.Numbers]:
        return row.by_model if stack == "model" else row.by_agent

    def cost(rows: list[usage_selectors.Row], name: str) -> float:
        return round(sum(stacks(row).get(name, _NONE).cost for row in rows), 6)

    names: dict[str, float] = {}
    for row in report.rows:
        for name, numbers in stacks(row).items():
            names[name] = names.get(name, 0.0) + numbers.cost
    ordered = sorted(names, key=lambda n: -names[n])
    groups = [row.label if report.query.by == "session" else row.group for row in rows]
    if folded:
        groups.append(f"{len(folded)} others")
    return {
        "stack": stack,
        "groups": groups,
        "series": [
            {
                "name": name,
                "agent": name if stack == "agent" else None,
                "values": [cost([row], name) for row in rows] + ([cost(folded, name)] if folded else []),
            }
            for name in ordered
        ],
    }


_NONE = usage_selectors.Numbers()


@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    g = request.GET
    query = usage_query(g)
    try:
        report = usage_selectors.usage_report(query=query)
    except usage_selectors.UsageError as exc:
        if wants_json(request) or g.get("format") == "csv":
            return json_error(str(exc), status=400)
        return render(request, "400.html", {"message": str(exc)}, status=400)
    if wants_json(request):
        return JsonResponse(report.as_json(), json_dumps_params={"ensure_ascii": False})
    if g.get("format") == "csv" or request.path.endswith(".csv"):
        return _csv(report)
    stack = g.get("stack") or "model"
    if stack not in STACKS:
        stack = "model"
    twin = g.copy()
    twin.pop("stack", None)
    chart = chart_data(report=report, stack=stack)
    context = {
        "report": report,
        "query": query,
        # The session list's filter fields show the report's days and model (sessions/_filter_fields.html).
        "filters": replace(query.sessions, since=query.since, until=query.until, model=query.model),
        "stack": stack,
        "chart": chart,
        "chart_json": orjson.dumps(chart).decode(),
        "groupings": list(BY_LABELS.items()),
        "by_label": BY_LABELS[query.by],
        "formats": FORMAT_CHOICES,
        "choices": session_selectors.filter_choices(),
        "twin_query": twin.urlencode(),
    }
    template = "sessions/usage.html#results" if getattr(request, "htmx", False) else "sessions/usage.html"
    return render(request, template, context)


def _csv(report: usage_selectors.UsageReport) -> HttpResponse:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(usage_selectors.csv_rows(report=report))
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-by-{report.query.by}.csv"'
    return response
