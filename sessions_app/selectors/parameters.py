"""A strategy's editable parameters as form fields, from its parameter spec (``compaction.agents.ParameterSpec``):
a label in words and its unit, a number field for a number, a checkbox for a yes/no, a choice for a yes/no that may
be left to the agent's own rule, and the default beside each; never a snake_case name nor a Python value."""

from __future__ import annotations

from typing import Any

from django.contrib.humanize.templatetags.humanize import intcomma

from compaction.strategies.registry import optional_parameters, parameter_kinds, parameter_specs

_TRUE = ("1", "true", "yes", "on")


def parameter_fields(
    *, strategy: str, values: dict[str, Any], defaults: dict[str, Any], prefix: str = ""
) -> list[dict[str, Any]]:
    """One field per editable parameter of ``strategy``: ``values`` the ones in force (a submitted text or the
    strategy's value), ``defaults`` the strategy's own for this session; ``prefix`` names the fields apart
    ("codex." on the what-if form, where every strategy has its fields)."""
    kinds = parameter_kinds(strategy)
    optional = optional_parameters(strategy)
    fields = []
    for key, spec in parameter_specs(strategy).items():
        value, default = values.get(key, defaults.get(key)), defaults.get(key)
        field: dict[str, Any] = {
            "name": f"{prefix}{key}",
            "label": spec.label,
            "unit": spec.unit,
            "default": _default_text(default, kind=kinds[key], unset=spec.unset),
        }
        if kinds[key] == "bool":
            current = None if value in (None, "") else str(value).lower() in _TRUE
            if key in optional:
                field["kind"] = "choice"
                field["choices"] = [
                    {"value": "", "label": spec.unset, "selected": current is None},
                    {"value": "on", "label": "on", "selected": current is True},
                    {"value": "off", "label": "off", "selected": current is False},
                ]
            else:
                field["kind"] = "checkbox"
                field["checked"] = bool(current)
        else:
            field["kind"] = "number" if kinds[key] in ("int", "float") else "text"
            field["step"] = "any" if kinds[key] == "float" else "1"
            field["value"] = "" if value is None else str(value)
        fields.append(field)
    return fields


def _default_text(value: Any, *, kind: str, unset: str) -> str:
    if value is None or value == "":
        return unset
    if kind == "bool":
        return "on" if str(value).lower() in _TRUE else "off"
    if kind == "int" and isinstance(value, int):
        return intcomma(value, use_l10n=False)
    return str(value)
