"""Codex CLI's compaction (openai/codex ``codex-rs/core/src/compact.rs``), over an imported rollout.

Sources, as collected in docs/formats/codex.md §5-7 (U = upstream 4e7399c6, PR #17693):

* **the count** (context_manager/history.rs L277-331, L508-540): the last call's ``total_tokens`` (input +
  output), plus a bytes/4 estimate of the items added since the last model output, plus the estimated
  encrypted reasoning of the items before the last user message (skipped when the server says reasoning is
  included). Images count 7,373 bytes; encrypted content ``len*3/4 - 650`` bytes. A reasoning item whose call
  recorded ``reasoning_output_tokens`` counts that number instead: the rollout records what it holds.
* **when** (session/turn.rs): pre-turn when the count reaches the limit, mid-turn after a request with tool
  calls pending, and before switching to a model with a smaller window (with the previous model). The limit
  is ``min(configured, 90 % of the raw window)`` (openai_models.rs L310-321); before #5292 (0.48) gpt-5-codex
  had 350,000, above its 272,000 window, and gpt-5 had none (049a61bcf^ openai_model_info.rs L65-73);
  there was no auto-compaction before #3446 (after 0.34; the release is inferred).
* **local compaction** (compact.rs L65-283): the prompt of the session's version is appended to the whole
  history; the model's last message is the summary, stored as a user message ``SUMMARY_PREFIX + "\\n" +
  summary`` after the fixed prefix and the newest real user messages kept up to 20,000 tokens
  (``COMPACT_USER_MESSAGE_MAX_TOKENS``), the first that does not fit truncated.
* **remote compaction** (compact_remote.rs L112-211): ``/responses/compact`` returns the retained user and
  assistant messages and one encrypted ``compaction`` item; the summary is opaque, so a replay models it as
  an opaque block next to the retained messages. Which messages the server retains is not public: the local
  20,000-token budget is our assumption.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC
from typing import Any

import orjson

from compaction.agents import ParameterSpec, SummaryStructure
from compaction.formats.codex import (
    COMPACTED_RECORD,
    SUMMARY_PREFIX,
    TOKEN_COUNT_RECORD,
    is_summary_text,
)
from compaction.prompt_cache import CachePolicy
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
    session_model,
    written_text,
)
from compaction.transcript import Block, Message, SessionInfo, parse_timestamp
from compaction.windows import parse_version

# compact.rs COMPACT_USER_MESSAGE_MAX_TOKENS (#4068).
COMPACT_USER_MESSAGE_MAX_TOKENS = 20_000
# openai_models.rs: the auto-compact limit is 90 % of the raw window; the reported window is 95 % of it.
AUTO_COMPACT_PERCENT = 90
EFFECTIVE_WINDOW_PERCENT = 95
# models-manager/models.json at U: every catalogued model (and the fallback model info) has 272,000.
DEFAULT_CONTEXT_WINDOW = 272_000
# history.rs: what an image and an encrypted item count as, in bytes.
IMAGE_BYTES = 7_373
ENCRYPTED_OVERHEAD_BYTES = 650

# Versions (docs/formats/codex.md §6-7; the release of each PR is inferred from the samples' cli_version).
# #3446 (2025-09-12) came after #3444 (2025-09-11, `compacted` and `turn_context`), and 0.34 rollouts have no
# turn_context (samples/codex): 0.34 was cut before both, so auto-compaction shipped in 0.35 at the earliest.
AUTO_COMPACT_SINCE = (0, 35, 0)
NINETY_PERCENT_SINCE = (0, 48, 0)  # #5292, 2025-10-20: 90 % of the window; the window reported at 95 %
CHECKPOINT_PROMPT_SINCE = (0, 53, 0)  # #6027, 2025-10-31
SUMMARY_PREFIX_SINCE = (0, 58, 0)  # #6692, 2025-11-14
REMOTE_SINCE = (0, 58, 0)  # #6795 / #6866, 2025-11-18 (on by default for ChatGPT sign-in)
# Before #5292 (049a61bcf^ openai_model_info.rs L65-73): gpt-5-codex 350,000 (above its window), gpt-5 none.
LEGACY_LIMITS = (("gpt-5-codex", 350_000),)

# templates/compact/prompt.md, ea225df22 (2025-09-12): the memento prompt.
MEMENTO_PROMPT = (
    "You have exceeded the maximum number of tokens, please stop coding and instead write a short memento "
    "message for the next agent. Your note should:\n"
    "- Summarize what you finished and what still needs work. If there was a recent update_plan call, repeat "
    "its steps verbatim.\n"
    "- List outstanding TODOs with file paths / line numbers so they're easy to find.\n"
    "- Flag code that needs more tests (edge cases, performance, integration, etc.).\n"
    "- Record any open bugs, quirks, or setup steps that will make it easier for the next agent to pick up "
    "where you left off."
)
# templates/compact/prompt.md, 611e00c86 (#6027) to U.
SUMMARIZATION_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will "
    "resume the task.\n\n"
    "Include:\n"
    "- Current progress and key decisions made\n"
    "- Important context, constraints, or user preferences\n"
    "- What remains to be done (clear next steps)\n"
    "- Any critical data, examples, or references needed to continue\n\n"
    "Be concise, structured, and focused on helping the next LLM seamlessly continue the work."
)
# The parts each prompt asks for, as headings of an offline reply (SUMMARIZATION_PROMPT's "Include:" list;
# MEMENTO_PROMPT's "Your note should:" list).
HANDOFF_SECTIONS = (
    "Current progress and key decisions made",
    "Important context, constraints, or user preferences",
    "What remains to be done (clear next steps)",
    "Critical data, examples, or references needed to continue",
)
MEMENTO_SECTIONS = (
    "What was finished and what still needs work",
    "Outstanding TODOs with file paths",
    "Code that needs more tests",
    "Open bugs, quirks, or setup steps",
)
NO_SUMMARY = "(no summary available)"  # compact.rs build_compacted_history

# OpenAI prompt caching as the rollout shows it: cached_input_tokens are part of input_tokens and no cache write is
# recorded (docs/formats/codex.md §4). Our sources document no lifetime for OpenAI's cache, so none is assumed.
CODEX_CACHE = CachePolicy(
    provider="OpenAI",
    lifetime_minutes=None,
    long_lifetime_minutes=None,
    source="not documented for OpenAI prompt caching in docs/formats/codex.md; the rollout records cached input "
    "(part of the input) and no cache writes",
    writes_recorded=False,
)

# Codex sets no output budget for its summary; a replay needs a size for it. When the session recorded a
# compaction, what it left besides the fixed prefix is measured; otherwise this is our assumption.
ASSUMED_SUMMARY_TOKENS = 4_000

Version = tuple[int, int, int]


def _version(version: str | None) -> Version | None:
    return parse_version(version)


def approx_tokens(byte_count: int) -> int:
    """history.rs ``approx_token_count``: bytes / 4, rounded up."""
    return math.ceil(max(byte_count, 0) / 4)


def encrypted_bytes(encoded_len: int) -> int:
    """history.rs ``estimate_reasoning_length``: the base64 length decoded, minus the envelope."""
    return max(encoded_len * 3 // 4 - ENCRYPTED_OVERHEAD_BYTES, 0)


def encrypted_parts(message: Message) -> list[dict[str, Any]]:
    """The sizes of a record's encrypted contents, as the parser measured them (formats/codex.py)."""
    parts = message.data.get("encrypted")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def item_bytes(message: Message) -> int:
    """Codex's size of one history item in bytes (history.rs estimate_response_item_model_visible_bytes): its
    serialized JSON as the parser measured it, inline images 7,373 bytes each. A record without that measure (the
    replay's own, a summary we store) counts its text, images and decoded encrypted content."""
    measured = _measured_bytes(message.data)
    if measured is not None:
        return measured
    total = sum(encrypted_bytes(int(part.get("chars", 0))) for part in encrypted_parts(message))
    for block in message.blocks:
        if block.kind == "image":
            total += IMAGE_BYTES
        elif block.kind != "redacted_thinking":
            total += len(block.text.encode())
    return total


