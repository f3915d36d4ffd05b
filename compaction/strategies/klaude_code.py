"""klaude-code 2.8.1's context compaction, re-implemented from its documented behaviour.

Source of every rule: docs/formats/klaude-code.md §3 (klaude_code/core/compaction/ of the
2.8.0/2.8.1 wheels). Decisions must equal shared/samples/klaude-code/expected/ exactly.

Contract for ``messages``: pass **every history item klaude decoded, in file order** - what
``compaction.formats.klaude_code.history_messages(records)`` returns (Messages whose
``data["index"]`` is not None; that drops only LineErrors and unknown-type lines, which klaude's
loader skips too). Then a position in ``messages`` *is* klaude's history index, so
``CompactionEntry.first_kept_index`` can be used as a position directly, and ``Cut.start`` /
``Cut.end`` / ``Cut.first_kept`` are all klaude indices. Non-message items (StreamErrorItem,
TaskMetadataItem, CompactionEntry) must stay in the list: klaude indexes them and skips them itself.

``Cut`` for klaude: ``messages[:start]`` is what earlier compactions already replaced (klaude's
``base_start_index``; 0 before the first compaction), ``messages[start:end]`` is summarised and
``messages[end:]`` is kept, so ``end == first_kept``.

Sections (§) refer to docs/formats/klaude-code.md.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any

import orjson

from compaction.agents import ParameterSpec, SummaryStructure
from compaction.prompt_cache import ANTHROPIC_CACHE, CachePolicy
from compaction.strategies.base import (
    Cut,
    CutRefused,
    Decision,
    ExportInput,
    PlannedRequest,
    ReplayRules,
    SummarizerPlan,
    Thresholds,
    point_timestamp,
    recorded_thresholds,
    sent_to_model,
    written_text,
)
from compaction.transcript import Message, SessionInfo, parse_timestamp

# --- constants (docs/formats/klaude-code.md; wheel paths under klaude_code/) -------------------

KLAUDE_VERSION = "2.8.1"
# §3.2 core/compaction/compaction.py _resolve_compaction_config
DEFAULT_RESERVE_TOKENS = 16384
DEFAULT_KEEP_RECENT_TOKENS = 20000
MIN_RESERVE_TOKENS = 2048
MIN_KEEP_RECENT_TOKENS = 4096
RESERVE_FRACTION = 0.25
KEEP_RECENT_FRACTION = 0.35
MIN_SUMMARY_TOKENS = 1024
SUMMARY_FRACTION_OF_RESERVE = 0.8
# §3.4 _DEFAULT_IMAGE_TOKENS: added to the *char* count of an image part
IMAGE_CHARS = 1200
# §3.7 _MAX_TOOL_OUTPUT_CHARS / _MAX_TOOL_CALL_CHARS and the truncation marker
MAX_TOOL_OUTPUT_CHARS = 4000
MAX_TOOL_CALL_CHARS = 2000
TRUNCATION_MARKER = "...(truncated)"
# §3.11 kept_items_brief preview length
PREVIEW_CHARS = 30
# §3.3 _get_last_context_tokens skips these stop reasons
UNSUCCESSFUL_STOP_REASONS = frozenset({"aborted", "error"})

# §1.2 the HistoryEvent union in protocol/message.py
USER = "UserMessage"
DEVELOPER = "DeveloperMessage"
SYSTEM = "SystemMessage"
ASSISTANT = "AssistantMessage"
TOOL_RESULT = "ToolResultMessage"
STREAM_ERROR = "StreamErrorItem"
TASK_METADATA = "TaskMetadataItem"
COMPACTION = "CompactionEntry"
MESSAGE_TYPES = frozenset({USER, DEVELOPER, SYSTEM, ASSISTANT, TOOL_RESULT})
HISTORY_TYPES = MESSAGE_TYPES | {STREAM_ERROR, TASK_METADATA, COMPACTION}
IMAGE_PART_TYPES = frozenset({"image_url", "image_file"})

# §3.13 core/compaction/overflow.py; all re.IGNORECASE, matched with search()
OVERFLOW_PATTERNS: tuple[str, ...] = (
    r"prompt is too long",
    r"exceeds the context window",
    r"input token count.*exceeds the maximum",
    r"maximum prompt length is \d+",
    r"reduce the length of the messages",
    r"maximum context length is \d+ tokens",
    r"exceeds the limit of \d+",
    r"exceeds the available context size",
    r"greater than the context length",
    r"context length exceeded",
    r"too many tokens",
    r"token limit exceeded",
)
# §3.13 anchored at the start: "<ExceptionClass> <message>" texts never match it
STATUS_CODE_PATTERN = r"^4(00|13|29)\s*(status code)?\s*\(no body\)"
_OVERFLOW_RES = tuple(re.compile(p, re.IGNORECASE) for p in OVERFLOW_PATTERNS)
_STATUS_CODE_RE = re.compile(STATUS_CODE_PATTERN, re.IGNORECASE)

# §2 config/assets/builtin_config.yaml context_limit per model (substring of the model id)
BUILTIN_CONTEXT_LIMITS: tuple[tuple[str, int], ...] = (
    ("claude", 200000),
    ("gpt-5.2", 400000),
    ("gpt-5.1-codex-max", 400000),
    ("gemini-3", 1048576),
    ("kimi-k2-thinking", 262144),
    ("deepseek-reasoner", 128000),
    ("minimax-m2.1", 204800),
    ("glm-4.7", 200000),
    ("grok-4.1-fast", 2000000),
    ("gpt-oss-120b", 131072),
)

# --- prompts, verbatim (§3.8 core/compaction/prompts.py) ---------------------------------------
SUMMARIZATION_SYSTEM_PROMPT = """\
You are a context summarization assistant. Your task is to read a conversation between a user and an AI coding assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary."""  # noqa: E501

# The headings of SUMMARIZATION_PROMPT (## level; "Progress" holds ### Done / In Progress / Blocked).
SUMMARY_SECTIONS = ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context")

SUMMARIZATION_PROMPT = """\
The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages."""  # noqa: E501

UPDATE_SUMMARIZATION_PROMPT = """\
The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages."""  # noqa: E501

TASK_PREFIX_SUMMARIZATION_PROMPT = """\
This is the PREFIX of a task that was too large to keep. The SUFFIX (recent work) is retained.

Summarize the prefix to provide context for the retained suffix:

## Original Request
[What did the user ask for in this task?]

## Early Progress
- [Key decisions and work done in the prefix]

## Context for Suffix
- [Information needed to understand the retained recent work]

Be concise. Focus on what's needed to understand the kept suffix."""

COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n"
# §3.9: the split-task heading and the empty-history placeholder changed between 2.8.0 and 2.8.1
SPLIT_TASK_HEADING = {"2.8.0": "**Task Context (split task):**", "2.8.1": "**Task Context (current task):**"}
EMPTY_HISTORY_PLACEHOLDER_2_8_0 = "No prior history."

NOTHING_TO_COMPACT_SMALL = "Nothing to compact (session too small)"  # §3.5
NOTHING_TO_COMPACT_EMPTY = "Nothing to compact (no messages to summarize)"  # §3.6

# Labels for where the threshold check took its tokens (the same words as expected/*.json).
SOURCE_CONTEXT_SIZE = "usage.context_size"
SOURCE_TOTAL_TOKENS = "usage.total_tokens"
SOURCE_ESTIMATE_NO_USAGE = "estimate(get_llm_history) [no usable usage]"
SOURCE_ESTIMATE_STALE = "estimate(get_llm_history) [compaction newer than last usage]"


def is_context_overflow(message: str | None) -> bool:
    """klaude's ``is_context_overflow`` (§3.13): True when the error text says the prompt did not fit."""
    if not message:
        return False
    if _STATUS_CODE_RE.search(message):
        return True
    return any(pattern.search(message) for pattern in _OVERFLOW_RES)


