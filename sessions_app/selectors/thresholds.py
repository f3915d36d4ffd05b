"""Reads of each agent's threshold lines: for a session (its own agent or a chosen strategy), the peak bar's
bands and level, and how one agent's lines are computed (the help page)."""

from __future__ import annotations

from typing import Any

from sessions_app import models
from sessions_app.selectors.conversation import session_info


def peak_bands(*, sessions: list[models.Session]) -> dict[int, dict[str, int | None]]:
    """Each session's warning and compaction thresholds, by its own strategy: the bands its peak bar is coloured by
    (no query: the strategy reads the session's stored info)."""
    bands: dict[int, dict[str, int | None]] = {}
    for session in sessions:
        t = thresholds_for(session=session)
        bands[session.pk] = {"warning": t["warning"], "autocompact": t["autocompact"]}
    return bands


# Without an agent line to compare with, a peak bar warns from these fractions of the window: a display choice
# of this dashboard (no agent defines them), kept near where the agents that do have lines put them.
PEAK_WARN_FRACTION = 0.8
PEAK_DANGER_FRACTION = 0.92


def peak_level(*, session: models.Session, bands: dict[str, int | None] | None = None) -> str:
    """ "ok", "warn" or "danger": how full the session's peak got, against its own agent's warning and compaction
    lines when it has them (else fractions of the window). The class every peak bar and gauge is coloured by."""
    peak, window = session.peak_context or 0, session.window or 0
    if bands is None:
        t = thresholds_for(session=session)
        bands = {"warning": t["warning"], "autocompact": t["autocompact"]}
    danger = bands.get("autocompact") or (window * PEAK_DANGER_FRACTION if window else None)
    warn = bands.get("warning") or (window * PEAK_WARN_FRACTION if window else None)
    if (danger and peak >= danger) or (window and peak >= window):
        return "danger"
    if warn and peak >= warn:
        return "warn"
    return "ok"


def thresholds_for(*, session: models.Session, strategy: str | None = None) -> dict[str, Any]:
    """Threshold lines for the session's own agent, or for another strategy the user picked."""
    from compaction.strategies.registry import build_strategy

    name = strategy or session.format
    built = build_strategy(name, info=session_info(session=session), overrides={})
    t = built.thresholds(
        model=session.model or None, version=session.agent_version or None, observed_max=session.peak_context
    )
    return {
        "strategy": name,
        "window": t.window,
        "effective_window": t.effective_window,
        "autocompact": t.autocompact,
        "warning": t.warning,
        "blocking": t.blocking,
        "source": t.source,
        "assumption": t.assumption,
    }


def threshold_explanation(*, agent: str) -> dict[str, Any]:
    """How one agent's lines, estimate and compaction rules are computed (the in-app help page)."""
    from compaction.diagnose import readable_source
    from compaction.strategies.registry import STRATEGY_NAMES, build_strategy, default_parameters

    if agent not in STRATEGY_NAMES:
        raise LookupError(agent)
    strategy = build_strategy(agent, info=None, overrides={})
    # The lines for a model of that agent, its strategy's example (a session's page shows its own model's).
    lines = strategy.thresholds(model=strategy.example_model, version=None)
    return {
        "name": agent,
        "label": strategy.short_label,
        "title": strategy.label,
        "example_model": strategy.example_model,
        "window": lines.window,
        "autocompact": lines.autocompact,
        "warning": lines.warning,
        "blocking": lines.blocking,
        "rule": readable_source(lines.source),
        "assumed": lines.assumption,
        "estimator": strategy.estimator_label,
        "circuit_breaker": strategy.circuit_breaker(version=None),
        "parameters": default_parameters(agent),
        "public_source": strategy.public_source,
    }