def reaches_model(message: Message) -> bool:
    return message.role != "meta" and message.kind not in ("bookkeeping", "unknown")


def is_real_user_message(message: Message) -> bool:
    """A prompt the user typed (contextual messages and earlier summaries are not, compact.rs L410-412)."""
    return message.role == "user" and message.kind == "prompt" and not is_summary_text(message.text)


def is_model_output(message: Message) -> bool:
    return message.role == "assistant" and message.raw_type != TOKEN_COUNT_RECORD


def reasoning_tokens(message: Message) -> int:
    """Codex's size of a reasoning item with encrypted content; 0 for one without (it is not in the term).

    history.rs ``estimate_response_item_model_visible_bytes`` counts such an item by its ciphertext alone
    (``estimate_reasoning_length``: the base64 length decoded, minus 650), never by its summary. Content that is
    not base64 is not what the API returned (a copy with the ciphertext replaced): its size is then unknown, and
    the reasoning tokens the call recorded stand for it. Codex's code has no relation between the two (the
    ciphertext's size per reasoning token is not published), so none is assumed: this undercounts the term by
    whatever the ciphertext holds beyond the reasoning tokens.
    """
    encrypted = encrypted_parts(message)
    if not encrypted:
        return 0
    if all(part.get("base64") for part in encrypted):
        return approx_tokens(sum(encrypted_bytes(int(part.get("chars", 0))) for part in encrypted))
    recorded = message.data.get("call_reasoning_tokens")
    return recorded if isinstance(recorded, int) else 0


