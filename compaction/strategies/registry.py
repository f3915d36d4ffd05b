"""The strategies we model, and one way to build any of them with user-chosen parameters.

The tables below are changed in place by ``register_agent`` (a plug-in's or a test's agent), so a module that
imported one sees a registered agent too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from functools import cache
from types import ModuleType
from typing import Any

from compaction.agents import NO_STRUCTURE, ParameterSpec, SummaryStructure
from compaction.formats.registry import FORMAT_LABELS, register_format, unregister_format
from compaction.prompt_cache import CachePolicy
from compaction.strategies.base import Strategy
from compaction.strategies.claude_code import ClaudeCodeStrategy
from compaction.strategies.codex import CodexStrategy
from compaction.strategies.khaelor import KhaelorStrategy
from compaction.strategies.klaude_code import KlaudeCodeStrategy
from compaction.transcript import SessionInfo

# One line per agent: the first is the default for a session of an agent we have no strategy for.
STRATEGIES: list[type[Any]] = [
    ClaudeCodeStrategy,
    KlaudeCodeStrategy,
    KhaelorStrategy,
    CodexStrategy,
]
_BY_NAME: dict[str, type[Any]] = {cls.name: cls for cls in STRATEGIES}
STRATEGY_NAMES: list[str] = list(_BY_NAME)
STRATEGY_LABELS: dict[str, str] = {cls.name: cls.short_label for cls in STRATEGIES}
# The agent's display name, the one every page, filter, badge and JSON answer uses: its format module's LABEL (a
# session's format and the strategy modelling that agent share the name: "codex" is Codex's format and strategy).
AGENT_NAMES = FORMAT_LABELS


def agent_name(name: str) -> str:
    """The display name of an agent (a session format or a strategy name); an unknown name as it is."""
    return AGENT_NAMES.get(name, name)


# Parameters a user may change from the UI / CLI; the defaults are the agents' own.
EDITABLE: dict[str, tuple[str, ...]] = {cls.name: tuple(cls.editable) for cls in STRATEGIES}
# The parameter each strategy calls its context window (what ``--context-limit`` sets).
WINDOW_PARAMETER: dict[str, str] = {cls.name: cls.window_parameter for cls in STRATEGIES}


def register_agent(format_module: ModuleType, strategy: type[Any]) -> None:
    """Add an agent from its two modules: its format (detection, parsing, profile) and its strategy class.

    Both share the agent's name (``format_module.FORMAT == strategy.name``); every page, command and table that
    asks a registry then knows it. ``unregister_agent`` takes it out again.
    """
    if strategy.name != format_module.FORMAT:
        raise ValueError(f"strategy {strategy.name!r} must be named as its format {format_module.FORMAT!r}")
    if strategy.name in _BY_NAME:
        raise ValueError(f"strategy {strategy.name!r} is already registered")
    register_format(format_module)
    STRATEGIES.append(strategy)
    _BY_NAME[strategy.name] = strategy
    STRATEGY_NAMES.append(strategy.name)
    STRATEGY_LABELS[strategy.name] = strategy.short_label
    EDITABLE[strategy.name] = tuple(strategy.editable)
    WINDOW_PARAMETER[strategy.name] = strategy.window_parameter
    raw_payload_keys.cache_clear()


def unregister_agent(name: str) -> None:
    """Remove an agent ``register_agent`` added (the built-in ones stay)."""
    strategy = _BY_NAME.pop(name)
    STRATEGIES.remove(strategy)
    STRATEGY_NAMES.remove(name)
    for table in (STRATEGY_LABELS, EDITABLE, WINDOW_PARAMETER):
        del table[name]  # type: ignore[attr-defined]
    unregister_format(name)
    raw_payload_keys.cache_clear()


def strategy_for_format(format_name: str) -> str:
    """The strategy of a session's own agent (the first one when we model no strategy for it)."""
    return format_name if format_name in _BY_NAME else STRATEGY_NAMES[0]


def cache_policy_for_format(format_name: str) -> CachePolicy:
    """The prompt-cache rules of a session's own agent's provider (its strategy's)."""
    policy: CachePolicy = _BY_NAME[strategy_for_format(format_name)].cache_policy
    return policy


def summary_structure(name: str) -> SummaryStructure:
    """The sections a strategy's summary prompt asks for and their heading rule (none for an unknown name)."""
    cls = _BY_NAME.get(name)
    structure: SummaryStructure = cls.summary_structure if cls is not None else NO_STRUCTURE
    return structure


@cache
def default_strategy() -> Strategy:
    """The first strategy with its defaults: how sizes are counted where no session names its agent."""
    return build_strategy(STRATEGY_NAMES[0], info=None, overrides={})


@cache
def raw_payload_keys() -> frozenset[str]:
    """Every key under which a parser or a strategy keeps an agent's raw record in ``Message.data``."""
    from compaction.formats.registry import profiles

    return frozenset(key for _, _, profile in profiles() for key in profile.raw_payload_keys)


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


def parameter_kinds(name: str) -> dict[str, str]:
    """Each editable parameter's kind, from its declared type: "bool", "int", "float" or "text" (a form field's)."""
    cls = _BY_NAME[name]
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls.params_type)}
    kinds: dict[str, str] = {}
    for key in EDITABLE[name]:
        annotation = fields.get(key, "")
        kinds[key] = next((kind for kind in ("bool", "int", "float") if kind in annotation), "text")
    return kinds


def optional_parameters(name: str) -> frozenset[str]:
    """The editable parameters that may be left unset (``| None``: the agent's own rule decides, by version or
    from the session), which a form offers as a choice and never as a bare checkbox."""
    cls = _BY_NAME[name]
    fields = {f.name: str(f.type) for f in dataclasses.fields(cls.params_type)}
    return frozenset(key for key in EDITABLE[name] if "None" in fields.get(key, ""))


def parameter_specs(name: str) -> dict[str, ParameterSpec]:
    """Each editable parameter's label, unit and what leaving it empty means: the strategy's ``parameters``, or its
    name in words for a parameter the strategy does not describe."""
    declared: Mapping[str, ParameterSpec] = getattr(_BY_NAME[name], "parameters", {})
    return {key: declared.get(key) or ParameterSpec(key.replace("_", " ").capitalize()) for key in EDITABLE[name]}


# A parameter's kind (``parameter_kinds``) in the words an error names it, never a Python type.
_KIND_WORDS = {"int": "a whole number", "float": "a number", "bool": "on or off", "text": "text"}


def parameter_expects(name: str, key: str) -> str:
    """What a parameter takes, in words, under the label and unit the what-if form shows: "Context window
    (context_window) must be a whole number (tokens), or left empty (from the session)"."""
    spec = parameter_specs(name)[key]
    words = _KIND_WORDS[parameter_kinds(name)[key]]
    unit = f" ({spec.unit})" if spec.unit else ""
    empty = f", or left empty ({spec.unset})" if key in optional_parameters(name) else ""
    return f"{spec.label} ({key}) must be {words}{unit}{empty}"


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
            raise ValueError(f"{parameter_expects(name, key)}, not {value!r}.") from None
    session = info or SessionInfo(format=name)
    if session.format != name:
        # Another agent's version numbers mean nothing to this strategy's version rules: it takes its own defaults.
        session = dataclasses.replace(session, agent_version=None)
    return cls.from_session(session, clean)
