"""The strategies we model, and one way to build any of them with user-chosen parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from compaction.formats.registry import FORMAT_LABELS
from compaction.prompt_cache import CachePolicy
from compaction.strategies.base import Strategy
from compaction.strategies.claude_code import ClaudeCodeStrategy
from compaction.strategies.codex import CodexStrategy
from compaction.strategies.khaelor import KhaelorStrategy
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from compaction.transcript import SessionInfo

# One line per agent: the first is the default for a session of an agent we have no strategy for.
STRATEGIES: tuple[
    type[ClaudeCodeStrategy] | type[KlaudeCodeStrategy] | type[KhaelorStrategy] | type[CodexStrategy], ...
] = (
    ClaudeCodeStrategy,
    KlaudeCodeStrategy,
    KhaelorStrategy,
    CodexStrategy,
)
_BY_NAME = {cls.name: cls for cls in STRATEGIES}
STRATEGY_NAMES = tuple(_BY_NAME)
STRATEGY_LABELS = {cls.name: cls.short_label for cls in STRATEGIES}
# The agent's display name, the one every page, filter, badge and JSON answer uses: its format module's LABEL (a
# session's format and the strategy modelling that agent share the name: "codex" is Codex's format and strategy).
AGENT_NAMES = FORMAT_LABELS


def agent_name(name: str) -> str:
    """The display name of an agent (a session format or a strategy name); an unknown name as it is."""
    return AGENT_NAMES.get(name, name)


# Parameters a user may change from the UI / CLI; the defaults are the agents' own.
EDITABLE: dict[str, tuple[str, ...]] = {cls.name: tuple(cls.editable) for cls in STRATEGIES}
# The parameter each strategy calls its context window (what ``--context-limit`` sets).
WINDOW_PARAMETER = {cls.name: cls.window_parameter for cls in STRATEGIES}


def strategy_for_format(format_name: str) -> str:
    """The strategy of a session's own agent (the first one when we model no strategy for it)."""
    return format_name if format_name in _BY_NAME else STRATEGY_NAMES[0]


def cache_policy_for_format(format_name: str) -> CachePolicy:
    """The prompt-cache rules of a session's own agent's provider (its strategy's)."""
    return _BY_NAME[strategy_for_format(format_name)].cache_policy


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
    if name not in _BY_NAME:
        raise UnknownStrategy(f"Unknown strategy {name!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    cls = _BY_NAME[name]
    fields = {f.name: f for f in dataclasses.fields(cls.params_type)}
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
    return cls.from_session(info or SessionInfo(format=name), clean)