def builtin_context_limit(model: str | None) -> int | None:
    """The builtin ``context_limit`` of a model id (§2), or None when the model is not in the table."""
    if not model:
        return None
    lowered = model.lower()
    for fragment, limit in BUILTIN_CONTEXT_LIMITS:
        if fragment in lowered:
            return limit
    return None


@dataclass(frozen=True, slots=True)
class KlaudeParams:
    """klaude's ``CompactionConfig`` plus the limit it was resolved from.

    ``context_limit`` is the model config's ``context_limit``; None means the config has none, so
    reserve/keep take their defaults and the threshold check falls back to the newest
    ``usage.context_limit`` recorded in the session (§3.3).
    """

    context_limit: int | None = None
    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    max_summary_tokens: int = 13107
    version: str = KLAUDE_VERSION
    # §3.5 step 4 can move the cut onto a ToolResultMessage; False moves it onto the next
    # User/Assistant message instead, so a call is never separated from its result.
    reproduce_reminder_quirk: bool = True

    @classmethod
    def for_limit(
        cls, context_limit: int | None, *, version: str = KLAUDE_VERSION, reproduce_reminder_quirk: bool = True
    ) -> KlaudeParams:
        """``_resolve_compaction_config`` (§3.2): reserve/keep scaled from the limit, then capped."""
        reserve = DEFAULT_RESERVE_TOKENS
        keep = DEFAULT_KEEP_RECENT_TOKENS
        if context_limit is not None and context_limit > 0:
            reserve = min(DEFAULT_RESERVE_TOKENS, max(MIN_RESERVE_TOKENS, int(context_limit * RESERVE_FRACTION)))
            keep = min(
                DEFAULT_KEEP_RECENT_TOKENS, max(MIN_KEEP_RECENT_TOKENS, int(context_limit * KEEP_RECENT_FRACTION))
            )
            max_keep = max(0, context_limit - reserve)
            if max_keep:
                keep = min(keep, max_keep)
        return cls(
            context_limit=context_limit if context_limit and context_limit > 0 else None,
            reserve_tokens=reserve,
            keep_recent_tokens=keep,
            max_summary_tokens=max(MIN_SUMMARY_TOKENS, int(reserve * SUMMARY_FRACTION_OF_RESERVE)),
            version=version,
            reproduce_reminder_quirk=reproduce_reminder_quirk,
        )


@dataclass(slots=True)
class ThresholdCheck:
    """One ``should_compact_threshold`` evaluation and the numbers behind it."""

    context_limit: int | None  # the limit actually compared against (config, else session fallback)
    threshold_tokens: int | None  # context_limit - reserve; compaction when tokens are strictly above
    tokens_for_threshold: int | None
    tokens_source: str
    should_compact_threshold: bool


@dataclass(slots=True)
class SummarizerCall:
    """One summarizer call as klaude builds it (§3.8): one user message made of ``parts``."""

    kind: str  # "history" | "update_history" | "task_prefix"
    system: str
    parts: list[str]
    max_tokens: int
    offline_reply: str | None = None  # the reply in the prompt's own sections, extracted without a model

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class CompactionPlan:
    """What ``run_compaction`` would do on this history; field names follow expected/*.json ``cut``."""

    base_start_index: int
    last_compaction_index: int | None
    raw_cut_index: int
    adjusted_cut_index: int
    type_at_cut: str | None
    can_compact: bool
    error: str | None = None
    split_task: bool | None = None
    task_start_index: int | None = None
    summarized_indices: list[int] = field(default_factory=list)
    task_prefix_indices: list[int] = field(default_factory=list)
    kept_estimated_tokens: int | None = None
    first_kept_index: int | None = None
    tokens_before: int | None = None
    details: dict[str, list[str]] | None = None
    kept_items_brief: list[dict[str, Any]] = field(default_factory=list)
    previous_summary: str | None = None
    requests: list[SummarizerCall] = field(default_factory=list)


# --- the history as klaude sees it ---------------------------------------------------------------


def klaude_created_at(last_line: bytes | None, *, view_time: str | None) -> str:
    """An item's ``created_at`` as klaude writes it, for an item appended after ``last_line``: that line's own.

    klaude writes naive local time (its default is ``datetime.now()``; docs/formats/klaude-code.md §1.2
    "Timestamps"), through pydantic, which leaves out a zero fraction ("2025-01-02T03:04:05", checked with
    klaude-code 2.8.1's CompactionEntry). The zone is nowhere in the file, so the line's text is kept as written;
    ``view_time`` (the point's time as the conversation holds it) only when that line has none, and the export's own
    local time only when no time is known at all.
    """
    written = written_text(last_line, "data", "created_at")
    if written is not None:
        return written
    parsed = parse_timestamp(view_time)
    # parse_timestamp reads a naive time as UTC; dropping that zone gives back the naive value.
    return (parsed.replace(tzinfo=None) if parsed is not None else datetime.now()).isoformat()


def item_type(message: Message) -> str:
    """klaude's class name of a history item; derived from the neutral kind when ``raw_type`` is foreign."""
    if message.raw_type in HISTORY_TYPES:
        return message.raw_type
    if message.kind == "assistant":
        return ASSISTANT
    if message.kind == "tool_result":
        return TOOL_RESULT
    if message.kind == "compact_summary":
        return COMPACTION
    if message.kind in ("prompt", "injected"):
        return USER if message.role == "user" else DEVELOPER
    return TASK_METADATA  # anything else is a non-message item klaude would not count


def item_dict(message: Message) -> dict[str, Any]:
    """The klaude item payload: ``data["item"]`` from the parser, else one rebuilt from the blocks."""
    item = message.data.get("item")
    if isinstance(item, dict):
        return item
    # Rebuilt once per message and kept beside it: one decision reads the history several times, and a
    # reviewer's previews re-read the same (cached) session. Messages are never edited after loading.
    memo = message.data.get("_klaude_item")
    if memo is None:
        memo = message.data["_klaude_item"] = _item_from_blocks(message)
    return memo


def _item_from_blocks(message: Message) -> dict[str, Any]:
    # Only reached for messages that did not come from the klaude parser (tests, other callers).
    kind = item_type(message)
    parts: list[dict[str, Any]] = []
    for block in message.blocks:
        if block.kind == "text":
            parts.append({"type": "text", "text": block.text})
        elif block.kind == "thinking":
            parts.append({"type": "thinking_text", "text": block.text})
        elif block.kind == "tool_use":
            parts.append(
                {
                    "type": "tool_call",
                    "call_id": block.tool_id,
                    "tool_name": block.tool_name,
                    "arguments_json": block.text,
                }
            )
        elif block.kind == "image":
            parts.append({"type": "image_url", "url": block.text})
    item: dict[str, Any] = {"parts": parts}
    if kind == TOOL_RESULT:
        result = next((b for b in message.blocks if b.kind == "tool_result"), None)
        item["output_text"] = result.text if result else ""
        item["tool_name"] = result.tool_name if result else ""
        item["call_id"] = result.tool_id if result else None
        item["parts"] = [p for p in parts if p["type"] == "image_url"]
    elif kind == ASSISTANT:
        usage = message.usage
        item["stop_reason"] = message.data.get("stop_reason")
        item["usage"] = None if usage is None else {"context_size": usage.context, "context_limit": None}
    elif kind == COMPACTION:
        item["summary"] = message.text
        item["first_kept_index"] = int(message.data.get("first_kept_index") or 0)
        item["details"] = message.data.get("details")
    return item


class _History:
    """Item types and payloads of a message list, read once per decision."""

    __slots__ = ("types", "items")

    def __init__(self, messages: Sequence[Message]) -> None:
        self.types = [item_type(m) for m in messages]
        self.items = [item_dict(m) for m in messages]
        for position, message in enumerate(messages):
            index = message.data.get("index")
            if index is not None and index != position:
                raise ValueError(
                    f"messages[{position}] is klaude history index {index}: pass every history item in file order"
                )


