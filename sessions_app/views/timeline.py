"""The token timeline of a session: chart page, JSON twin, and the detail of one API call."""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from compaction.strategies.registry import (
    EDITABLE,
    STRATEGY_LABELS,
    STRATEGY_NAMES,
    default_parameters,
)
from compaction.transcript import MAIN
from compaction.transforms import ToolCap
from sessions_app import memory_budget, models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors import composition as composition_selectors
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors
from sessions_app.selectors import overview as overview_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.selectors.parameters import parameter_fields
from sessions_app.views.cached import json_cached_until_session_changes
from sessions_app.views.sessions import HtmxHttpRequest, _json, _session_or_404, wants_json


def _strategy(request: HttpRequest) -> str | None:
    name = request.GET.get("strategy") or None
    return name if name in STRATEGY_NAMES else None


def _replay_request(request: HttpRequest) -> list[tuple[str, dict[str, str]]]:
    """What-if replays named in the URL: ``replay=khaelor&khaelor.protect_tail_tokens=30000``."""
    chosen = [n for n in request.GET.getlist("replay") if n in STRATEGY_NAMES]
    return [
        (name, {key: request.GET[f"{name}.{key}"] for key in EDITABLE[name] if request.GET.get(f"{name}.{key}")})
        for name in chosen
    ]


def _replay_follow(request: HttpRequest) -> dict[str, bool | None]:
    """Each requested replay's "follow what really happened" switch (``claude-code.follow=0``); absent or empty:
    the default (on for the session's own agent with its own parameters), whatever the parameters' values."""
    chosen = {"1": True, "0": False}
    return {name: chosen.get(request.GET.get(f"{name}.follow", "")) for name, _ in _replay_request(request)}


def _tool_cap(request: HttpRequest) -> ToolCap | None:
    """A cap on one tool's results for the replays (``cap_tool=Read&cap_chars=30000``, a diagnosis "try it")."""
    tool = request.GET.get("cap_tool", "").strip()
    try:
        chars = int(request.GET.get("cap_chars", ""))
    except ValueError:
        return None
    return ToolCap(tool, chars) if tool and chars > 0 else None


# Each kind with its glyph: the chart tells kinds apart by dash and glyph as well as colour (static/timeline.js).
MARKER_KINDS = [
    ("compaction", "compaction", "▼"),
    ("microcompact", "microcompact", "◆"),
    ("prune", "prune", "◆"),
    ("overflow", "overflow", "✕"),
    ("api_error", "API error", "!"),
    ("subagent_spawn", "subagent spawn", "↳"),
    ("idle_gap", "idle gap", "‖"),
    ("cache_miss", "cache miss", "○"),
]


# The page's data per process and session version (``updated_at``, which every write to the session's rows moves),
# as its JSON twin's bytes are (views/cached.py): the page re-computed the timeline, the replays and the
# composition for every request (about 0.3 s of the 53 MB session's page warm, under load). Callers must not
# mutate what they get. A few entries, and at most 32 MiB of them as JSON: the 53 MB session's data is about 2 MB as
# JSON, a 300 MB session's 10-13 MB, which a process holds as about 50 MB of objects (bench/memory_bench.py), so the
# cache holds at most about 150 MB whatever the sessions. Weighed by its JSON (4 ms for 2 MB: docs/performance.md).
_PAGE_DATA: ProcessCache[tuple[Any, ...], dict[str, Any]] = ProcessCache(
    max_entries=4, max_weight=32 * 1024 * 1024, weigh=lambda data: len(timeline_json(data))
)
_NOT_DATA = frozenset({"call", "agent", "page"})  # a turn's own parameters: the same timeline


def _timeline_data(request: HttpRequest, session: models.Session) -> dict[str, Any]:
    if settings.ANALYSIS_CACHE_SECONDS == 0:
        return _compute_timeline_data(request, session)
    params = tuple(sorted((k, v) for k, values in request.GET.lists() if k not in _NOT_DATA for v in values))
    key = (session.pk, session.updated_at, session.message_count, params)
    return _PAGE_DATA.get_or_compute(
        key, lambda: _compute_timeline_data(request, session), max_age_s=settings.ANALYSIS_CACHE_SECONDS
    )


