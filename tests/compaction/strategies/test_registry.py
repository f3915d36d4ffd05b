"""The strategy registry: a wrong parameter value is refused in the words the what-if form uses."""

from __future__ import annotations

import pytest

from compaction.strategies.registry import EDITABLE, STRATEGY_NAMES, build_strategy, parameter_kinds


def test_a_parameter_of_the_wrong_kind_is_named_by_its_label_and_what_it_takes_in_words() -> None:
    # Was "Parameter context_window must be a int | None, not 'lots'.": a Python type, not words.
    with pytest.raises(ValueError) as refused:
        build_strategy("khaelor", info=None, overrides={"context_window": "lots"})
    assert str(refused.value) == (
        "Context window (context_window) must be a whole number (tokens), or left empty (from the session), not 'lots'."
    )
    with pytest.raises(ValueError, match=r"^Compacts early at \(proactive_ratio\) must be a number \("):
        build_strategy("khaelor", info=None, overrides={"proactive_ratio": "most"})


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_no_refusal_names_a_python_type(name: str) -> None:
    for key in EDITABLE[name]:
        if parameter_kinds(name)[key] not in ("int", "float"):
            continue  # any text is text, and any text is read as on or off
        with pytest.raises(ValueError) as refused:
            build_strategy(name, info=None, overrides={key: "x1"})
        message = str(refused.value)
        assert f"({key}) must be a " in message and "int" not in message and "float" not in message
        assert "None" not in message
