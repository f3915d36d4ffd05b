"""Context windows, output limits and Claude Code's compaction thresholds, per model and agent version.

Everything here mirrors Claude Code's own tables and formulas (v2.1.88 source, ``utils/context.ts`` and
``services/compact/autoCompact.ts``), as collected in docs/compaction/claude-code.md §1. Where older
versions differ, §1.8 of that document is the source; where it is silent we say so and flag the
result as an assumption.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import re

from compaction.thresholds import Thresholds

# docs/compaction/claude-code.md §1.2: MODEL_CONTEXT_WINDOW_DEFAULT (utils/context.ts:9).
DEFAULT_CONTEXT_WINDOW = 200_000
# §1.2/§1.3: the 1M window (`[1m]` suffix, `context-1m-2025-08-07` beta, native-1M models).
ONE_MILLION_CONTEXT_WINDOW = 1_000_000

# §1.3 changelog notes: models that ship with a native 1M window (no `[1m]` needed): Opus 4.7 (v2.1.117),
# Sonnet 5 (v2.1.197), Opus 5 (v2.1.219). Opus 4.6's 1M is plan-dependent (v2.1.75), so it is not here:
# for it the window is inferred from observed usage.
NATIVE_ONE_MILLION_MODELS = ("opus-4-7", "sonnet-5", "opus-5")

# §1.4 getModelMaxOutputTokens: (substring of the canonical name, default, upper limit). Order matters:
# the first match wins, so the more specific names come first (opus-4-6 before opus-4).
MODEL_OUTPUT_LIMITS: tuple[tuple[str, int, int], ...] = (
    ("opus-4-6", 64_000, 128_000),
    ("sonnet-4-6", 32_000, 128_000),
    ("opus-4-5", 32_000, 64_000),
    ("sonnet-4", 32_000, 64_000),
    ("haiku-4", 32_000, 64_000),
    ("opus-4-1", 32_000, 32_000),
    ("opus-4", 32_000, 32_000),
    ("3-7-sonnet", 32_000, 64_000),
    ("3-5-sonnet", 8_192, 8_192),
    ("3-5-haiku", 8_192, 8_192),
    ("claude-3-sonnet", 8_192, 8_192),
    ("claude-3-opus", 4_096, 4_096),
    ("claude-3-haiku", 4_096, 4_096),
)
# §1.2: MAX_OUTPUT_TOKENS_DEFAULT / _UPPER_LIMIT for every other model (context.ts).
DEFAULT_MAX_OUTPUT_TOKENS = 32_000
DEFAULT_MAX_OUTPUT_UPPER_LIMIT = 64_000

# §1.2 constants of autoCompact.ts (v2.1.88, lines 30 and 62-65).
MAX_OUTPUT_TOKENS_FOR_SUMMARY = 20_000  # "Based on p99.99 of compact summary output being 17,387 tokens."
AUTOCOMPACT_BUFFER_TOKENS = 13_000
WARNING_THRESHOLD_BUFFER_TOKENS = 20_000
ERROR_THRESHOLD_BUFFER_TOKENS = 20_000  # equal to the warning buffer in v2.1.88, so the lines coincide
MANUAL_COMPACT_BUFFER_TOKENS = 3_000

Version = tuple[int, int, int]

# §1.8 version history. ≤ 0.2.46 had no autocompact ([CL] 0.2.47 introduced it).
AUTOCOMPACT_SINCE: Version = (0, 2, 47)
# §1.8: from ~1.0.x to 2.1.20 the reserve was the full default max output; [CL] 2.1.21 "Fixed auto-compact
# triggering too early on models with large output token limits" introduced min(maxOutput, 20K). The
# formats doc (§7) saw ~155K preTokens up to 2.1.22 in real files; we keep the documented 2.1.21 cut-over
# (2.1.21 and 2.1.22 shipped the same day) and note the discrepancy in the report.
SUMMARY_RESERVE_CAP_SINCE: Version = (2, 1, 21)
# §1.8: the early (0.2.47 → ~1.0.x) formula was not recovered; we extrapolate the full-reserve formula.
EARLY_FORMULA_UNKNOWN_BEFORE: Version = (1, 0, 0)
# §1.8: 2.1.128 "Fixed sessions on 1M-context models with a smaller autocompact window being falsely blocked":
# from then on the blocking limit ignores CLAUDE_CODE_AUTO_COMPACT_WINDOW.
BLOCKING_USES_RAW_WINDOW_SINCE: Version = (2, 1, 128)
# §1.6: 2.1.88 reads CLAUDE_CODE_AUTO_COMPACT_WINDOW with a plain parseInt; later versions clamp it to [100K, 1M]
# ([V156], the 2.1.156 reading, the first that shows it; the builds in between are assumed as 2.1.88).
AUTO_COMPACT_WINDOW_CLAMP_SINCE: Version = (2, 1, 156)
AUTO_COMPACT_WINDOW_MIN = 100_000
AUTO_COMPACT_WINDOW_MAX = 1_000_000
# The version whose source we have (docs §0 [S88]); used when the transcript does not say.
REFERENCE_VERSION: Version = (2, 1, 88)

_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(version: str | None) -> Version | None:
    """``"2.1.144"`` → (2, 1, 144); tolerant of prefixes/suffixes ("v2.0.76", "2.1.7 (Claude Code)"); None if absent."""
    if not version:
        return None
    match = _VERSION_RE.search(version)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def _canonical(model: str | None) -> str:
    return (model or "").strip().lower()


def context_window(*, model: str | None, observed_max: int = 0) -> int:
    """The raw window Claude Code uses for ``model`` (docs §1.3).

    The JSONL model id never carries ``[1m]`` (§1.3 caveat), so a recorded context above 200K (usage or a
    boundary's preTokens, passed as ``observed_max``) proves a 1M window.
    """
    name = _canonical(model)
    if "[1m]" in name:
        return ONE_MILLION_CONTEXT_WINDOW
    if any(marker in name for marker in NATIVE_ONE_MILLION_MODELS):
        return ONE_MILLION_CONTEXT_WINDOW
    if observed_max > DEFAULT_CONTEXT_WINDOW:
        return ONE_MILLION_CONTEXT_WINDOW
    return DEFAULT_CONTEXT_WINDOW


def _output_limits(model: str | None) -> tuple[int, int]:
    name = _canonical(model)
    for marker, default, upper in MODEL_OUTPUT_LIMITS:
        if marker in name:
            return default, upper
    return DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_MAX_OUTPUT_UPPER_LIMIT


def max_output_tokens(model: str | None) -> int:
    """Claude Code's default max output for ``model`` (§1.4): the number its summary reserve is based on."""
    return _output_limits(model)[0]


def max_output_upper_limit(model: str | None) -> int:
    """The most ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` may raise the output to (§1.4)."""
    return _output_limits(model)[1]


def claude_code_thresholds(
    *,
    model: str | None,
    version: str | None,
    observed_max: int = 0,
    autocompact_enabled: bool = True,
    max_output_override: int | None = None,
    pct_override: float | None = None,
    auto_compact_window: int | None = None,
    blocking_override: int | None = None,
) -> Thresholds:
    """Claude Code's token lines for one model and agent version: the single place the formula lives.

    Formula (v2.1.88 ``autoCompact.ts``, docs/compaction/claude-code.md §1.1):
        reserve    = min(maxOutput(model), 20_000)          # before 2.1.21: the full maxOutput (§1.8)
        window     = contextWindow(model)                   # capped by CLAUDE_CODE_AUTO_COMPACT_WINDOW
        effective  = window − reserve
        autocompact= effective − 13_000                     # PCT override can only lower it
        warning    = (autocompact if enabled else effective) − 20_000
        blocking   = effective − 3_000                      # or CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE
    The optional keywords are the env knobs of §1.6: ``max_output_override`` = CLAUDE_CODE_MAX_OUTPUT_TOKENS,
    ``pct_override`` = CLAUDE_AUTOCOMPACT_PCT_OVERRIDE, ``auto_compact_window`` = CLAUDE_CODE_AUTO_COMPACT_WINDOW,
    ``blocking_override`` = CLAUDE_CODE_BLOCKING_LIMIT_OVERRIDE, ``autocompact_enabled`` = not DISABLE_AUTO_COMPACT.
    """
    parsed = parse_version(version)
    effective_version = parsed or REFERENCE_VERSION
    assumption = parsed is None
    notes: list[str] = []

    raw_window = context_window(model=model, observed_max=observed_max)
    window = raw_window
    if auto_compact_window is not None and auto_compact_window > 0:
        if effective_version >= AUTO_COMPACT_WINDOW_CLAMP_SINCE:
            clamped = min(max(auto_compact_window, AUTO_COMPACT_WINDOW_MIN), AUTO_COMPACT_WINDOW_MAX)
            if clamped != auto_compact_window:
                notes.append(f"auto_compact_window {auto_compact_window:,} clamped to {clamped:,} (§1.6)")
            auto_compact_window = clamped
        window = min(window, auto_compact_window)

    # §1.4: the override replaces the default, bounded by the model's upper limit.
    max_output = max_output_tokens(model)
    if max_output_override is not None and max_output_override > 0:
        max_output = min(max_output_override, max_output_upper_limit(model))

    if effective_version >= SUMMARY_RESERVE_CAP_SINCE:
        reserve = min(max_output, MAX_OUTPUT_TOKENS_FOR_SUMMARY)
        notes.append(f"reserve=min({max_output}, {MAX_OUTPUT_TOKENS_FOR_SUMMARY})")
    else:
        reserve = max_output
        notes.append(f"reserve={max_output} (full max output before 2.1.21, §1.8)")
        if effective_version < EARLY_FORMULA_UNKNOWN_BEFORE:
            assumption = True
            notes.append("early formula not recovered; extrapolated (§1.8)")

    effective = window - reserve
    raw_effective = raw_window - reserve

    autocompact: int | None = None
    if autocompact_enabled and effective_version >= AUTOCOMPACT_SINCE:
        autocompact = effective - AUTOCOMPACT_BUFFER_TOKENS
        if pct_override is not None and 0 < pct_override <= 100:
            # §1.6: a percentage of the effective window that can only lower the threshold.
            autocompact = min(int(effective * pct_override / 100), autocompact)
            notes.append(f"pct_override={pct_override:g}")
    elif effective_version < AUTOCOMPACT_SINCE:
        notes.append("no autocompact before 0.2.47 (§1.8)")

    warning_base = autocompact if autocompact is not None else effective
    warning = warning_base - WARNING_THRESHOLD_BUFFER_TOKENS

    blocking_base = effective
    if window != raw_window and effective_version >= BLOCKING_USES_RAW_WINDOW_SINCE:
        blocking_base = raw_effective
    blocking = blocking_base - MANUAL_COMPACT_BUFFER_TOKENS
    if blocking_override is not None and blocking_override > 0:
        blocking = blocking_override

    version_label = (
        ".".join(map(str, parsed)) if parsed else f"unknown (assumed {'.'.join(map(str, REFERENCE_VERSION))})"
    )
    source = (
        f"Claude Code {version_label}, autoCompact.ts formula (docs/compaction/claude-code.md §1.1, §1.8): "
        f"window={window}, " + ", ".join(notes)
    )
    return Thresholds(
        window=window,
        effective_window=effective,
        autocompact=autocompact,
        warning=warning,
        blocking=blocking,
        source=source,
        assumption=assumption,
    )
