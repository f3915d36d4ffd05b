"""Reads for the settings simulator: one session replayed with a strategy's settings (the one function
``manage.py replay`` and the simulator call), what the session recorded beside it, the settings a simulation tries,
and a simulation's results summed per project (``compaction.simulate``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.contrib.humanize.templatetags.humanize import intcomma

from compaction.replay import ReplayResult, replay
from compaction.simulate import COST_NOTE, summarise
from compaction.strategies.base import Strategy
from compaction.strategies.registry import (
    EDITABLE,
    STRATEGY_LABELS,
    STRATEGY_NAMES,
    UnknownStrategy,
    build_strategy,
    parameter_kinds,
    parameter_specs,
)
from compaction.transcript import MAIN, Message
from sessions_app import models
from sessions_app.selectors.calls import session_peak
from sessions_app.selectors.conversation import conversation, session_info
from sessions_app.selectors.overview import context_event_counts
from sessions_app.selectors.sessions import SessionFilters, session_list

logger = logging.getLogger(__name__)

MAX_TRIED = 12  # settings one simulation tries (each replays every session once)


class ReplayFailed(ValueError):
    """A replay that stopped on an internal error (a fault in the replay or in a strategy's rules), said in words for
    the page, its JSON and the command; the trace goes to the server log."""


def guarded_replay(
    messages: Sequence[Message], *, session: models.Session, strategy: Strategy, **options: Any
) -> ReplayResult:
    """``compaction.replay.replay``, whose internal error becomes ``ReplayFailed``: a user sees what failed, never a
    stack trace, and the rest of the page answers (the web's replays and ``replay_session`` both go through it)."""
    try:
        return replay(messages, strategy=strategy, **options)
    except Exception as exc:
        logger.exception("session %s: the %s replay failed", session.pk, strategy.name)
        raise ReplayFailed(
            f"{strategy.short_label}'s replay stopped on an internal error ({type(exc).__name__}) and shows nothing; "
            "the details are in the server log."
        ) from exc


def replay_session(
    *,
    session: models.Session,
    strategy: str,
    overrides: Mapping[str, Any],
    summary_tokens: int | None = None,
    follow_reality: bool | None = None,
) -> tuple[ReplayResult, list[Message]]:
    """``strategy`` with ``overrides`` replayed over the session's main chain, and that chain: what ``manage.py
    replay`` prints and what the settings simulator sums up. ``ValueError`` for a bad strategy or parameter;
    ``memory_budget.SessionTooLarge`` above the budget in force."""
    info = session_info(session=session)
    built = build_strategy(strategy, info=info, overrides=overrides)
    messages = conversation(session=session, agent=MAIN)
    result = guarded_replay(
        messages,
        session=session,
        strategy=built,
        summary_tokens=summary_tokens,
        info=info,
        follow_reality=follow_reality,
    )
    return result, messages


def happened(*, session: models.Session) -> dict[str, Any]:
    """What the session recorded, by the numbers its own page shows: its main chain's compactions and overflows
    (``context_event_counts``), its peak and its cost (the session's columns)."""
    counts = context_event_counts(session=session)
    return {
        "compactions": counts["compaction"],
        "overflows": counts["overflow"],
        "peak": session_peak(session=session).as_json(),
        "cost_usd": session.cost_usd,
    }


class SimulationError(ValueError):
    """A simulation asked for with a bad strategy, parameter or value (said in words)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What a simulation replays: a strategy, the parameters fixed, and one parameter's values tried in turn."""

    strategy: str
    params: dict[str, str]
    try_name: str = ""
    try_values: tuple[str, ...] = ()

    def settings(self) -> list[dict[str, str]]:
        """Each setting tried, as overrides: the fixed parameters, with one value of the tried one each."""
        if not self.try_name:
            return [dict(self.params)]
        return [{**self.params, self.try_name: value} for value in self.try_values]

    def labels(self) -> list[str]:
        return [setting_label(strategy=self.strategy, setting=setting) for setting in self.settings()]

    def as_json(self) -> dict[str, Any]:
        tried = {"name": self.try_name, "values": list(self.try_values)} if self.try_name else None
        return {"params": self.params, "try": tried}


def setting_label(*, strategy: str, setting: Mapping[str, str]) -> str:
    """A setting in words, as the strategy's parameter form names its fields: "Auto-compact at 60 % of the window"."""
    specs = parameter_specs(strategy)
    kinds = parameter_kinds(strategy)
    parts = []
    for key, value in setting.items():
        spec = specs.get(key)
        if spec is None:
            parts.append(f"{key} {value}")
            continue
        shown = str(value)
        if kinds.get(key) == "bool":
            shown = "on" if shown.lower() in ("1", "true", "yes", "on") else "off"
        elif kinds.get(key) == "int" and shown.lstrip("-").isdigit():
            shown = intcomma(int(shown), use_l10n=False)
        parts.append(" ".join(part for part in (spec.label, shown, spec.unit) if part))
    return ", ".join(parts) or f"{STRATEGY_LABELS.get(strategy, strategy)}'s own settings"


def plan(*, strategy: str, params: Mapping[str, str], try_name: str = "", try_values: Sequence[str] = ()) -> Plan:
    """The settings asked for, checked: a known strategy, its editable parameters, values of their kind."""
    if strategy not in STRATEGY_NAMES:
        raise SimulationError(f"Unknown strategy {strategy!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    editable = EDITABLE[strategy]
    kinds = parameter_kinds(strategy)
    clean = {key: str(value).strip() for key, value in params.items() if str(value).strip() != ""}
    values = tuple(v.strip() for v in try_values if v.strip())
    for key in [*clean, *([try_name] if try_name else [])]:
        if key not in editable:
            raise SimulationError(f"Unknown parameter {key!r} for {strategy}: choose from {', '.join(editable)}.")
    if try_name and not values:
        raise SimulationError(f"Give the values of {try_name} to try, separated by commas.")
    if len(values) > MAX_TRIED:
        raise SimulationError(f"Try at most {MAX_TRIED} values at once ({len(values)} given).")
    for key, value in [*clean.items(), *((try_name, v) for v in values)]:
        kind = kinds[key]
        try:
            if kind == "int":
                int(value)
            elif kind == "float":
                float(value)
        except ValueError:
            raise SimulationError(f"{key} takes a {'whole ' if kind == 'int' else ''}number, not {value!r}.") from None
    try:
        build_strategy(strategy, info=None, overrides=clean)
    except UnknownStrategy as exc:
        raise SimulationError(str(exc)) from None
    except (TypeError, ValueError) as exc:
        raise SimulationError(str(exc)) from None
    if try_name:
        clean.pop(try_name, None)
    return Plan(strategy=strategy, params=clean, try_name=try_name, try_values=values)


def plan_of(run: models.SimulationRun) -> Plan:
    tried = run.parameters.get("try") or {}
    return Plan(
        strategy=run.strategy,
        params=dict(run.parameters.get("params") or {}),
        try_name=tried.get("name", ""),
        try_values=tuple(tried.get("values") or ()),
    )


FILTER_NAMES = ("q", "agent", "project", "model", "since", "until", "has_compaction", "overflowed", "compaction_failed")


def _day(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


def filters_of(data: Mapping[str, Any]) -> SessionFilters:
    """The session list's filters from their names on the list's form (``agent`` is the list's name for format)."""
    return SessionFilters(
        q=str(data.get("q") or "").strip(),
        format=str(data.get("agent") or ""),
        project=str(data.get("project") or ""),
        model=str(data.get("model") or ""),
        since=_day(data.get("since")),
        until=_day(data.get("until")),
        has_compaction=str(data.get("has_compaction") or "") == "1",
        overflowed=str(data.get("overflowed") or "") == "1",
        compaction_failed=str(data.get("compaction_failed") or "") == "1",
    )


def selected_sessions(*, filters: Mapping[str, Any]) -> list[models.Session]:
    """The sessions a simulation replays, oldest first (the list's filters, its own order reversed)."""
    return list(session_list(filters=filters_of(filters)).reverse())


def report(*, run: models.SimulationRun) -> dict[str, Any]:
    """A simulation as its page and its JSON twin show it: the settings, progress, per project and per session."""
    current = plan_of(run)
    labels = current.labels()
    rows = list(run.results)
    projects = summarise(rows, settings=len(labels))
    return {
        "id": run.pk,
        "status": run.status,
        "strategy": run.strategy,
        "strategy_label": STRATEGY_LABELS.get(run.strategy, run.strategy),
        "parameters": current.as_json(),
        "settings": labels,
        "setting_parameters": current.settings(),
        "filters": run.filters,
        "sessions_done": run.sessions_done,
        "sessions_total": run.sessions_total,
        "error": run.error or None,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "cost_note": COST_NOTE,
        "all": projects[0].as_json(labels=labels),
        "projects": [summary.as_json(labels=labels) for summary in projects[1:]],
        "sessions": rows,
        "skipped": [row for row in rows if row.get("skipped")],
    }


def recent_runs(*, limit: int = 20) -> list[models.SimulationRun]:
    return list(models.SimulationRun.objects.defer("results")[:limit])