def _measured_bytes(sizes: Mapping[str, Any]) -> int | None:
    """history.rs: the serialized item, its inline base64 images 7,373 bytes each; None when not measured."""
    serialized = sizes.get("serialized_bytes")
    if not isinstance(serialized, int):
        return None
    return serialized - int(sizes.get("image_payload_bytes") or 0) + IMAGE_BYTES * int(sizes.get("inline_images") or 0)


def retained_tokens(retained: Any) -> int:
    """Codex's estimate of the messages a recorded compaction kept (the parser's sizes of them)."""
    if not isinstance(retained, list):
        return 0
    total = 0
    for sizes in retained:
        if isinstance(sizes, dict):
            measured = _measured_bytes(sizes)
            text = int(sizes.get("text_bytes", 0)) + IMAGE_BYTES * int(sizes.get("images", 0))
            total += approx_tokens(measured if measured is not None else text)
    return total


@dataclass(frozen=True, slots=True)
class CodexParams:
    """Codex's compaction settings for one session; the defaults are what its version and model used."""

    context_window: int | None = None  # the raw window (config ``model_context_window``); None: from the session
    auto_compact_token_limit: int | None = None  # config ``model_auto_compact_token_limit``
    remote: bool | None = None  # compact through /responses/compact; None: as the session did, else by version
    server_reasoning_included: bool = False  # the server said reasoning is counted: the reasoning term is skipped
    user_message_max_tokens: int = COMPACT_USER_MESSAGE_MAX_TOKENS
    summary_tokens: int | None = None  # the summary's size in a replay; None: measured or assumed
    model: str | None = None
    version: str | None = None
    reported_window: int | None = None  # model_context_window as the rollout reported it
    measured_summary_tokens: int | None = None


