"""The strategies we model, and one way to build any of them with user-chosen parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.strategies.base import Strategy
from compaction.strategies.claude_code import ClaudeCodeParams, ClaudeCodeStrategy
from compaction.strategies.khaelor import KhaelorParams, KhaelorStrategy
from compaction.strategies.klaude_code import KlaudeCodeStrategy, KlaudeParams
from compaction.transcript import SessionInfo

STRATEGY_NAMES = ("claude-code", "klaude-code", "khaelor")
STRATEGY_LABELS = {"claude-code": "Claude Code", "klaude-code": "klaude-code", "khaelor": "KHAELOR"}

# Parameters a user may change from the UI / CLI, with their types; the defaults are the agents' own.
EDITABLE: dict[str, tuple[str, ...]] = {
    "claude-code": ("model", "version", "autocompact_enabled", "pct_override", "auto_compact_window", "keep_recent"),
    "klaude-code": ("context_limit", "reserve_tokens", "keep_recent_tokens", "max_summary_tokens"),
    "khaelor": ("context_window", "protect_recent_tool_tokens", "protect_tail_tokens", "proactive_ratio"),
}
# The parameter each strategy calls its context window (what ``--context-limit`` sets).
WINDOW_PARAMETER = {"claude-code": "auto_compact_window", "klaude-code": "context_limit", "khaelor": "context_window"}
_PARAMS = {"claude-code": ClaudeCodeParams, "klaude-code": KlaudeParams, "khaelor": KhaelorParams}


class UnknownStrategy(ValueError):
    pass


def _coerce(value: Any, default: Any, annotation: str) -> Any:
    if value is None or value == "":
        return None if "None" in annotation else default
    if isinstance(default, bool) or annotation.startswith("bool"):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
    if "int" in annotation:
        return int(value)
    if "float" in annotation:
        return float(value)
    return str(value)


def editable_parameters(strategy: Strategy) -> dict[str, Any]:
    """The editable parameters of a built strategy with the values it uses."""
    params = strategy.params  # type: ignore[attr-defined]
    return {field: getattr(params, field) for field in EDITABLE[strategy.name]}


def default_parameters(name: str, *, info: SessionInfo | None = None) -> dict[str, Any]:
    """The editable parameters of a strategy with the values it would use for this session."""
    return editable_parameters(build_strategy(name, info=info, overrides={}))


def parse_parameters(name: str, pairs: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` items (the CLI's ``--param``) as overrides; a clear ``ValueError`` for a bad item.

    The web form sends the same names as fields; both end in ``build_strategy``, which checks the types.
    """
    if name not in EDITABLE:
        raise UnknownStrategy(f"Unknown strategy {name!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    overrides: dict[str, str] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--param {item!r} must look like NAME=VALUE.")
        if key not in EDITABLE[name]:
            raise ValueError(f"Unknown parameter {key!r} for {name}: choose from {', '.join(EDITABLE[name])}.")
        overrides[key] = value.strip()
    return overrides


def form_parameters(name: str, data: Mapping[str, str]) -> dict[str, str]:
    """The strategy's editable parameters present in a submitted form or query string."""
    return {key: data[key] for key in EDITABLE.get(name, ()) if key in data}


def build_strategy(name: str, *, info: SessionInfo | None, overrides: Mapping[str, Any]) -> Strategy:
    """A strategy with the session's recorded facts (model, window) and the user's overrides.

    Raises ``ValueError`` (a clear message) for an unknown strategy or a parameter of the wrong type.
    """
    if name not in _PARAMS:
        raise UnknownStrategy(f"Unknown strategy {name!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    fields = {f.name: f for f in dataclasses.fields(_PARAMS[name])}
    clean: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in EDITABLE[name]:
            continue
        field = fields[key]
        default = field.default if field.default is not dataclasses.MISSING else None
        try:
            clean[key] = _coerce(value, default, str(field.type))
        except (TypeError, ValueError):
            raise ValueError(f"Parameter {key} must be a {field.type}, not {value!r}.") from None
    info = info or SessionInfo(format=name)
    if name == "klaude-code":
        limit = clean.pop("context_limit", None) or info.context_window
        base = KlaudeParams.for_limit(limit)
        params = dataclasses.replace(base, **clean)
        return KlaudeCodeStrategy(params, file_tracker_paths=info.data.get("file_tracker_paths") or ())
    if name == "khaelor":
        return KhaelorStrategy.for_session(info, **clean)
    recorded: dict[str, Any] = {"model": info.model, "version": info.agent_version}
    return ClaudeCodeStrategy(ClaudeCodeParams(**{**recorded, **clean}))
