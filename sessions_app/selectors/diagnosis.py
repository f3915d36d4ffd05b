"""Reads for the diagnosis and the what-if replay: context events, the diagnosis report (stored or computed,
kept per version), what each layer would do before a call, and strategies replayed over the main chain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

import orjson
from django.conf import settings
from django.urls import reverse

from compaction.transcript import MAIN, ContextEvent, EventKind
from sessions_app import memory_budget, models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors.calls import session_peak, session_stats
from sessions_app.selectors.conversation import conversation, session_info

if TYPE_CHECKING:
    from compaction.transforms import ToolCap


def context_events(*, session: models.Session, agent: str = MAIN) -> list[ContextEvent]:
    """The stored context events of one agent as neutral ``ContextEvent``s (one query)."""
    return [
        ContextEvent(
            kind=cast(EventKind, row.kind),
            line=row.line,
            agent=row.agent,
            timestamp=row.timestamp.isoformat() if row.timestamp else None,
            trigger=row.trigger or None,
            pre_tokens=row.pre_tokens,
            post_tokens=row.post_tokens,
            tokens_saved=row.tokens_saved,
            tool_ids=list(row.tool_ids or []),
            message=row.message,
            data=dict(row.data or {}),
        )
        for row in models.ContextEvent.objects.filter(session=session, agent=agent).order_by("seq", "id")
    ]


_DIAGNOSES: ProcessCache[tuple[int, Any, int], dict[str, Any]] = ProcessCache(max_entries=8)  # tens of KB each


def stored_diagnosis(*, session: models.Session) -> dict[str, Any] | None:
    """The report the worker stored with this version of the session's analysis (``services.analyse_session``)."""
    data = (
        models.SessionAnalysis.objects.filter(session=session, message_count=session.message_count)
        .values_list("diagnosis", flat=True)
        .first()
    )
    return orjson.loads(bytes(data)) if data is not None else None


def diagnosis(*, session: models.Session) -> dict[str, Any]:
    """The diagnosis report of a session, computed once per version of the session.

    It is a pure function of the stored rows, and every write moves ``updated_at``: the page and its JSON twin
    (and a reload) read the same report instead of computing it again (0.14 s on the 53 MB session), and the first
    request of a process reads the report the worker stored after the import. Callers must not mutate it.
    """

    def read() -> dict[str, Any]:
        report = stored_diagnosis(session=session)
        return report if report is not None else compute_diagnosis(session=session)

    return _DIAGNOSES.get_or_compute((session.pk, session.updated_at, session.message_count), read)


def served_recommendations(*, session: models.Session) -> list[dict[str, Any]]:
    """The report's findings as the page, its JSON twin and ``diagnose --json`` serve them: each with the what-if
    replay that proves its saving (``try_url``, the page's "Try it"; the Findings report links the same one)."""
    return [
        {**r, "try_url": try_url(session.pk, r["proof"]) if r["proof"] else None}
        for r in diagnosis(session=session)["recommendations"]
    ]


def compute_diagnosis(*, session: models.Session) -> dict[str, Any]:
    from compaction.diagnose import diagnose
    from compaction.rules import measure_after

    messages = conversation(session=session, agent=MAIN)
    events = context_events(session=session, agent=MAIN)
    info = session_info(session=session)
    report = diagnose(messages, events, info=info, prices=settings.MODEL_PRICES).as_json()
    # What the agent did after each real compaction, over the default number of calls, rules broken included (stored
    # with the report).
    report["after_compaction"] = measure_after(messages, events, info=info).as_json()
    if not report["has_usage"]:
        # A log without recorded usage: the headline peak is the session's estimated one, as on every other page.
        report["peak"] = session_peak(session=session).as_json()
    # The events as ``session_stats`` lists them (the one definition), with the context either side of each.
    report["events"] = [event.as_json() for event in session_stats(session=session).events]
    # The layers before the request that crossed the compaction line (else the window): what each would do there.
    crossings = report.get("crossings") or []
    crossing = next((c for c in crossings if c["line"] == "autocompact"), None) or next(
        (c for c in crossings if c["line"] == "window"), None
    )
    report["layers_at_crossing"] = (
        layers_before(session=session, call=crossing["call"]) if crossing is not None else None
    )
    return report