class CodexStrategy:
    """Codex CLI's auto-compaction over an imported session."""

    name = "codex"
    label = "Codex CLI (compact.rs: local or remote compaction)"
    short_label = "Codex"
    example_model = "gpt-5.4"  # a catalogued model, 272,000-token window (docs/formats/codex.md §6)
    # context_manager/history.rs: bytes / 4 per item, images 7,373 bytes, encrypted reasoning len * 3 / 4 - 650.
    estimator_label = "bytes / 4 of each item (Codex's approx_token_count), encrypted reasoning len × 3/4 − 650"
    compaction_refusals: tuple[str, ...] = ()  # no such notice is documented for Codex (docs/formats/codex.md)
    public_source: str | None = "https://github.com/openai/codex/blob/main/codex-rs/core/src/compact.rs"
    cache_policy: CachePolicy = CODEX_CACHE
    # SUMMARIZATION_PROMPT's handoff parts (since #6027), which its summaries head as markdown.
    summary_structure = SummaryStructure(sections=HANDOFF_SECTIONS, heading="markdown")
    params_type = CodexParams
    editable = ("context_window", "auto_compact_token_limit", "remote", "server_reasoning_included", "summary_tokens")
    window_parameter = "context_window"
    parameters = {
        "context_window": ParameterSpec("Context window", "tokens", unset="from the session"),
        "auto_compact_token_limit": ParameterSpec("Auto-compact at", "tokens", unset="Codex's limit for the model"),
        "remote": ParameterSpec("Remote compaction (on the server)", unset="as the session did, else by version"),
        "server_reasoning_included": ParameterSpec("The server counts reasoning"),
        "summary_tokens": ParameterSpec("Summary size", "tokens", unset="measured, else assumed"),
    }

    def __init__(self, params: CodexParams | None = None) -> None:
        self.params = params or CodexParams()

    @classmethod
    def from_session(cls, info: SessionInfo, overrides: Mapping[str, Any]) -> CodexStrategy:
        data = info.data or {}
        compactions = [c for c in data.get("compactions", []) if isinstance(c, dict)]
        recorded_mode = next((c.get("mode") for c in compactions if c.get("mode")), None)
        measured = [
            c["after_input"] - c["prefix_input"] - retained_tokens(c.get("retained_messages"))
            for c in compactions
            if isinstance(c.get("after_input"), int) and isinstance(c.get("prefix_input"), int)
        ]
        recorded = {
            "model": info.model,
            "version": info.agent_version,
            "reported_window": info.context_window,
            "remote": None if recorded_mode is None else recorded_mode == "remote",
            "measured_summary_tokens": max(0, min(measured)) if measured else None,
        }
        return cls(CodexParams(**{**recorded, **overrides}))

    # ----------------------------------------------------------------- versions and lines

    @property
    def version(self) -> Version | None:
        return _version(self.params.version)

    def raw_window(self, *, model: str | None = None, version: str | None = None, reported: int | None = None) -> int:
        """The raw window: configured, else from the window the rollout reported (``reported``: one call's, else
        the session's last)."""
        if self.params.context_window:
            return self.params.context_window
        reported = reported or self.params.reported_window
        parsed = _version(version or self.params.version)
        if reported:
            if parsed is not None and parsed < NINETY_PERCENT_SINCE:
                return reported  # the raw window was reported up to 0.47
            return round(reported * 100 / EFFECTIVE_WINDOW_PERCENT)
        return DEFAULT_CONTEXT_WINDOW

    @property
    def remote(self) -> bool:
        if self.params.remote is not None:
            return self.params.remote
        parsed = self.version
        return parsed is None or parsed >= REMOTE_SINCE

    def compacts(self, *, version: str | None) -> bool:
        # Manual /compact (Op::Compact, compact.rs run_compact_task) exists in every rollout-era build we read.
        return True

    def circuit_breaker(self, *, version: str | None) -> int | None:
        return None  # compact.rs retries the turn; it keeps no count of failed compactions

    def auto_compact_limit(
        self, *, model: str | None, version: str | None, window: int | None = None
    ) -> tuple[int | None, str]:
        """The limit Codex compares its count with, and where it comes from (``window``: a raw window other than
        the session's, e.g. one call's model)."""
        window = window or self.raw_window(model=model, version=version)
        ninety = window * AUTO_COMPACT_PERCENT // 100
        if self.params.auto_compact_token_limit is not None:
            return min(self.params.auto_compact_token_limit, ninety), "configured, clamped to 90 % of the window"
        parsed = _version(version or self.params.version)
        known = version or self.params.version
        label = f"Codex {known}" if known else "Codex (version unknown)"
        if parsed is not None and parsed < AUTO_COMPACT_SINCE:
            return None, (
                f"{label} predates auto-compaction (#3446, 2025-09-12): it had no auto-compaction limit for any "
                "model, so it never compacted on its own"
            )
        if parsed is not None and parsed < NINETY_PERCENT_SINCE:
            name = (model or self.params.model or "").lower()
            for marker, limit in LEGACY_LIMITS:
                if marker in name:
                    return limit, (
                        f"{label}: before #5292 (0.48) {marker}'s auto_compact_token_limit was {limit:,}, above its "
                        f"{window:,}-token window, so auto-compaction could never fire"
                    )
            model_label = model or self.params.model or "the session's model (not recorded)"
            return None, (
                f"{label}: before #5292 (0.48) only gpt-5-codex had an auto-compaction limit (350,000, above its "
                f"{window:,}-token window); gpt-5 and {model_label} had none, so auto-compaction could never fire"
            )
        return ninety, f"{label}: 90 % of the {window:,}-token window (openai_models.rs auto_compact_token_limit)"

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds:
        window = self.raw_window(model=model, version=version)
        limit, why = self.auto_compact_limit(model=model, version=version)
        effective = window * EFFECTIVE_WINDOW_PERCENT // 100
        parsed = _version(version or self.params.version)
        reported = (
            "the rollout reports the raw window (before 0.48)"
            if parsed is not None and parsed < NINETY_PERCENT_SINCE
            else f"the rollout reports {EFFECTIVE_WINDOW_PERCENT} % of the window"
        )
        return Thresholds(
            window=window,
            effective_window=effective,
            autocompact=limit,
            source=f"{why}; {reported} (docs/formats/codex.md §4, §6)",
            assumption=_version(version or self.params.version) is None,
        )

    def session_thresholds(self, messages: Sequence[Message], *, info: SessionInfo | None = None) -> Thresholds:
        model = next((m.model for m in reversed(messages) if m.model), None) or (info.model if info else None)
        version = self.params.version or (info.agent_version if info else None)
        observed = max((m.usage.context for m in messages if m.usage is not None), default=0)
        if model is None and version is None:
            return recorded_thresholds(self, messages, info=info)
        return self.thresholds(model=model, version=version, observed_max=observed)

    @property
    def summary_size_note(self) -> str:
        """Where the summary size a replay uses comes from, in words its notes show."""
        if self.params.summary_tokens is not None:
            return "the summary_tokens parameter"
        if self.params.measured_summary_tokens is not None:
            return "measured from this rollout's compaction (what it left besides the prefix and the kept messages)"
        return "assumed: Codex sets no output budget for its summary (ASSUMED_SUMMARY_TOKENS)"

    @property
    def max_summary_tokens(self) -> int:
        if self.params.summary_tokens is not None:
            return self.params.summary_tokens
        if self.params.measured_summary_tokens is not None:
            return self.params.measured_summary_tokens
        return ASSUMED_SUMMARY_TOKENS

    # ----------------------------------------------------------------- counting

    def reaches_model(self, message: Message) -> bool:
        return reaches_model(message)

    def estimate(self, message: Message) -> int:
        """history.rs ``estimate_item_token_count``: bytes / 4 of what reaches the model (a reasoning item with
        encrypted content: its ciphertext only)."""
        if not reaches_model(message) or message.raw_type == TOKEN_COUNT_RECORD:
            return 0
        if message.raw_type == "response_item/reasoning" and encrypted_parts(message):
            return reasoning_tokens(message)
        return approx_tokens(item_bytes(message))

    def reasoning_term(self, messages: Sequence[Message]) -> int:
        """history.rs ``get_non_last_reasoning_items_tokens``: reasoning before the last user message."""
        if self.params.server_reasoning_included:
            return 0
        last_user = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if messages[i].raw_type == "response_item/message" and messages[i].role == "user"
            ),
            None,
        )
        if last_user is None:
            return 0
        return sum(reasoning_tokens(m) for m in messages[:last_user] if m.raw_type == "response_item/reasoning")

    def context_tokens(self, messages: Sequence[Message]) -> int:
        """Codex's ``get_total_token_usage`` at the end of ``messages``."""
        last_call = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].usage is not None), None)
        if last_call is None:
            return sum(self.estimate(m) for m in messages)
        usage = messages[last_call].usage
        assert usage is not None
        last_output = max(i for i in range(last_call + 1) if is_model_output(messages[i]) or i == last_call)
        after = sum(self.estimate(m) for m in messages[last_output + 1 :] if m.usage is None)
        return usage.context + usage.output_tokens + after + self.reasoning_term(messages)

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool:
        limit, _ = self.auto_compact_limit(model=self.params.model, version=self.params.version)
        return limit is not None and context_tokens >= limit

    def select_prune(self, messages: Sequence[Message]) -> list[str]:
        return []  # Codex never clears tool results on their own

    # ----------------------------------------------------------------- what a compaction keeps

    def fixed_prefix_end(self, messages: Sequence[Message]) -> int:
        """The initial context (instructions, developer and contextual messages) before the first prompt."""
        for i, message in enumerate(messages):
            if is_real_user_message(message) or message.role == "assistant" or message.kind == "tool_result":
                return i
        return len(messages)

    def kept_user_messages(self, messages: Sequence[Message]) -> list[Message]:
        """compact.rs L478-535: newest real user messages while they fit the budget; the first that does not is
        truncated and the walk stops; the order is restored."""
        budget = self.params.user_message_max_tokens
        kept: list[Message] = []
        for message in reversed(messages):
            if not is_real_user_message(message):
                continue
            tokens = approx_tokens(item_bytes(message))
            if tokens <= budget:
                kept.append(message)
                budget -= tokens
                continue
            if budget > 0:
                text = message.text.encode()[: budget * 4].decode(errors="ignore")
                kept.append(replace(message, blocks=[Block("text", text=text)]))
            break
        kept.reverse()
        return kept

    def retained_messages(self, messages: Sequence[Message]) -> list[Message]:
        """What survives the compaction besides the summary: kept user messages, plus (remote) assistant
        messages, within the same budget (our assumption for the server's choice)."""
        if not self.remote:
            return self.kept_user_messages(messages)
        budget = self.params.user_message_max_tokens
        kept: list[Message] = []
        for message in reversed(messages):
            retained = is_real_user_message(message) or (
                message.raw_type == "response_item/message" and message.role == "assistant"
            )
            if not retained:
                continue
            tokens = approx_tokens(item_bytes(message))
            if tokens > budget:
                break
            kept.append(message)
            budget -= tokens
        kept.reverse()
        return kept

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None:
        """Codex summarises everything after the fixed prefix; retained messages come back after it."""
        view = messages[:at] if at is not None else messages
        start = self.fixed_prefix_end(view)
        if start >= len(view):
            return None
        return Cut(start=start, end=len(view), first_kept=len(view), reason="the whole history after the fixed prefix")

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        if not 0 <= cut.start < cut.end <= len(messages):
            raise CutRefused(f"the cut [{cut.start}, {cut.end}) is empty or outside the session")
        if cut.start < self.fixed_prefix_end(messages):
            raise CutRefused("Codex keeps its initial context (instructions, AGENTS.md, environment) whole")
        calls: dict[str, bool] = {}
        for message in messages[cut.start : cut.end]:
            for block in message.blocks:
                if block.tool_id and block.kind == "tool_use":
                    calls[block.tool_id] = True
        for message in messages[cut.end :]:
            for block in message.blocks:
                if block.kind == "tool_result" and block.tool_id in calls:
                    raise CutRefused(f"the cut separates tool call {block.tool_id} from its output")

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        return end

    def carried_over(self, messages: Sequence[Message], cut: Cut) -> int:
        """compact.rs puts the newest user messages (up to 20,000 tokens) back after the summary."""
        return sum(self.estimate(m) for m in self.retained_messages(messages[cut.start : cut.end]))

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision:
        view = messages[:at] if at is not None else messages
        tokens = context_tokens if context_tokens is not None else self.context_tokens(view)
        limit, why = self.auto_compact_limit(model=self.params.model, version=self.params.version)
        compact = limit is not None and tokens >= limit
        cut = self.select_cut(view)
        after = 0
        if cut is not None:
            head = sum(self.estimate(m) for m in view[: cut.start])
            retained = sum(self.estimate(m) for m in self.retained_messages(view[cut.start : cut.end]))
            after = head + retained + self.max_summary_tokens
        mode = "remote (/responses/compact)" if self.remote else "local (compact.rs)"
        if limit is None:
            reason = f"no auto-compaction: {why}"
        elif compact:
            reason = f"Codex's count {tokens:,} reached the {limit:,} auto-compact limit: {mode} compaction"
        else:
            reason = f"Codex's count {tokens:,} is under the {limit:,} auto-compact limit"
        return Decision(
            strategy=self.name,
            should_compact=compact and cut is not None,
            tokens_before=tokens,
            cut=cut,
            tokens_after_estimate=after,
            reason=reason,
            details={"limit": limit, "limit_source": why, "mode": "remote" if self.remote else "local"},
        )

    # ----------------------------------------------------------------- the summarizer

    def prompt(self) -> str:
        parsed = self.version
        return MEMENTO_PROMPT if parsed is not None and parsed < CHECKPOINT_PROMPT_SINCE else SUMMARIZATION_PROMPT

    def render_transcript(self, messages: Sequence[Message]) -> str:
        """The history as the summarizer model receives it, one item per part, in Responses API terms."""
        return "\n\n".join(part for part in (self._render(m) for m in messages) if part)

    @staticmethod
    def _render(message: Message) -> str:
        if not reaches_model(message) or message.raw_type == TOKEN_COUNT_RECORD:
            return ""
        parts: list[str] = []
        for block in message.blocks:
            if block.kind == "text":
                parts.append(f"[{message.role}]\n{block.text}")
            elif block.kind == "thinking":
                parts.append(f"[reasoning]\n{block.text}")
            elif block.kind == "redacted_thinking":
                parts.append(f"[encrypted: {block.text}]")
            elif block.kind == "tool_use":
                # Some items carry no call id (web_search_call: docs/formats/codex.md); never print "None".
                call = f" {block.tool_id}" if block.tool_id else ""
                parts.append(f"[{block.tool_name or 'tool'} call{call}]\n{block.text}")
            elif block.kind == "tool_result":
                parts.append(f"[output of {block.tool_id or 'a call'}]\n{block.text}")
            elif block.kind == "image":
                parts.append("[image]")
        return "\n".join(parts)

    def parse_summary(self, raw: str) -> str:
        return raw.strip()

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        """compact.rs: the whole history (the prefix included), then the prompt as the last user message.

        ``rounds`` are the items, oldest first: on a context-window error Codex drops the oldest and retries.
        """
        history = list(messages[: cut.end])
        rounds = [part for part in (self._render(m) for m in history) if part]
        request = PlannedRequest(
            kind="compact",
            system="",
            transcript="\n\n".join(rounds),
            rounds=rounds,
            instructions=self.prompt(),
            max_tokens=self.max_summary_tokens,
            round_tokens=[approx_tokens(len(r.encode())) for r in rounds],
            offline_reply=self.offline_handoff(history, cut),
        )
        return SummarizerPlan(requests=[request], state={"kept": [m.line for m in self.kept_user_messages(history)]})

    def offline_handoff(self, messages: Sequence[Message], cut: Cut) -> str:
        """A reply in the shape the session's prompt asks for, filled from the records (``compaction.offline``).

        Since #6027 the prompt asks for a handoff summary with four parts (``HANDOFF_SECTIONS``); before it the
        memento prompt asked for four others (``MEMENTO_SECTIONS``). Codex summarises the whole history, so
        the facts are drawn from all of it.
        """
        from compaction.offline import bullets, read_facts  # here, as in the Claude Code strategy: not every start

        facts = read_facts(messages, 0, cut.end)
        files = [f"{path} ({verb})" for path, verb in facts.files]
        latest = facts.requests[-1] if facts.requests else ""
        next_steps = [*facts.open_tasks, *([f"Continue with the latest request: {latest}"] if latest else [])]
        if self.prompt() == MEMENTO_PROMPT:
            parts = (
                [*facts.last_steps, *(f"Decided: {d}" for d in facts.decisions)],
                next_steps + files,
                [c for c in facts.commands if "test" in c.lower()],
                facts.errors,
            )
            sections = MEMENTO_SECTIONS
        else:
            parts = (
                [*facts.last_steps, *(f"Decided: {d}" for d in facts.decisions)],
                facts.requests,
                next_steps,
                [*files, *(f"Ran: {c}" for c in facts.commands[-8:]), *(f"Error: {e}" for e in facts.errors)],
            )
            sections = HANDOFF_SECTIONS
        return "\n\n".join(f"## {name}\n{bullets(items)}" for name, items in zip(sections, parts, strict=True))

    def stored_summary(self, summary: str) -> str:
        """The message a local compaction stores: the prefix and the summary since #6692, the summary before."""
        text = summary.strip() or NO_SUMMARY
        parsed = self.version
        if parsed is not None and parsed < SUMMARY_PREFIX_SINCE:
            return text
        return f"{SUMMARY_PREFIX}\n{text}"

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        return self.stored_summary(self.parse_summary(replies.get("compact", "")))

    summary_model_reason = "the session's model: compact.rs sends the compaction turn to the turn's own model"

    def summary_model(self, messages: Sequence[Message]) -> str | None:
        """The session's model (compact.rs runs the compaction prompt as a turn of the session's model). It is an
        OpenAI model the Anthropic API cannot run, so a run falls back to SUMMARY_MODEL and says so."""
        return session_model(messages) or self.params.model

    # ----------------------------------------------------------------- export

    export_suffix: str | None = ".jsonl"
    # The compacted line's replacement history is the whole context Codex resumes from (U compact.rs L250-283),
    # and what it recorded after the point was built on the history before it: the export ends at the point.
    export_keeps_after_point = False
    resumes_from_last_compaction: str | None = None  # its export always ends at the point

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """The rollout up to the point, then the ``compacted`` line a local compaction writes (U compact.rs
        L250-283: the replacement history is the fixed prefix, the kept user messages and the summary) and
        the ``context_compacted`` event that follows it."""
        last: bytes | None = None  # the last line before the point: the new lines take its time
        for number, raw in data.lines:
            if data.stop_line is not None and number >= data.stop_line:
                break
            if raw.strip():
                last = raw
            yield raw if raw.endswith(b"\n") else raw + b"\n"
        view = list(data.messages)
        prefix = view[: self.fixed_prefix_end(view)]
        kept = self.kept_user_messages(view)
        replacement = [*(self._response_item(m) for m in prefix + kept if m.raw_type != "session_meta")]
        replacement.append(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": data.summary}]}
        )
        timestamp = _rollout_time(last, view_time=point_timestamp(view))
        for line in (
            {"type": "compacted", "payload": {"message": data.summary, "replacement_history": replacement}},
            {"type": "event_msg", "payload": {"type": "context_compacted"}},
        ):
            yield orjson.dumps({"timestamp": timestamp, **line}) + b"\n"

    @staticmethod
    def _response_item(message: Message) -> dict[str, Any]:
        role = str(message.data.get("role") or message.role)
        kind = "output_text" if role == "assistant" else "input_text"
        content = [{"type": kind, "text": b.text} for b in message.blocks if b.kind == "text"]
        return {"type": "message", "role": role, "content": content}

    # ----------------------------------------------------------------- replay

    def replay_rules(self, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> ReplayRules:
        return CodexReplayRules(self, thresholds=thresholds, summary_tokens=summary_tokens)


class CodexReplayRules(ReplayRules):
    """Codex in a replay: last usage + what arrived since + the reasoning term, at or above the limit.

    The replay checks before every call: that is Codex's pre-turn check before a user turn and its mid-turn
    check after a request whose tool calls are pending. Each call is checked against the limit of its own model
    (the window its token count reports), and a switch to a model with a smaller window is the model-downshift
    check (session/turn.rs ``maybe_run_previous_model_inline_compact``): when the count is above the new model's
    limit, Codex compacts with the previous model before the switch. A compaction keeps the fixed prefix, the
    retained messages and the summary (local) or the opaque compaction item (remote).
    """

    counts = "pending"
    strict = False

    def __init__(self, strategy: CodexStrategy, *, thresholds: Thresholds, summary_tokens: int) -> None:
        super().__init__(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
        self.codex = strategy
        self.reasoning_total = 0  # reasoning of the items admitted so far
        self.reasoning_before_user = 0  # of those, the reasoning before the last user message
        self.limit = thresholds.autocompact  # the limit of the next call's model
        self.limit_source = thresholds.source
        self.model: str | None = None  # the model and raw window of the last call seen
        self.window: int | None = None
        self.downshift: tuple[str, int, str, int] | None = None  # (old model, old window, new model, new window)

    def admit(self, message: Message) -> list[Message]:
        if message.raw_type == "response_item/reasoning":
            self.reasoning_total += reasoning_tokens(message)
        elif message.raw_type == "response_item/message" and message.role == "user" and message.kind != "injected":
            # history.rs is_user_turn_boundary: a user message that is not injected context.
            self.reasoning_before_user = self.reasoning_total
        return [message]

    def upcoming_call(self, records: Sequence[Message]) -> None:
        """The next call's model and reported window: its limit, and whether the switch to it is a downshift."""
        model = next((m.model for m in records if m.model), None)
        reported = next((w for m in records if isinstance(w := m.data.get("context_window"), int) and w > 0), None)
        self.downshift = None
        if model is None or reported is None or self.codex.params.context_window:
            return  # a configured window is every model's: nothing changes with the model
        window = self.codex.raw_window(model=model, reported=reported)
        if self.model is not None and self.window is not None and model != self.model and self.window > window:
            self.downshift = (self.model, self.window, model, window)
        if (model, window) != (self.model, self.window):
            self.limit, self.limit_source = self.codex.auto_compact_limit(
                model=model, version=self.codex.params.version, window=window
            )
        self.model, self.window = model, window

    def call_window(self, window: int) -> int:
        return self.window or window  # a call fails above its own model's raw window

    def count(self, counted: int) -> int:
        """history.rs get_total_token_usage: plus the reasoning before the last user turn (unless the server
        says it counts it)."""
        return counted + (0 if self.codex.params.server_reasoning_included else self.reasoning_before_user)

    def _downshift_due(self, tokens: int) -> bool:
        # turn.rs: total_usage_tokens > new_auto_compact_limit (strictly), the model changed, the window shrank.
        return self.downshift is not None and self.limit is not None and tokens > self.limit

    def level(self, counted: int, *, idle_minutes: float | None) -> int:
        tokens = counted
        return 2 if self._downshift_due(tokens) or self.over(tokens, self.limit) else 0

    def decide(self, view: list[Message], counted: int) -> Decision:
        tokens = counted
        decision = self.codex.decide(view, context_tokens=tokens)
        if self.limit is None:
            return decision
        decision.should_compact = decision.cut is not None and (self._downshift_due(tokens) or tokens >= self.limit)
        decision.details = {**decision.details, "limit": self.limit, "limit_source": self.limit_source}
        mode = "remote (/responses/compact)" if self.codex.remote else "local (compact.rs)"
        if self._downshift_due(tokens) and self.downshift is not None:
            old, old_window, new, new_window = self.downshift
            decision.reason = (
                f"model downshift: {new}'s {new_window:,}-token window is smaller than {old}'s {old_window:,}, and "
                f"Codex's count {tokens:,} is above {new}'s {self.limit:,} auto-compact limit: it compacts with "
                f"{old} before the switch, {mode} (turn.rs maybe_run_previous_model_inline_compact)"
            )
            decision.details["trigger"] = "model_downshift"
        elif decision.should_compact:
            decision.reason = (
                f"Codex's count {tokens:,} reached the {self.limit:,} auto-compact limit: {mode} compaction"
            )
        else:
            decision.reason = f"Codex's count {tokens:,} is under the {self.limit:,} auto-compact limit"
        return decision

    def summary_size(self, message: Message) -> int | None:
        # A remote compaction's summary is an encrypted item (compact_remote.rs): its size is not in the rollout;
        # the strategy's measured summary (``measured_summary_tokens``) stands for it.
        if any(block.kind == "redacted_thinking" for block in message.blocks):
            return None
        return self.estimate(message)

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        if self.codex.remote:
            return Message(
                line=0,
                role="user",
                kind="compact_summary",
                raw_type="response_item/compaction",
                blocks=[Block("text", "x" * (4 * self.summary_tokens))],
                data={"replay_synthetic": True},
            )
        text = self.codex.stored_summary("x" * (4 * self.summary_tokens))
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            raw_type=COMPACTED_RECORD,
            blocks=[Block("text", text)],
            data={"replay_synthetic": True},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        middle = view[cut.start : cut.end]
        retained = {id(m) for m in self.codex.retained_messages(middle)}
        kept = [i for i in range(cut.start, cut.end) if id(view[i]) in retained]
        head = list(range(cut.start))
        # Reasoning is gone from the history: the reasoning term restarts.
        self.reasoning_total = self.reasoning_before_user = 0
        return (
            [view[i] for i in head] + [view[i] for i in kept] + [summary] + view[cut.end :],
            [origin[i] for i in head] + [origin[i] for i in kept] + [None] + origin[cut.end :],
        )


def _rollout_time(last_line: bytes | None, *, view_time: str | None) -> str | None:
    """The ``timestamp`` of a line appended after ``last_line``: that line's own, as the rollout wrote it (UTC,
    ``Z``, milliseconds: docs/formats/codex.md §1); the point's time from the conversation when it has none; None
    only when no time is known (a legacy rollout)."""
    written = written_text(last_line, "timestamp")
    if written is not None:
        return written
    parsed = parse_timestamp(view_time)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if parsed is not None else None
