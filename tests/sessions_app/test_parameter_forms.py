"""The what-if and preview forms from each strategy's parameter spec: labels and units in words, numbers as number
fields, a yes/no as a checkbox (or a choice when the agent's own rule may decide), the default beside each field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from compaction.strategies.registry import EDITABLE, STRATEGIES, STRATEGY_NAMES, parameter_specs
from sessions_app import models, services
from sessions_app.selectors.parameters import parameter_fields
from tests.helpers.claude_code_lines import small_session


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_editable_parameter_is_described_by_its_strategy(strategy: str) -> None:
    declared = next(cls for cls in STRATEGIES if cls.name == strategy).parameters
    assert set(declared) == set(EDITABLE[strategy])
    assert all(spec.label and "_" not in spec.label for spec in parameter_specs(strategy).values())


def test_fields_are_typed_with_labels_units_and_defaults() -> None:
    fields = {
        f["name"]: f
        for f in parameter_fields(
            strategy="claude-code",
            values={"autocompact_enabled": "off"},
            defaults={"autocompact_enabled": True, "auto_compact_window": 200_000, "legacy_microcompact": None},
            prefix="claude-code.",
        )
    }
    enabled = fields["claude-code.autocompact_enabled"]
    assert (enabled["kind"], enabled["checked"], enabled["default"]) == ("checkbox", False, "on")
    window = fields["claude-code.auto_compact_window"]
    assert (window["kind"], window["unit"], window["value"], window["default"]) == (
        "number",
        "tokens",
        "200000",
        "200,000",
    )
    legacy = fields["claude-code.legacy_microcompact"]  # None: the version decides, so a choice and not a checkbox
    assert (
        legacy["kind"] == "choice" and legacy["choices"][0]["selected"] and "version" in legacy["choices"][0]["label"]
    )


@pytest.mark.django_db
def test_the_what_if_form_shows_words_not_names_nor_python_values(client_in: Client, tmp_path: Path) -> None:
    services.import_paths(paths=[small_session(tmp_path)])
    session = models.Session.objects.get()
    page = client_in.get(f"/sessions/{session.pk}/timeline/").content.decode()
    form = page.split('id="timeline-form"')[1].split("</form>")[0]
    text = re.sub(r"<[^>]+>", " ", form)
    assert "Auto-compact window" in text and "tokens" in text and "(default " in text
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text)  # no snake_case name shown
    assert not re.search(r"\b(None|True|False)\b", text) and not re.search(r'value="(None|True|False)"', form)
    assert 'type="checkbox" name="claude-code.autocompact_enabled" value="on" checked' in form
    assert 'name="khaelor.proactive_ratio" value="0.8" type="number" step="any"' in form
    preview = client_in.get(f"/sessions/{session.pk}/preview/", {"strategy": "khaelor"}).content.decode()
    assert "Tail kept at a compaction" in preview and "protect_tail_tokens<" not in preview
