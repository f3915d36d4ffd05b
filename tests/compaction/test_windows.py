"""Context windows, output limits and Claude Code thresholds.

Expected numbers are the rows of docs/compaction/claude-code.md §1.4 (output table), §1.5 (derived
thresholds, v2.1.88) and §1.8 (version history); each test names its row.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.windows import (
    claude_code_thresholds,
    context_window,
    max_output_tokens,
    max_output_upper_limit,
    parse_version,
)

OPUS_45 = "claude-opus-4-5-20251101"
SONNET_45 = "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        ("", None),
        ("garbage", None),
        ("1.0.17", (1, 0, 17)),
        ("2.1.144", (2, 1, 144)),
        ("v2.0.76", (2, 0, 76)),
        ("2.1.7 (Claude Code)", (2, 1, 7)),
        ("2.1", (2, 1, 0)),
    ],
)
def test_parse_version_is_robust(raw: str | None, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(raw) == expected


def test_versions_compare_numerically_not_as_strings() -> None:
    assert parse_version("2.1.144") > parse_version("2.1.21") > parse_version("2.1.7")  # type: ignore[operator]


@pytest.mark.parametrize(
    ("model", "default", "upper"),
    [  # §1.4 table
        ("claude-opus-4-6", 64_000, 128_000),
        ("claude-sonnet-4-6", 32_000, 128_000),
        (OPUS_45, 32_000, 64_000),
        (SONNET_45, 32_000, 64_000),
        ("claude-sonnet-4-20250514", 32_000, 64_000),
        ("claude-haiku-4-5", 32_000, 64_000),
        ("claude-opus-4-1-20250805", 32_000, 32_000),
        ("claude-opus-4-20250514", 32_000, 32_000),
        ("claude-3-7-sonnet-20250219", 32_000, 64_000),
        ("claude-3-5-sonnet-20241022", 8_192, 8_192),
        ("claude-3-5-haiku-20241022", 8_192, 8_192),
        ("claude-3-sonnet-20240229", 8_192, 8_192),
        ("claude-3-opus-20240229", 4_096, 4_096),
        ("claude-3-haiku-20240307", 4_096, 4_096),
        ("some-gateway-model", 32_000, 64_000),
        (None, 32_000, 64_000),
    ],
)
def test_max_output_table(model: str | None, default: int, upper: int) -> None:
    assert max_output_tokens(model) == default
    assert max_output_upper_limit(model) == upper


@pytest.mark.parametrize(
    ("model", "observed_max", "expected"),
    [
        (OPUS_45, 0, 200_000),  # §1.3 step 6
        ("claude-opus-4-6", 199_999, 200_000),
        ("claude-opus-4-6", 200_001, 1_000_000),  # §1.3 caveat: usage above 200K proves 1M
        ("claude-opus-4-7", 325_602, 1_000_000),  # SOURCES.md: entireskills_4982335ad847 reaches 325,602
        ("claude-opus-4-7", 0, 1_000_000),  # §1.3 changelog: Opus 4.7 native 1M
        ("opus[1m]", 0, 1_000_000),  # §1.3 step 2
        ("claude-sonnet-4-6[1m]", 0, 1_000_000),
        (None, 0, 200_000),
    ],
)
def test_context_window(model: str | None, observed_max: int, expected: int) -> None:
    assert context_window(model=model, observed_max=observed_max) == expected


def _lines(model: str | None, version: str | None, **knobs: object) -> tuple[int | None, ...]:
    t = claude_code_thresholds(model=model, version=version, **knobs)  # type: ignore[arg-type]
    return t.effective_window, t.autocompact, t.warning, t.blocking


@pytest.mark.parametrize(
    ("model", "knobs", "expected"),
    [  # §1.5 rows: (effective, autocompact, warning, blocking)
        (OPUS_45, {}, (180_000, 167_000, 147_000, 177_000)),
        ("claude-opus-4-6", {}, (180_000, 167_000, 147_000, 177_000)),
        (OPUS_45, {"max_output_override": 8_000}, (192_000, 179_000, 159_000, 189_000)),
        ("claude-3-5-sonnet-20241022", {}, (191_808, 178_808, 158_808, 188_808)),
        ("claude-3-opus-20240229", {}, (195_904, 182_904, 162_904, 192_904)),
        ("claude-opus-4-6[1m]", {}, (980_000, 967_000, 947_000, 977_000)),
        (OPUS_45, {"pct_override": 50}, (180_000, 90_000, 70_000, 177_000)),
        (OPUS_45, {"pct_override": 80}, (180_000, 144_000, 124_000, 177_000)),
        (OPUS_45, {"pct_override": 95}, (180_000, 167_000, 147_000, 177_000)),  # cannot raise
        (OPUS_45, {"auto_compact_window": 100_000}, (80_000, 67_000, 47_000, 77_000)),
        ("claude-opus-4-6[1m]", {"auto_compact_window": 400_000}, (380_000, 367_000, 347_000, 377_000)),
        (OPUS_45, {"autocompact_enabled": False}, (180_000, None, 160_000, 177_000)),
    ],
)
def test_v2_1_88_table(model: str, knobs: dict[str, object], expected: tuple[int | None, ...]) -> None:
    assert _lines(model, "2.1.88", **knobs) == expected


def test_one_million_window_detected_from_usage() -> None:
    t = claude_code_thresholds(model="claude-opus-4-6", version="2.1.88", observed_max=325_602)
    assert (t.window, t.autocompact) == (1_000_000, 967_000)  # §1.5 1M row


@pytest.mark.parametrize(
    ("version", "model", "autocompact"),
    [
        ("2.1.21", OPUS_45, 167_000),  # §1.8: min(maxOutput, 20K) from 2.1.21
        ("2.1.49", "claude-opus-4-6", 167_000),
        ("2.1.144", "claude-opus-4-6", 167_000),
        ("2.1.20", OPUS_45, 155_000),  # §1.8: full 32K reserve → 155K
        ("2.1.14", SONNET_45, 155_000),
        ("2.1.7", OPUS_45, 155_000),
        ("2.0.76", OPUS_45, 155_000),
        ("1.0.17", "claude-sonnet-4-20250514", 155_000),
        ("2.1.20", "claude-opus-4-6", 123_000),  # §1.8: 64K output → buffer 77K
    ],
)
def test_version_history(version: str, model: str, autocompact: int) -> None:
    assert claude_code_thresholds(model=model, version=version).autocompact == autocompact


def test_context_buffer_shrinks_from_45k_to_33k_at_2_1_21() -> None:
    # §1.8 / §1.5: "/context buffer 45K" before, "Autocompact buffer: 33k" after.
    before = claude_code_thresholds(model=OPUS_45, version="2.1.20")
    after = claude_code_thresholds(model=OPUS_45, version="2.1.21")
    assert before.window - (before.autocompact or 0) == 45_000
    assert after.window - (after.autocompact or 0) == 33_000


def test_no_autocompact_before_0_2_47() -> None:
    t = claude_code_thresholds(model=OPUS_45, version="0.2.46")
    assert t.autocompact is None
    assert claude_code_thresholds(model=OPUS_45, version="0.2.47").autocompact is not None


def test_unknown_version_uses_reference_formula_and_says_so() -> None:
    for version in (None, "not-a-version"):
        t = claude_code_thresholds(model=OPUS_45, version=version)
        assert t.autocompact == 167_000
        assert t.assumption is True
    assert claude_code_thresholds(model=OPUS_45, version="2.1.88").assumption is False
    assert "§1.1" in claude_code_thresholds(model=OPUS_45, version="2.1.88").source


def test_blocking_ignores_auto_compact_window_from_2_1_128() -> None:
    # §1.8 2.1.128: "blocking now uses the raw cap"
    old = claude_code_thresholds(model="claude-opus-4-6[1m]", version="2.1.88", auto_compact_window=400_000)
    new = claude_code_thresholds(model="claude-opus-4-6[1m]", version="2.1.128", auto_compact_window=400_000)
    assert old.blocking == 377_000
    assert new.blocking == 977_000
    assert new.autocompact == old.autocompact == 367_000


@pytest.mark.parametrize(
    ("version", "pre_tokens"),
    [  # observed auto preTokens (format doc §7, compaction doc §0 [OBS]); each must be at or above its line
        ("2.0.76", 155_250),
        ("2.1.7", 155_066),
        ("2.1.14", 155_068),
        ("2.1.20", 176_700),
        ("2.1.37", 167_189),
        ("2.1.39", 167_220),
        ("2.1.49", 167_038),
    ],
)
def test_observed_auto_compactions_are_at_or_above_threshold(version: str, pre_tokens: int) -> None:
    line = claude_code_thresholds(model=OPUS_45, version=version).autocompact
    assert line is not None
    assert line <= pre_tokens


def test_old_preTokens_would_not_fire_under_new_formula() -> None:
    # 155,066 (2.1.7) is below the 2.1.21+ line, so the version switch is needed to explain it.
    line = claude_code_thresholds(model=OPUS_45, version="2.1.21").autocompact
    assert line is not None and line > 155_066


@given(
    window_model=st.sampled_from([OPUS_45, "claude-opus-4-6", "claude-3-opus-20240229", "claude-opus-4-6[1m]"]),
    version=st.sampled_from([None, "1.0.17", "2.0.76", "2.1.20", "2.1.21", "2.1.88", "2.1.144"]),
    override=st.one_of(st.none(), st.integers(min_value=1_000, max_value=200_000)),
)
def test_formula_consistency(window_model: str, version: str | None, override: int | None) -> None:
    t = claude_code_thresholds(model=window_model, version=version, max_output_override=override)
    assert t.effective_window is not None and t.autocompact is not None
    assert t.warning is not None and t.blocking is not None
    assert t.effective_window - t.autocompact == 13_000  # AUTOCOMPACT_BUFFER_TOKENS
    assert t.autocompact - t.warning == 20_000  # WARNING_THRESHOLD_BUFFER_TOKENS
    assert t.effective_window - t.blocking == 3_000  # MANUAL_COMPACT_BUFFER_TOKENS
    reserve = t.window - t.effective_window
    assert 0 < reserve <= max_output_upper_limit(window_model)
    if parse_version(version) is None or parse_version(version) >= (2, 1, 21):  # type: ignore[operator]
        assert reserve <= 20_000