def _parts(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = item.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text_parts_joined(item: Mapping[str, Any]) -> str:
    # protocol/message.py join_text_parts concatenates TextParts with no separator.
    return "".join(str(p.get("text") or "") for p in _parts(item) if p.get("type") == "text")


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def estimate_item_tokens(kind: str, item: Mapping[str, Any]) -> int:
    """klaude's ``_estimate_tokens`` (§3.4): ceil(chars / 4), at least 1; 0 for non-message items."""
    if kind not in MESSAGE_TYPES:
        return 0
    chars = 0
    for part in _parts(item):
        part_type = part.get("type")
        if part_type == "text" or (part_type == "thinking_text" and kind == ASSISTANT):
            chars += len(_string(part.get("text")))
        elif part_type == "tool_call" and kind == ASSISTANT:
            chars += len(_string(part.get("tool_name"))) + len(_string(part.get("arguments_json")))
        elif part_type in IMAGE_PART_TYPES and kind in (USER, TOOL_RESULT):
            chars += IMAGE_CHARS
    if kind == TOOL_RESULT:
        chars += len(_string(item.get("output_text")))
    return max(1, (chars + 3) // 4)


def _usage_tokens(item: Mapping[str, Any]) -> int | None:
    """``context_size``, else ``total_tokens`` of a successful AssistantMessage (§3.3).

    ``total_tokens`` is a pydantic computed field of protocol/model.py ``Usage`` (``input_tokens + output_tokens``):
    the value stored in the line is ignored when klaude loads it, so it is recomputed here too.
    """
    if item.get("stop_reason") in UNSUCCESSFUL_STOP_REASONS:
        return None
    usage = item.get("usage")
    if not isinstance(usage, dict):
        return None
    if usage.get("context_size") is not None:
        return int(usage["context_size"])
    return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)


def _last_usage(history: _History, end: int) -> tuple[int | None, int | None, str]:
    """``_get_last_context_tokens`` over ``history[:end]``: (tokens, position, source)."""
    for position in range(end - 1, -1, -1):
        if history.types[position] != ASSISTANT:
            continue
        item = history.items[position]
        tokens = _usage_tokens(item)
        if tokens is None:
            continue
        usage = item["usage"]
        source = SOURCE_CONTEXT_SIZE if usage.get("context_size") is not None else SOURCE_TOTAL_TOKENS
        return tokens, position, source
    return None, None, ""


def _last_context_limit(history: _History, end: int) -> int | None:
    """``_get_last_context_limit``: the newest AssistantMessage usage with a ``context_limit``."""
    for position in range(end - 1, -1, -1):
        if history.types[position] != ASSISTANT:
            continue
        usage = history.items[position].get("usage")
        if isinstance(usage, dict) and usage.get("context_limit") is not None:
            return int(usage["context_limit"])
    return None


def _last_compaction(history: _History, end: int) -> int | None:
    for position in range(end - 1, -1, -1):
        if history.types[position] == COMPACTION:
            return position
    return None


def _llm_view(history: _History, end: int) -> list[int | None]:
    """``Session.get_llm_history`` (§3.12) as positions; None stands for the injected summary."""
    last = _last_compaction(history, end)
    if last is None:
        return [p for p in range(end) if history.types[p] != COMPACTION]
    first_kept = int(history.items[last].get("first_kept_index") or 0)
    kept = [p for p in range(max(0, first_kept), end) if history.types[p] != COMPACTION]
    lead = 0
    while lead < len(kept) and history.types[kept[lead]] == TOOL_RESULT:
        lead += 1
    return [None, *kept[lead:]]


def _summary_tokens(summary: str) -> int:
    return estimate_item_tokens(USER, {"parts": [{"type": "text", "text": summary}]})


def _estimate_view(history: _History, view: Sequence[int | None], summary: str) -> int:
    total = 0
    for position in view:
        if position is None:
            total += _summary_tokens(summary)
        else:
            total += estimate_item_tokens(history.types[position], history.items[position])
    return total


def _estimate_range(history: _History, start: int, end: int) -> int:
    return sum(estimate_item_tokens(history.types[p], history.items[p]) for p in range(start, end))


@dataclass(slots=True)
class _ThresholdState:
    """What ``should_compact_threshold`` reads from ``history[:end]``, kept up to date by a forward scan."""

    usage_tokens: int | None = None
    usage_position: int | None = None
    usage_source: str = ""
    session_limit: int | None = None
    last_compaction: int | None = None
    estimate_without_compaction: int = 0  # sum of item estimates; the llm view while no compaction exists

    def advance(self, history: _History, position: int) -> None:
        kind, item = history.types[position], history.items[position]
        self.estimate_without_compaction += estimate_item_tokens(kind, item)
        if kind == COMPACTION:
            self.last_compaction = position
        elif kind == ASSISTANT:
            usage = item.get("usage")
            if isinstance(usage, dict) and usage.get("context_limit") is not None:
                self.session_limit = int(usage["context_limit"])
            tokens = _usage_tokens(item)
            if tokens is not None:
                self.usage_tokens, self.usage_position = tokens, position
                has_size = isinstance(usage, dict) and usage.get("context_size") is not None
                self.usage_source = SOURCE_CONTEXT_SIZE if has_size else SOURCE_TOTAL_TOKENS


def _threshold_check(history: _History, end: int, params: KlaudeParams) -> ThresholdCheck:
    """``should_compact_threshold`` (§3.3) on ``history[:end]``."""
    state = _ThresholdState()
    for position in range(end):
        state.advance(history, position)
    return _threshold_from_state(history, end, params, state)


def _threshold_from_state(history: _History, end: int, params: KlaudeParams, state: _ThresholdState) -> ThresholdCheck:
    limit = params.context_limit or state.session_limit
    tokens, source = state.usage_tokens, state.usage_source
    last_compaction = state.last_compaction
    stale = (
        tokens is not None
        and last_compaction is not None
        and state.usage_position is not None
        and last_compaction > state.usage_position
    )
    if tokens is None or stale:
        source = SOURCE_ESTIMATE_STALE if stale else SOURCE_ESTIMATE_NO_USAGE
        if last_compaction is None:
            tokens = state.estimate_without_compaction
        else:
            summary = _string(history.items[last_compaction].get("summary"))
            tokens = _estimate_view(history, _llm_view(history, end), summary)
    if limit is None:
        return ThresholdCheck(None, None, tokens, source, False)
    threshold = limit - params.reserve_tokens
    return ThresholdCheck(limit, threshold, tokens, source, tokens > threshold)


# --- the cut (§3.5, §3.6) ----------------------------------------------------------------------


def _find_cut_index(history: _History, end: int, base: int, keep_recent_tokens: int) -> int:
    tokens = 0
    for position in range(end - 1, base - 1, -1):
        kind = history.types[position]
        if kind == COMPACTION or kind not in MESSAGE_TYPES:
            continue
        tokens += estimate_item_tokens(kind, history.items[position])
        if tokens >= keep_recent_tokens and kind != TOOL_RESULT:
            return position
    return base


def _adjust_cut_index(history: _History, end: int, cut: int, base: int, *, quirk: bool) -> int:
    types = history.types
    if cut < base:
        return base
    while cut > base and types[cut] == TOOL_RESULT:
        cut -= 1
    if cut < end and types[cut] == TOOL_RESULT:
        forward = cut
        while forward < end and types[forward] == TOOL_RESULT:
            forward += 1
        if forward < end:
            cut = forward
    if cut < end and types[cut] == DEVELOPER:
        # klaude lands on the next User *or ToolResult* message (the reminder quirk, §3.5 step 4);
        # the safe variant takes the next User or Assistant message so a call keeps its results.
        targets = (USER, TOOL_RESULT) if quirk else (USER, ASSISTANT)
        for position in range(cut + 1, end):
            if types[position] in targets:
                return position
        for position in range(cut - 1, -1, -1):
            if types[position] in targets:
                return position
    return cut


def _find_task_start(history: _History, cut: int, base: int) -> int | None:
    for position in range(cut, base - 1, -1):
        if history.types[position] == USER:
            return position
    return None


# --- summarizer input (§3.7, §3.8) ---------------------------------------------------------------


def _truncate(text: str, limit: int) -> str:
    return text[:limit] + TRUNCATION_MARKER if len(text) > limit else text


def serialize_items(kinds: Sequence[str], items: Sequence[Mapping[str, Any]]) -> str:
    """``_serialize_conversation`` (§3.7) over parallel lists of item types and payloads."""
    blocks: list[str] = []
    for kind, item in zip(kinds, items, strict=True):
        if kind == USER:
            text = _text_parts_joined(item)
            if text:
                blocks.append(f"[User]: {text}")
            else:
                images = [
                    _string(p.get("url")) or _string(p.get("file_path"))
                    for p in _parts(item)
                    if p.get("type") in IMAGE_PART_TYPES
                ]
                if images:
                    blocks.append("[User]: image: " + ", ".join(images))
        elif kind == ASSISTANT:
            parts = _parts(item)
            thinking = [_string(p.get("text")) for p in parts if p.get("type") == "thinking_text"]
            texts = [_string(p.get("text")) for p in parts if p.get("type") == "text"]
            calls = [
                f"{_string(p.get('tool_name'))}({_truncate(_string(p.get('arguments_json')), MAX_TOOL_CALL_CHARS)})"
                for p in parts
                if p.get("type") == "tool_call"
            ]
            if thinking:
                blocks.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                blocks.append("[Assistant]: " + "\n".join(texts))
            if calls:
                blocks.append("[Assistant tool calls]: " + "; ".join(calls))
        elif kind == TOOL_RESULT:
            output = _string(item.get("output_text"))
            if output:
                blocks.append("[Tool result]: " + _truncate(output, MAX_TOOL_OUTPUT_CHARS))
        elif kind in (DEVELOPER, SYSTEM):
            text = _text_parts_joined(item)
            if text:  # a message without text (empty or image-only parts) is left out
                blocks.append(("[Developer]: " if kind == DEVELOPER else "[System]: ") + text)
    return "\n\n".join(blocks)


def history_request(
    serialized: str, *, previous_summary: str | None, focus: str | None, max_tokens: int
) -> SummarizerCall:
    """``_generate_summary``'s input (§3.8)."""
    parts = [f"<conversation>\n{serialized}\n</conversation>"]
    if previous_summary:
        parts.append(f"\n\n<previous-summary>\n{previous_summary}\n</previous-summary>")
    instructions = UPDATE_SUMMARIZATION_PROMPT if previous_summary else SUMMARIZATION_PROMPT
    parts.append(f"\n\n<instructions>\n{instructions}\n</instructions>")
    if focus:
        parts.append(f"\n\nAdditional focus: {focus}")
    kind = "update_history" if previous_summary else "history"
    return SummarizerCall(kind=kind, system=SUMMARIZATION_SYSTEM_PROMPT, parts=parts, max_tokens=max_tokens)


def task_prefix_request(serialized: str, *, max_tokens: int) -> SummarizerCall:
    """``_generate_task_prefix_summary``'s input (§3.8); the focus is not used here."""
    parts = [f"<conversation>\n{serialized}\n</conversation>\n\n", TASK_PREFIX_SUMMARIZATION_PROMPT]
    return SummarizerCall(kind="task_prefix", system=SUMMARIZATION_SYSTEM_PROMPT, parts=parts, max_tokens=max_tokens)


# --- file operations and kept_items_brief (§3.10, §3.11) ------------------------------------------


def _looks_like_modification(args: Mapping[str, Any]) -> bool:
    if "old" in args and "new" in args:
        return True
    if "content" in args:
        return True
    patch = args.get("patch")
    if isinstance(patch, str) and "*** Begin Patch" in patch:
        return True
    return isinstance(args.get("edits"), list)


def _ui_extra_modified_paths(ui_extra: Any) -> list[str]:
    if not isinstance(ui_extra, dict):
        return []
    kind = ui_extra.get("type")
    if kind == "diff":
        files = ui_extra.get("files")
        return [f["file_path"] for f in files or [] if isinstance(f, dict) and isinstance(f.get("file_path"), str)]
    if kind == "markdown_doc":
        path = ui_extra.get("file_path")
        return [path] if isinstance(path, str) else []
    if kind == "multi":
        found: list[str] = []
        for sub in ui_extra.get("items") or []:
            found.extend(_ui_extra_modified_paths(sub))
        return found
    return []


def collect_file_operations(
    kinds: Sequence[str],
    items: Sequence[Mapping[str, Any]],
    *,
    previous_details: Mapping[str, Any] | None,
    file_tracker_paths: Sequence[str],
) -> dict[str, list[str]]:
    """``_collect_file_operations`` (§3.10) over the summarised and task-prefix items."""
    read_set: set[str] = set()
    modified_set: set[str] = set()
    if previous_details:
        read_set.update(p for p in previous_details.get("read_files") or [] if isinstance(p, str))
        modified_set.update(p for p in previous_details.get("modified_files") or [] if isinstance(p, str))
    read_set.update(file_tracker_paths)
    for kind, item in zip(kinds, items, strict=True):
        if kind == ASSISTANT:
            for part in _parts(item):
                if part.get("type") != "tool_call":
                    continue
                try:
                    args = orjson.loads(_string(part.get("arguments_json")) or "null")
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(args, dict):
                    continue
                path = args.get("file_path") or args.get("path")
                if not isinstance(path, str):
                    continue
                read_set.add(path)
                if _looks_like_modification(args):
                    modified_set.add(path)
        elif kind == TOOL_RESULT:
            modified_set.update(_ui_extra_modified_paths(item.get("ui_extra")))
    return {"read_files": sorted(read_set - modified_set), "modified_files": sorted(modified_set)}


def _preview(text: str) -> str:
    flat = text.strip().replace("\n", " ")
    return flat[:PREVIEW_CHARS] + "..." if len(flat) > PREVIEW_CHARS else flat


def kept_items_brief(kinds: Sequence[str], items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """§3.11: User/Assistant previews and per-tool counts of consecutive tool results."""
    brief: list[dict[str, Any]] = []
    tool_counts: dict[str, int] = {}

    def flush() -> None:
        brief.extend({"item_type": name, "count": count, "preview": ""} for name, count in tool_counts.items())
        tool_counts.clear()

    for kind, item in zip(kinds, items, strict=True):
        if kind == USER:
            flush()
            brief.append({"item_type": "User", "count": 1, "preview": _preview(_text_parts_joined(item))})
        elif kind == ASSISTANT:
            flush()
            text = _text_parts_joined(item)
            if text.strip():
                brief.append({"item_type": "Assistant", "count": 1, "preview": _preview(text)})
        elif kind == TOOL_RESULT:
            name = _string(item.get("tool_name")).strip()
            tool_counts[name] = tool_counts.get(name, 0) + 1
    flush()
    return brief


def file_operation_blocks(details: Mapping[str, Sequence[str]]) -> str:
    """The ``<read-files>`` / ``<modified-files>`` suffix (§3.9); empty when both lists are empty."""
    sections = []
    if details.get("read_files"):
        sections.append("<read-files>\n" + "\n".join(details["read_files"]) + "\n</read-files>")
    if details.get("modified_files"):
        sections.append("<modified-files>\n" + "\n".join(details["modified_files"]) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


# --- the strategy ------------------------------------------------------------------------------


@dataclass(slots=True)
class _KlaudeState:
    """What klaude keeps between building its summarizer requests and storing the CompactionEntry."""

    plan: CompactionPlan | None  # None for a cut placed by hand
    details: dict[str, list[str]]


# What klaude-code 2.8.1's Anthropic provider adds to every call (llm/anthropic/client.py ``build_payload``;
# the values from const.py): an identity block before the system prompt, each system block cached; the betas
# (sent by the SDK as the ``anthropic-beta`` header); temperature ``param.temperature or DEFAULT_TEMPERATURE``
# (the session does not record a configured temperature: klaude's default); an auto tool_choice with the
# summarizer's empty tool list (``_call_summarizer`` sets ``tools = None``, ``convert_tool_schema`` gives []);
# and the ``extra`` header carrying the call's session_id, None for the summarizer. No ``thinking``: only a
# model config that enables it adds one, and the session does not record that config.
CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."  # const.py
ANTHROPIC_BETA_INTERLEAVED_THINKING = "interleaved-thinking-2025-05-14"  # const.py
DEFAULT_TEMPERATURE = 1.0  # const.py
_EPHEMERAL = {"type": "ephemeral"}


def anthropic_system_blocks(system: str) -> list[dict[str, Any]]:
    """``build_payload``'s ``system``: the identity block, then ``convert_system_to_input``'s one block."""
    return [
        {"type": "text", "text": CLAUDE_CODE_IDENTITY, "cache_control": dict(_EPHEMERAL)},
        {"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)},
    ]


def anthropic_user_blocks(parts: Sequence[str]) -> list[dict[str, Any]]:
    """``_user_message_to_message``: one text block per part (an empty text block when there is none); then
    ``_add_cache_control`` marks the last block of the last message (llm/anthropic/input.py)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": part} for part in parts] or [{"type": "text", "text": ""}]
    blocks[-1]["cache_control"] = dict(_EPHEMERAL)
    return blocks


def _planned(request: SummarizerCall) -> PlannedRequest:
    # klaude sends one user message made of its parts (§3.8) and never drops rounds: one indivisible round.
    return PlannedRequest(
        kind=request.kind,
        system=request.system,
        transcript=request.text,
        rounds=None,
        instructions="",
        max_tokens=request.max_tokens,
        offline_reply=request.offline_reply,
        system_blocks=anthropic_system_blocks(request.system),
        user_blocks=anthropic_user_blocks(request.parts),
        extra_body={
            "temperature": DEFAULT_TEMPERATURE,
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
            "tools": [],
        },
        extra_headers={
            "anthropic-beta": ANTHROPIC_BETA_INTERLEAVED_THINKING,
            "extra": json.dumps({"session_id": None}, sort_keys=True),
        },
    )


# --- the offline reply: the prompts' sections, filled from the items only ------------------------

_OFFLINE_LINE_CHARS = 200
_OFFLINE_MAX_ITEMS = 15
# A line of a numbered file listing (``29→code``, ``  12\tcode``): tool output, not a statement.
_NUMBERED_LINE = re.compile(r"^\s*\d+(?:→|\t)")
_PATH_KEYS = ("file_path", "path", "notebook_path")


def _statement(text: str) -> str:
    """The first line of ``text`` that is a statement (not a numbered listing line), clipped."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip() and not _NUMBERED_LINE.match(ln)), "")
    return line if len(line) <= _OFFLINE_LINE_CHARS else line[: _OFFLINE_LINE_CHARS - 1].rstrip() + "…"


def _call_summary(part: Mapping[str, Any]) -> tuple[str, bool]:
    """``Edit app.py`` for a tool call, and whether it modifies a file; device paths are not files."""
    name = _string(part.get("tool_name")) or "tool"
    try:
        args = json.loads(_string(part.get("arguments_json")) or "{}")
    except ValueError:
        args = {}
    if not isinstance(args, dict):
        args = {}
    path = next((args[key] for key in _PATH_KEYS if isinstance(args.get(key), str)), "")
    if path.startswith("/dev/"):
        path = ""
    target = path or _statement(re.sub(r"\S*/dev/\S*", "", _string(args.get("command"))))[:80]
    return f"{name} {target}".strip(), bool(path) and _looks_like_modification(args)


def _previous_section(summary: str | None, heading: str) -> list[str]:
    """The lines under ``## heading`` (or ``### heading``) of a previous summary in klaude's format."""
    lines: list[str] = []
    inside = False
    for raw in (summary or "").splitlines():
        # A stored summary wraps the sections in <summary> and may end them at a split task's "---" heading.
        line = raw.replace("<summary>", "").replace("</summary>", "").strip()
        if line.startswith("#"):
            inside = line.lstrip("#").strip() == heading
            continue
        if line == "---" or line.startswith(("**", "<")):
            inside = False
            continue
        if inside and line:
            lines.append(line)
    return lines


def offline_reply(
    kind: str, kinds: Sequence[str], items: Sequence[Mapping[str, Any]], *, previous_summary: str | None = None
) -> str:
    """A reply in the request's own format (SUMMARIZATION_PROMPT, UPDATE_SUMMARIZATION_PROMPT or
    TASK_PREFIX_SUMMARIZATION_PROMPT) from the summarised items: user requests, the tool calls made, failed
    results, the last assistant statement. Nothing is taken from the prompt's placeholders."""
    requests = [_statement(_text_parts_joined(item)) for k, item in zip(kinds, items, strict=True) if k == USER]
    requests = [r for r in requests if r]
    done: list[str] = []
    blocked: list[str] = []
    last_statement = ""
    for k, item in zip(kinds, items, strict=True):
        if k == ASSISTANT:
            last_statement = _statement(_text_parts_joined(item)) or last_statement
            for part in _parts(item):
                if part.get("type") == "tool_call":
                    summary, modifies = _call_summary(part)
                    if modifies:
                        done.append(summary)
        elif k == TOOL_RESULT and _string(item.get("status")) not in ("", "success"):
            error = _statement(_string(item.get("output_text")))
            blocked.append(f"{_string(item.get('tool_name')) or 'tool'}: {error}" if error else "a tool call failed")

    def bullets(entries: list[str], mark: str = "- ") -> str:
        kept = list(dict.fromkeys(entries))[-_OFFLINE_MAX_ITEMS:]
        return "\n".join(f"{mark}{entry}" for entry in kept) if kept else f"{mark}(none)"

    if kind == "task_prefix":
        return (
            f"## Original Request\n{requests[0] if requests else '(none)'}\n\n"
            f"## Early Progress\n{bullets(done)}\n\n"
            f"## Context for Suffix\n{bullets([last_statement] if last_statement else [])}"
        )
    goals = _previous_section(previous_summary, "Goal") or requests[:1] or ["(none)"]
    done_before = [line.removeprefix("- [x] ") for line in _previous_section(previous_summary, "Done")]
    constraints = [line.removeprefix("- ") for line in _previous_section(previous_summary, "Constraints & Preferences")]
    decisions = [line.removeprefix("- ") for line in _previous_section(previous_summary, "Key Decisions")]
    context = [line.removeprefix("- ") for line in _previous_section(previous_summary, "Critical Context")]
    previous_next = [line for line in _previous_section(previous_summary, "Next Steps") if line != "1. (none)"]
    next_step = f"1. {requests[-1]}" if requests else "\n".join(previous_next) or "1. (none)"
    return (
        "## Goal\n" + "\n".join(goals) + "\n\n"
        f"## Constraints & Preferences\n{bullets([c for c in constraints if c != '(none)'])}\n\n"
        f"## Progress\n### Done\n{bullets([d for d in done_before + done if d != '(none)'], '- [x] ')}\n\n"
        f"### In Progress\n{bullets([last_statement] if last_statement else [], '- [ ] ')}\n\n"
        f"### Blocked\n{bullets(blocked)}\n\n"
        f"## Key Decisions\n{bullets([d for d in decisions if d != '(none)'])}\n\n"
        f"## Next Steps\n{next_step}\n\n"
        f"## Critical Context\n{bullets([c for c in context if c != '(none)'])}"
    )


class KlaudeCodeStrategy:
    """klaude-code 2.8.x compaction with its real defaults (see the module docstring for the contract)."""

    name = "klaude-code"
    label = "klaude-code 2.8.1 (threshold + keep-recent cut)"
    short_label = "klaude-code"
    example_model = "claude-opus-4-5"  # a builtin model, context_limit 200000 (docs/formats/klaude-code.md §2)
    params_type = KlaudeParams
    editable = ("context_limit", "reserve_tokens", "keep_recent_tokens", "max_summary_tokens")
    window_parameter = "context_limit"
    parameters = {
        "context_limit": ParameterSpec("Context limit", "tokens", unset="from the session"),
        "reserve_tokens": ParameterSpec("Reserved for the reply", "tokens"),
        "keep_recent_tokens": ParameterSpec("Recent history kept", "tokens"),
        "max_summary_tokens": ParameterSpec("Summary at most", "tokens"),
    }
    estimator_label = "ceil(characters / 4) per message (klaude-code's _estimate_tokens)"
    # NOTHING_TO_COMPACT_SMALL and NOTHING_TO_COMPACT_EMPTY start so (§3.5-3.6).
    compaction_refusals: tuple[str, ...] = ("Nothing to compact",)
    cache_policy: CachePolicy = ANTHROPIC_CACHE  # klaude-code's usage is Anthropic-style (cached reads and writes)
    # klaude writes "<summary>## Goal" on one line (its summary prompt's tags around the headings).
    summary_structure = SummaryStructure(sections=SUMMARY_SECTIONS, heading="markdown")
    public_source: str | None = (
        "https://pypi.org/project/klaude-code/"  # the published package the rules were read from
    )

    def __init__(
        self,
        params: KlaudeParams | None = None,
        *,
        file_tracker_paths: Sequence[str] = (),
        sub_agent: bool = False,
        compact_model: str | None = None,
    ) -> None:
        self.params = params or KlaudeParams.for_limit(None)
        # meta.json file_tracker keys: klaude adds all of them to <read-files> (§3.10).
        self.file_tracker_paths = tuple(file_tracker_paths)
        # meta.json sub_agent_state: core/task.py threshold-compacts only when ctx.sub_agent_state is None
        # (a sub-agent still compacts on a context overflow).
        self.sub_agent = sub_agent
        # The config's compact_model (2.8.0, docs/formats/klaude-code.md §3), when the session's import names it.
        self.compact_model = compact_model

    @classmethod
    def from_session(cls, info: SessionInfo, overrides: Mapping[str, Any]) -> KlaudeCodeStrategy:
        """klaude's defaults for the session's limit (its own, or the user's), then the other overrides."""
        clean = dict(overrides)
        limit = clean.pop("context_limit", None) or info.context_window
        params = replace(KlaudeParams.for_limit(limit), **clean)
        return cls(
            params,
            file_tracker_paths=info.data.get("file_tracker_paths") or (),
            # session.py Session.load_meta: only an object is a SubAgentState; anything else loads as None.
            sub_agent=isinstance(info.data.get("sub_agent_state"), dict),
            compact_model=info.data.get("compact_model") or None,
        )

    @classmethod
    def for_limit(cls, context_limit: int | None, *, file_tracker_paths: Sequence[str] = ()) -> KlaudeCodeStrategy:
        return cls(KlaudeParams.for_limit(context_limit), file_tracker_paths=file_tracker_paths)

    @property
    def max_summary_tokens(self) -> int:
        return self.params.max_summary_tokens

    # -- lines on the timeline

    def compacts(self, *, version: str | None) -> bool:
        # klaude-code 2.7.0 has no compaction (docs/formats/klaude-code.md §3.14); 2.8 added it.
        return not (bool(version) and str(version).startswith("2.7"))

    def circuit_breaker(self, *, version: str | None) -> int | None:
        return None  # klaude-code has no limit on failed compactions (docs/formats/klaude-code.md §3)

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds:
        limit = self.params.context_limit or builtin_context_limit(model)
        assumption = limit is None
        window = limit or max(200000, observed_max)  # assumption: the Claude builtin limit (§2)
        no_compaction = not self.compacts(version=version)
        return Thresholds(
            window=window,
            effective_window=window - self.params.reserve_tokens,
            autocompact=None if no_compaction else window - self.params.reserve_tokens,
            blocking=window,
            source=(
                "klaude-code 2.7.0 has no compaction (docs/formats/klaude-code.md §3.14)"
                if no_compaction
                else "klaude-code 2.8.1 should_compact_threshold: tokens > context_limit - reserve (§3.2-3.3)"
            ),
            assumption=assumption,
        )

    def session_thresholds(self, messages: Sequence[Message], *, info: SessionInfo | None = None) -> Thresholds:
        return recorded_thresholds(self, messages, info=info)

    def reaches_model(self, message: Message) -> bool:
        return sent_to_model(message)

    def estimate(self, message: Message) -> int:
        return estimate_item_tokens(item_type(message), item_dict(message))

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool:
        history = _History(messages)
        limit = self.params.context_limit or _last_context_limit(history, len(messages))
        return limit is not None and context_tokens > limit - self.params.reserve_tokens

    def check_threshold(self, messages: Sequence[Message], *, at: int | None = None) -> ThresholdCheck:
        """klaude's full ``should_compact_threshold`` on ``messages[:at]``, token source included."""
        end = len(messages) if at is None else at
        return _threshold_check(_History(messages), end, self.params)

    def threshold_checks(self, messages: Sequence[Message]) -> list[tuple[int, ThresholdCheck]]:
        """The check before every LLM call attempt and every prompt (§5.3), as (prefix length, check).

        Checkpoints are the positions p > 0 whose item is a prompt, a response, a failed call
        (StreamErrorItem) or a compaction: where klaude's TUI runner or turn start looks.
        """
        history = _History(messages)
        checkpoints = (ASSISTANT, USER, COMPACTION, STREAM_ERROR)
        state = _ThresholdState()  # one forward scan: linear in the session length
        checks: list[tuple[int, ThresholdCheck]] = []
        for position in range(len(messages)):
            if position > 0 and history.types[position] in checkpoints:
                checks.append((position, _threshold_from_state(history, position, self.params, state)))
            state.advance(history, position)
        return checks

    def select_prune(self, messages: Sequence[Message]) -> list[str]:
        return []  # klaude never prunes tool output in history (§4)

    # -- the cut

    def plan(
        self,
        messages: Sequence[Message],
        *,
        at: int | None = None,
        focus: str | None = None,
        with_requests: bool = True,
    ) -> CompactionPlan:
        """Everything ``run_compaction`` decides before calling the summarizer, on ``messages[:at]``.

        ``with_requests=False`` skips serialising the summarised part (the slow bit on huge sessions).
        """
        history = _History(messages)
        end = len(messages) if at is None else at
        params = self.params
        last = _last_compaction(history, end)
        base = int(history.items[last].get("first_kept_index") or 0) if last is not None else 0
        raw_cut = _find_cut_index(history, end, base, params.keep_recent_tokens)
        cut = _adjust_cut_index(history, end, raw_cut, base, quirk=params.reproduce_reminder_quirk)
        plan = CompactionPlan(
            base_start_index=base,
            last_compaction_index=last,
            raw_cut_index=raw_cut,
            adjusted_cut_index=cut,
            type_at_cut=history.types[cut] if 0 <= cut < end else None,
            can_compact=False,
        )
        if cut <= base:
            plan.error = NOTHING_TO_COMPACT_SMALL
            return plan
        task_start = _find_task_start(history, cut, base) if history.types[cut] != USER else None
        split = task_start is not None
        summarize_end = task_start if task_start is not None else cut
        summarized = [
            p for p in range(base, summarize_end) if history.types[p] in MESSAGE_TYPES and history.types[p] != SYSTEM
        ]
        prefix = (
            # _collect_messages leaves SystemMessages out of both ranges.
            [p for p in range(task_start, cut) if history.types[p] in MESSAGE_TYPES and history.types[p] != SYSTEM]
            if task_start is not None
            else []
        )
        previous = history.items[last] if last is not None else None
        previous_summary = _string(previous.get("summary")) if previous is not None else None
        plan.split_task = split
        plan.task_start_index = task_start
        plan.summarized_indices = summarized
        plan.task_prefix_indices = prefix
        plan.previous_summary = previous_summary
        if not summarized and not prefix and not previous_summary:
            plan.error = NOTHING_TO_COMPACT_EMPTY
            return plan
        tokens, _, _ = _last_usage(history, end)
        plan.tokens_before = tokens if tokens is not None else _estimate_range(history, 0, end)
        plan.kept_estimated_tokens = _estimate_range(history, cut, end)
        plan.first_kept_index = cut
        plan.can_compact = True
        touched = summarized + prefix
        previous_details = previous.get("details") if previous is not None else None
        plan.details = collect_file_operations(
            [history.types[p] for p in touched],
            [history.items[p] for p in touched],
            previous_details=previous_details if isinstance(previous_details, dict) else None,
            file_tracker_paths=self.file_tracker_paths,
        )
        kept = [p for p in range(cut, end) if history.types[p] != COMPACTION]
        plan.kept_items_brief = kept_items_brief([history.types[p] for p in kept], [history.items[p] for p in kept])
        if not with_requests:
            return plan
        # _build_summary: without a task prefix the history call is always made, so a previous summary and nothing
        # new still sends the UPDATE prompt on an empty <conversation>; with one, an empty history reuses the
        # previous summary.
        if summarized or not prefix:
            kinds, items = [history.types[p] for p in summarized], [history.items[p] for p in summarized]
            request = history_request(
                serialize_items(kinds, items),
                previous_summary=previous_summary,
                focus=focus,
                max_tokens=params.max_summary_tokens,
            )
            request.offline_reply = offline_reply(request.kind, kinds, items, previous_summary=previous_summary)
            plan.requests.append(request)
        if prefix:
            kinds, items = [history.types[p] for p in prefix], [history.items[p] for p in prefix]
            request = task_prefix_request(serialize_items(kinds, items), max_tokens=params.max_summary_tokens)
            request.offline_reply = offline_reply(request.kind, kinds, items)
            plan.requests.append(request)
        return plan

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None:
        plan = self.plan(messages, at=at, with_requests=False)
        if not plan.can_compact or plan.first_kept_index is None:
            return None
        return Cut(
            start=plan.base_start_index,
            end=plan.first_kept_index,
            first_kept=plan.first_kept_index,
            reason="split task" if plan.split_task else "",
        )

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        history = _History(messages)
        end = len(messages)
        last = _last_compaction(history, end)
        base = int(history.items[last].get("first_kept_index") or 0) if last is not None else 0
        if cut.start != base:
            raise CutRefused(
                f"klaude summarises from the previous compaction's first kept item ({base}), not {cut.start}"
            )
        if cut.end <= base:
            raise CutRefused(NOTHING_TO_COMPACT_SMALL)
        if cut.end >= end:
            raise CutRefused("klaude always keeps at least the newest item")
        if history.types[cut.end] == TOOL_RESULT:
            raise CutRefused("the first kept item is a tool result: its call would be summarised away")
        calls_before = {
            _string(p.get("call_id"))
            for position in range(cut.start, cut.end)
            if history.types[position] == ASSISTANT
            for p in _parts(history.items[position])
            if p.get("type") == "tool_call"
        }
        for position in range(cut.end, end):
            if (
                history.types[position] == TOOL_RESULT
                and _string(history.items[position].get("call_id")) in calls_before
            ):
                raise CutRefused(f"the tool result at {position} would be kept while its call is summarised")

    # -- the summary

    def render_transcript(self, messages: Sequence[Message]) -> str:
        history = _History(messages)
        return serialize_items(history.types, history.items)

    def prompt(self) -> str:
        """The system prompt of every summarizer call; the instructions are in ``plan().requests``."""
        return SUMMARIZATION_SYSTEM_PROMPT

    def parse_summary(self, raw: str) -> str:
        text = raw.strip()
        if not text:
            raise ValueError("Summarizer returned empty output")
        return text

    def assemble_summary(self, plan: CompactionPlan, *, replies: Mapping[str, str]) -> str:
        """The stored ``CompactionEntry.summary`` (§3.9) from the summarizer replies keyed by request kind."""
        if not plan.can_compact or plan.details is None:
            raise ValueError(plan.error or "nothing to compact")
        history_reply = replies.get("update_history", replies.get("history"))
        if history_reply is None:
            # 2.8.1 stands in previous_summary or "" when there is nothing to summarise; 2.8.0 a placeholder.
            if self.params.version == "2.8.0" and plan.split_task:
                history_reply = EMPTY_HISTORY_PLACEHOLDER_2_8_0
            else:
                history_reply = plan.previous_summary or ""
        if plan.split_task:
            heading = SPLIT_TASK_HEADING.get(self.params.version, SPLIT_TASK_HEADING[KLAUDE_VERSION])
            task_reply = replies.get("task_prefix", "")
            summary = (
                f"{COMPACTION_SUMMARY_PREFIX}\n\n<summary>{history_reply}"
                f"\n\n---\n\n{heading}\n\n{task_reply}\n\n</summary>"
            )
        else:
            summary = history_reply
        return summary + file_operation_blocks(plan.details)

    # -- the summarizer and the export

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        return end  # the view is klaude's history: a position is its index

    def carried_over(self, messages: Sequence[Message], cut: Cut) -> int:
        return 0  # nothing of the summarised range comes back after the summary

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        """klaude's own plan (one or two requests, §3.8); for a cut placed by hand, the history request alone."""
        if not by_hand:
            plan = self.plan(messages)
            if plan.can_compact:
                return SummarizerPlan(
                    requests=[_planned(r) for r in plan.requests], state=_KlaudeState(plan, plan.details or {})
                )
        kinds = [item_type(m) for m in messages]
        summarized = [p for p in range(cut.start, cut.end) if kinds[p] in MESSAGE_TYPES and kinds[p] != SYSTEM]
        previous = next((item_dict(messages[p]) for p in range(cut.end - 1, -1, -1) if kinds[p] == COMPACTION), None)
        previous_summary = str(previous.get("summary") or "") if previous else None
        previous_details = previous.get("details") if previous else None
        details = collect_file_operations(
            [kinds[p] for p in summarized],
            [item_dict(messages[p]) for p in summarized],
            previous_details=previous_details if isinstance(previous_details, dict) else None,
            file_tracker_paths=self.file_tracker_paths,
        )
        state = _KlaudeState(None, details)
        if not summarized and not previous_summary:
            return SummarizerPlan(state=state)
        summarized_kinds, summarized_items = (
            [kinds[p] for p in summarized],
            [item_dict(messages[p]) for p in summarized],
        )
        request = history_request(
            serialize_items(summarized_kinds, summarized_items),
            previous_summary=previous_summary or None,
            focus=None,
            max_tokens=self.max_summary_tokens,
        )
        request.offline_reply = offline_reply(
            request.kind, summarized_kinds, summarized_items, previous_summary=previous_summary or None
        )
        return SummarizerPlan(requests=[_planned(request)], state=state)

    summary_model_reason = (
        "its compact_model when the session names one, else the session's model (core/task.py "
        "ctx.compact_llm_client or profile.llm_client)"
    )

    def summary_model(self, messages: Sequence[Message]) -> str | None:
        """klaude compacts with ``compact_model`` when its config names one, else with the main model
        (core/task.py ``ctx.compact_llm_client or profile.llm_client``). The config is not in the session files:
        an import that learns it (``compact_model``) wins, else the session's main model is what it can tell."""
        return self.compact_model or next((m.model for m in reversed(messages) if m.model), None)

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        parsed = {kind: self.parse_summary(text) for kind, text in replies.items()}
        state = plan.state if isinstance(plan.state, _KlaudeState) else _KlaudeState(None, {})
        if state.plan is not None:
            return self.assemble_summary(state.plan, replies=parsed)
        return parsed.get("update_history", parsed.get("history", "")) + file_operation_blocks(state.details)

    export_suffix = ".events.jsonl"
    export_keeps_after_point = True
    # docs/formats/klaude-code.md §3.12: "Only the newest entry matters".
    resumes_from_last_compaction: str | None = "klaude-code resumes from the last CompactionEntry in events.jsonl"

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """The history up to the point, the CompactionEntry klaude would append there (formats/klaude-code.md
        §1.3), then every item recorded after the point, unless ``data.end_at_point``: klaude's history view
        starts from its LAST CompactionEntry (§3.12), so a real one recorded later would hide this summary.

        klaude never rewrites events.jsonl: a compaction appends an entry whose first_kept_index points into the
        history, so the kept items are the lines from that index on. The entry takes one index at the point, so
        a later CompactionEntry that keeps from there on keeps the same items at an index one higher.
        """
        lines = iter(data.lines)
        after: list[bytes] = []
        last: bytes | None = None  # the last item before the point: the entry takes its time
        for number, line in lines:
            if data.stop_line is not None and number >= data.stop_line:
                after.append(line)
                break
            if line.strip():
                last = line
            yield line
        yield self._compaction_entry(data, created_at=klaude_created_at(last, view_time=point_timestamp(data.messages)))
        if data.end_at_point:
            return
        inserted_at = len(data.messages)  # every history item keeps its place in the view: its index
        for line in itertools.chain(after, (line for _, line in lines)):
            yield _shift_first_kept(line, inserted_at)

    def _compaction_entry(self, data: ExportInput, *, created_at: str) -> bytes:
        state = data.plan.state if isinstance(data.plan.state, _KlaudeState) else _KlaudeState(None, {})
        kept = [m for m in data.messages[data.cut.end :] if item_type(m) != COMPACTION]
        brief = (
            state.plan.kept_items_brief
            if state.plan is not None
            else kept_items_brief([item_type(m) for m in kept], [item_dict(m) for m in kept])
        )
        entry = {
            "type": COMPACTION,
            "data": {
                "summary": data.summary,
                "first_kept_index": data.cut.first_kept,
                "tokens_before": data.tokens_before,
                "details": state.details,
                "kept_items_brief": brief,
                "created_at": created_at,
            },
        }
        # klaude's codec: json.dumps defaults (", " and ": " separators), not ASCII-escaped (§1.2).
        return (json.dumps(entry, ensure_ascii=False) + "\n").encode()

    def llm_view(self, messages: Sequence[Message], *, at: int | None = None) -> list[int | None]:
        """Positions of ``get_llm_history`` (§3.12); None is the injected summary message."""
        end = len(messages) if at is None else at
        return _llm_view(_History(messages), end)

    def post_compaction_view(self, messages: Sequence[Message], plan: CompactionPlan) -> list[int]:
        """Positions kept after ``plan`` is applied (leading tool results dropped, §3.12)."""
        if plan.first_kept_index is None:
            return []
        history = _History(messages)
        kept = [p for p in range(plan.first_kept_index, len(messages)) if history.types[p] != COMPACTION]
        lead = 0
        while lead < len(kept) and history.types[kept[lead]] == TOOL_RESULT:
            lead += 1
        return kept[lead:]

    def estimate_view(self, messages: Sequence[Message], view: Sequence[int | None], *, summary: str = "") -> int:
        """klaude's ``_estimate_history_tokens`` of a view (None = a user message holding ``summary``)."""
        return _estimate_view(_History(messages), view, summary)

    def replay_rules(self, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> ReplayRules:
        return KlaudeReplayRules(self, thresholds=thresholds, summary_tokens=summary_tokens)

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision:
        end = len(messages) if at is None else at
        check = self.check_threshold(messages, at=end)
        should = check.should_compact_threshold
        if context_tokens is not None:
            should = check.threshold_tokens is not None and context_tokens > check.threshold_tokens
        over_threshold = should
        should = should and not self.sub_agent
        plan = self.plan(messages, at=end, with_requests=False)
        cut = None
        if plan.can_compact and plan.first_kept_index is not None:
            cut = Cut(
                plan.base_start_index,
                plan.first_kept_index,
                plan.first_kept_index,
                "split task" if plan.split_task else "",
            )
        kept_view = self.post_compaction_view(messages[:end], plan) if cut else []
        return Decision(
            strategy=self.name,
            should_compact=should,
            tokens_before=plan.tokens_before if plan.tokens_before is not None else (check.tokens_for_threshold or 0),
            cut=cut,
            tokens_after_estimate=self.estimate_view(messages, kept_view) if cut else 0,
            reason=plan.error
            or (
                "threshold"
                if should
                else "a sub-agent session: klaude never threshold-compacts one (core/task.py)"
                if over_threshold
                else "below threshold"
            ),
            details={"threshold": asdict(check), "plan": asdict(plan)},
        )


class KlaudeReplayRules(ReplayRules):
    """klaude-code in a replay: counts the last usage only, acts above the line, its summary replaces the head."""

    counts = "last_usage"
    strict = True

    def admit(self, message: Message) -> list[Message]:
        # The view drops records (real CompactionEntries, summarised items), so list positions are no longer
        # klaude indices; clearing the recorded index tells the strategy not to insist on them.
        if message.data.get("index") is None:
            return [message]
        return [replace(message, data={**message.data, "index": None})]

    def summary_size(self, message: Message) -> int | None:
        # The entry's summary goes back into the history as a user message: klaude's ceil(chars / 4) (§3.4).
        chars = sum(len(block.text or "") for block in message.blocks if block.kind == "text")
        return max(1, (chars + 3) // 4)

    def kept_by_real(self, messages: Sequence[Message], position: int) -> Sequence[int]:
        # A CompactionEntry keeps the items from its first_kept_index on; they stay in place before it (§ session
        # history: the entry is appended, the kept items are not rewritten).
        first_kept = _int_or_none(messages[position].data.get("first_kept_index"))
        if first_kept is None:
            return ()
        return [
            p
            for p in range(position)
            if (index := _int_or_none(messages[p].data.get("index"))) is not None and index >= first_kept
        ]

    def fires(self, decision: Decision) -> bool:
        # Without a configured context_limit klaude's decide() finds no limit in a foreign log (it reads
        # usage.context_limit, §3.3) while thresholds() resolves the model's builtin limit (§2); the replay
        # already checked that line, so the plan's cut is what klaude would compact. A sub-agent session is never
        # threshold-compacted (core/task.py).
        sub_agent = isinstance(self.strategy, KlaudeCodeStrategy) and self.strategy.sub_agent
        return decision.cut is not None and not sub_agent

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        # A CompactionEntry whose first kept item is the next one in the new view.
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            raw_type=COMPACTION,
            data={"replay_synthetic": True, "item": {"first_kept_index": 1, "summary": ""}},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        # klaude's summary replaces everything before first_kept (the previous summary is folded into it).
        return [summary] + view[cut.end :], [None] + origin[cut.end :]

    def view_tokens(self, view: list[Message]) -> int:
        synthetic = self.summary_tokens if any(self.is_synthetic(m) for m in view[:1]) else 0
        return sum(self.estimate(m) for m in view) + synthetic


def _int_or_none(value: object) -> int | None:
    """A record's index as an int (the importer may keep it as text)."""
    try:
        return int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        return None


def _shift_first_kept(line: bytes, inserted_at: int) -> bytes:
    """A line recorded after an inserted history item: a CompactionEntry keeping from there on moves up by one."""
    if COMPACTION.encode() not in line:
        return line
    try:
        obj = json.loads(line)
    except ValueError:
        return line
    data = obj.get("data") if isinstance(obj, dict) and obj.get("type") == COMPACTION else None
    if not isinstance(data, dict):
        return line
    kept = data.get("first_kept_index")
    if not isinstance(kept, int) or isinstance(kept, bool) or kept < inserted_at:
        return line
    data["first_kept_index"] = kept + 1
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()