def _compute_timeline_data(request: HttpRequest, session: models.Session) -> dict[str, Any]:
    data = timeline_selectors.timeline(session=session, strategy=_strategy(request))
    data["replays"] = diagnosis_selectors.replays(
        session=session, requested=_replay_request(request), cap=_tool_cap(request), follow=_replay_follow(request)
    )
    # The stacked composition: stored by the worker after the estimates; until then the page says "computing".
    analysis = overview_selectors.stored_analysis(session=session, series=True)
    data["composition"] = analysis.composition if analysis is not None else None
    data["composition_status"] = "ready" if analysis is not None else "computing"
    if analysis is None and memory_budget.too_large_for_worker(session=session):
        data["composition_status"] = "too_large"  # the worker does not analyse it (memory_budget); the page says so
        data["composition_refused"] = memory_budget.worker_refusal(session=session)
    return data


def _page_context(request: HttpRequest, session: models.Session, data: dict[str, Any]) -> dict[str, Any]:
    info = conversation_selectors.session_info(session=session)
    requested = dict(_replay_request(request))
    follow = _replay_follow(request)
    replay_form = [
        {
            "name": name,
            "label": STRATEGY_LABELS[name],
            "checked": name in requested,
            "params": parameter_fields(
                strategy=name,
                values=requested.get(name, {}),
                defaults=default_parameters(name, info=info),
                prefix=f"{name}.",
            ),
            "follow_field": f"{name}.follow",
            "follow_choices": [
                # The default follows reality for the session's own agent (at its own settings) only.
                {
                    "value": "",
                    "label": "default (own agent: on)" if name == session.format else "default (other agent: off)",
                    "selected": follow.get(name) is None,
                },
                {"value": "1", "label": "on", "selected": follow.get(name) is True},
                {"value": "0", "label": "off: model every compaction", "selected": follow.get(name) is False},
            ],
        }
        for name in STRATEGY_NAMES
    ]
    return {
        "session": session,
        "timeline": data,
        "strategies": [(n, STRATEGY_LABELS[n]) for n in STRATEGY_NAMES],
        "strategy": data["thresholds"]["strategy"],
        "replay_form": replay_form,
        "cap": _tool_cap(request),
        # The legend: every kind the chart may mark, present or not, so its colours are known before they appear.
        "marker_kinds": MARKER_KINDS,
        "recorded_compactions": sum(1 for m in data["events"] if m["kind"] == "compaction" and m["agent"] == MAIN),
        "timeline_script": timeline_data_script(data),
    }


# What Django's json_script escapes, so that the data cannot close the element that holds it; replaced in the bytes
# (str.translate of the 2 MB text took 0.5 s once it held a non-ASCII character).
_SCRIPT_ESCAPES = ((b"<", b"\\u003C"), (b">", b"\\u003E"), (b"&", b"\\u0026"))


def timeline_json(data: dict[str, Any]) -> bytes:
    """The timeline's data as its JSON twin sends it and its page holds it (``timeline_data_script``): one
    serialisation for both. orjson, not the standard library's encoder (a process's first page or JSON of the 53 MB
    session spent 45 ms writing its 2 MB that way, 4 ms so: docs/performance.md); the data is plain
    dicts, lists, strings and numbers, which both write as the same JSON values. As the standard library's encoder
    does, a key that is not a string is written as one, and a value of another type (none today) as its text, never
    an error page."""
    return orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS)


def timeline_data_script(data: dict[str, Any]) -> SafeString:
    """``json_script`` of the timeline's data: the element the chart's script reads (static/timeline.js)."""
    body = timeline_json(data)
    for character, escape in _SCRIPT_ESCAPES:
        body = body.replace(character, escape)
    return format_html('<script id="timeline-data" type="application/json">{}</script>', mark_safe(body.decode()))


@require_GET
@json_cached_until_session_changes
def timeline(request: HttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    data = _timeline_data(request, session)
    if wants_json(request):
        return HttpResponse(timeline_json(data), content_type="application/json")
    return render(request, "sessions/timeline.html", _page_context(request, session, data))


@require_GET
def turn(request: HtmxHttpRequest, session_id: int) -> HttpResponse:
    session = _session_or_404(session_id)
    agent = request.GET.get("agent", MAIN)
    try:
        call = int(request.GET.get("call", ""))
        detail = composition_selectors.turn_detail(session=session, agent=agent, call=call)
    except (ValueError, models.ApiCall.DoesNotExist):
        raise Http404("No such API call in this session.") from None
    if wants_json(request):
        return _json(detail)
    if request.htmx:
        return render(request, "sessions/timeline.html#turn", {"session": session, "turn": detail})
    # Without JavaScript a point link opens the whole page with this call's detail filled in.
    data = _timeline_data(request, session)
    context = {**_page_context(request, session, data), "turn": detail}
    return render(request, "sessions/timeline.html", context)