def layers_before(*, session: models.Session, call: int, strategy: str | None = None) -> dict[str, Any] | None:
    """What each of the agent's layers would do to main-chain call ``call``'s request (they run after the call
    before it); None for the first call, or a strategy without per-request layers."""
    from compaction.layers import NoLayers, layers_at
    from compaction.strategies.registry import build_strategy, strategy_for_format

    if call < 2:
        return None  # the first call has no call before it
    info = session_info(session=session)
    built = build_strategy(strategy or strategy_for_format(session.format), info=info, overrides={})
    try:
        report = layers_at(conversation(session=session, agent=MAIN), strategy=built, call=call - 1, info=info)
    except (NoLayers, ValueError):
        return None
    from compaction.diagnose import readable_source

    data = report.as_json()
    # What a person reads names no file of ours they cannot open.
    for layer in data["layers"]:
        layer["why"] = readable_source(layer["why"])
        layer["detail"] = readable_source(layer["detail"])
    data["notes"] = [readable_source(note) for note in data.get("notes", [])]
    # The widest bar of the waterfall: bars are drawn against it.
    data["scale"] = max([report.tokens_before, *(layer.tokens_after for layer in report.layers)]) or 1
    return data


def replays(
    *,
    session: models.Session,
    requested: list[tuple[str, dict[str, Any]]],
    cap: ToolCap | None = None,
    follow: dict[str, bool | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each requested strategy replayed over the main chain, its series placed on the timeline's x axis (seq).

    ``cap`` replays the transcript with one tool's results capped (``compaction.transforms``). ``follow`` is each
    strategy's "follow what really happened" switch (absent or None: the replay's default).
    """
    from compaction.strategies.registry import build_strategy
    from compaction.transforms import cap_tool_results
    from sessions_app.selectors.simulations import ReplayFailed, guarded_replay

    if not requested:
        return {}
    try:
        messages = conversation(session=session, agent=MAIN)
    except memory_budget.SessionTooLarge as exc:
        # The timeline itself reads no record: it is drawn, and each replay asked for says why it is not.
        return {name: {"strategy": name, "error": exc.message} for name, _ in requested}
    info = session_info(session=session)
    seq_of_call = dict(models.ApiCall.objects.filter(session=session, agent=MAIN).values_list("number", "seq"))
    out: dict[str, dict[str, Any]] = {}
    for name, overrides in requested:
        try:
            strategy = build_strategy(name, info=info, overrides=overrides)
        except ValueError as exc:
            out[name] = {"strategy": name, "error": str(exc)}
            continue
        replayed = messages
        if cap is not None:
            replayed, _ = cap_tool_results(messages, cap=cap, estimate=strategy.estimate)
        try:
            result = guarded_replay(
                replayed, session=session, strategy=strategy, info=info, follow_reality=(follow or {}).get(name)
            )
        except ReplayFailed as exc:
            out[name] = {"strategy": name, "error": str(exc)}
            continue
        data = result.as_json()
        if cap is not None:
            data["notes"].insert(0, f"Transcript changed: {cap.label}.")
            data["cap"] = {"tool": cap.tool, "max_chars": cap.max_chars}
        data["points"] = [
            {"seq": seq_of_call.get(call, call), "x": call, "call": call, "context": ctx}
            for call, ctx in data["series"]
        ]
        for event in data["events"]:
            event["seq"] = seq_of_call.get(event.get("after_call"), event.get("after_call"))
            event["x"] = event.get("after_call")
        out[name] = data
    return out


def try_url(session_id: int, proof: dict[str, Any]) -> str:
    """The timeline's what-if replay with the change a recommendation's proof made."""
    strategy = proof["strategy"]
    query: list[tuple[str, str]] = [("replay", strategy)]
    query += [(f"{strategy}.{key}", value) for key, value in proof["overrides"].items()]
    if proof["cap_tool"] and proof["cap_chars"]:
        query += [("cap_tool", proof["cap_tool"]), ("cap_chars", str(proof["cap_chars"]))]
    return reverse("sessions:timeline", args=[session_id]) + "?" + urlencode(query)
