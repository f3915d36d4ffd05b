"""KHAELOR-style compaction: prune, then summarise a pairing-safe middle with the aux model.

Ported from the only primary source we have, KHAELOR's ``src/context/compaction.ts`` (seeds/002;
docs/formats/khaelor.md walks through it). Where the seed is silent we assume, and say so:

* the token estimate (``estimateTokens`` in ``budget.ts``, not shown): ``ceil(chars / 4)``;
* the context window (``session.started`` or 200,000) and the proactive trigger (80 % of the window);
* ``buildConversation``, ``isPairingSafeCut``, ``parseCheckpoint`` and ``serializeCheckpoint`` (not shown):
  reconstructed from their call sites and the sample checkpoint in shared/samples/khaelor.

The seed works on the whole durable log in ``seq`` order. Here the input is the conversation view of
an imported session (``Message``s whose ``raw_type`` is the KHAELOR event type and whose ``data`` holds
``seq`` and ``payload``, as ``compaction.formats.khaelor`` writes them). Earlier prunes and compactions in
that view follow the seed rule by rule: ``selectCompactionCut`` walks every conversation event of the log,
including those inside an earlier compaction's cut (so a new cut restarts at the first event after the
head and re-summarises the old range with its checkpoint), and prices a pruned result by its raw
``modelText`` (``conversationTextEstimate``). Only the context estimate (what the model really holds, the
project's own trigger input) and ``selectPruneCandidates`` (``inAnyRange``) leave consumed events out and
price a pruned result as its placeholder. ``tests/compaction/strategies/test_khaelor_oracle.py`` keeps a
line-by-line port of the seed's functions and checks the two agree on random logs.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from compaction.agents import ParameterSpec, SummaryStructure
from compaction.formats.khaelor import (
    CONTEXT_COMPACTED,
    CONTEXT_PRUNED,
    MODEL_TEXT_BLOCK,
    MODEL_THINKING_BLOCK,
    MODEL_USAGE,
    PROCESS_EXITED,
    PROCESS_STARTED,
    SESSION_STARTED,
    STEERING_INJECTED,
    STEERING_QUEUED,
    TOOL_COMPLETED,
    TOOL_FAILED,
    TOOL_REQUESTED,
    TOOL_RESULT_TYPES,
    USER_MESSAGE,
    json_stringify,
)
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
)
from compaction.tokens import chars_div_4
from compaction.transcript import Block, Message, SessionInfo, parse_timestamp
from compaction.windows import context_window as model_context_window

# compaction.ts PRUNE_PLACEHOLDER, verbatim.
PRUNE_PLACEHOLDER = "[Tool result pruned to reclaim context — re-run the tool if this output is needed again.]"

# compaction.ts capText and renderTranscript, verbatim.
BLOCK_TRUNCATION_SUFFIX = "\n… [truncated]"
TRANSCRIPT_TRUNCATION_MARKER = "\n\n[… transcript truncated for summarization …]\n\n"
TRANSCRIPT_HEAD_SHARE = 0.4
TRANSCRIPT_TAIL_SHARE = 0.5

# compaction.ts SUMMARY_SYSTEM_PROMPT. The seed is a scraped page that collapsed leading whitespace;
# the two-space list indentation is restored from the sample checkpoint (samples/khaelor, seq 43).
# The checkpoint's fields, in SUMMARY_SYSTEM_PROMPT's order (running_processes is filled from events, not the
# model): what the summary diff checks.
CHECKPOINT_FIELDS = (
    "objective",
    "completed",
    "current_state",
    "important_files",
    "changes",
    "failed_attempts",
    "decisions",
    "next_steps",
)
SUMMARY_SYSTEM_PROMPT = """\
You summarize an engineering agent's conversation so it can continue with less context. \
Respond with ONLY a structured checkpoint in exactly this format (plain text, no code fences):

objective: <the user's current objective, one paragraph>
completed:
  - <finished sub-goal>
current_state: <where the work stands right now>
important_files:
  - path: <file path>
    reason: <why it matters to remaining work>
changes:
  - <file-level change made so far>
failed_attempts:
  - <approach tried and abandoned, with why>
decisions:
  - <decision taken and rationale>
next_steps:
  - <concrete next action>

Use `key: []` for sections with no entries. Be specific and factual; never invent results."""

# compaction.ts CONVERSATION_EVENT_TYPES: the events that contribute content to the model's history.
CONVERSATION_EVENT_TYPES = frozenset(
    {
        USER_MESSAGE,
        STEERING_INJECTED,
        MODEL_TEXT_BLOCK,
        MODEL_THINKING_BLOCK,
        TOOL_REQUESTED,
        *TOOL_RESULT_TYPES,
        CONTEXT_COMPACTED,
    }
)

# Records already in KHAELOR's shape (its parser keeps the event type as raw_type): a replay admits them as
# they are and converts every other agent's records (KhaelorReplayRules.admit).
EVENT_TYPES = CONVERSATION_EVENT_TYPES | {
    CONTEXT_PRUNED,
    STEERING_QUEUED,
    PROCESS_STARTED,
    PROCESS_EXITED,
    SESSION_STARTED,
    MODEL_USAGE,
}

# compaction.ts CompactionCheckpoint.trigger values.
TRIGGER_PROACTIVE = "proactive-token-budget"
TRIGGER_REACTIVE = "reactive-overflow"
TRIGGER_USER = "user-command"


@dataclass(frozen=True, slots=True)
class KhaelorParams:
    """compaction.ts ``DEFAULT_COMPACTION_OPTIONS`` plus the numbers the seed does not show."""

    protect_recent_tool_tokens: int = 40_000  # compaction.ts protectRecentToolTokens
    protect_tail_tokens: int = 20_000  # compaction.ts protectTailTokens
    summary_max_output_tokens: int = 2_000  # compaction.ts summaryMaxOutputTokens
    max_block_chars: int = 4_000  # compaction.ts maxBlockChars
    max_transcript_chars: int = 300_000  # compaction.ts maxTranscriptChars
    # Assumptions (docs/formats/khaelor.md "Where the seed is silent"): the window comes from
    # session.started when the log has it, else from the model (compaction.windows); the proactive
    # trigger is a share of it.
    context_window: int | None = None
    model: str | None = None
    proactive_ratio: float = 0.8
    aux_model: str | None = None  # session.started auxModel; summaries never use the main model (ADR-10)


def estimate_tokens(text: str) -> int:
    """KHAELOR's ``estimateTokens`` (budget.ts, not shown): assumed ``ceil(chars / 4)``."""
    return chars_div_4(text)


# ───────────────────────────── checkpoint (checkpoint.ts, reconstructed) ─────────────────────────────


@dataclass(slots=True)
class CheckpointProcess:
    id: str
    command: str
    status: str = "running"


@dataclass(slots=True)
class ImportantFile:
    path: str
    reason: str = ""


@dataclass(slots=True)
class Checkpoint:
    objective: str = ""
    completed: list[str] = field(default_factory=list)
    current_state: str = ""
    important_files: list[ImportantFile] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    failed_attempts: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    running_processes: list[CheckpointProcess] = field(default_factory=list)


_SCALAR_KEYS = ("objective", "current_state")
_LIST_KEYS = ("completed", "changes", "failed_attempts", "decisions", "next_steps")
# Serialization order: the prompt's order, then the deterministic running_processes (sample, seq 43).
_KEY_ORDER = (*CHECKPOINT_FIELDS, "running_processes")
_TOP_LEVEL_KEY = re.compile(r"^([a-z_]+):(?:[ \t]+(.*))?$")
_LIST_ITEM = re.compile(r"^\s+-\s?(.*)$")
_ITEM_FIELD = re.compile(r"^\s+([a-z_]+):(?:[ \t]+(.*))?$")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def parse_checkpoint(text: str) -> Checkpoint | None:
    """Parse a checkpoint body; None when it is not one (no top-level ``objective:``)."""
    checkpoint = Checkpoint()
    key: str | None = None
    block_scalar: list[str] | None = None  # lines of a ``key: |`` value
    item: dict[str, str] | None = None  # the mapping item being read (important_files, running_processes)
    seen_objective = False

    def close_block() -> None:
        nonlocal block_scalar
        if block_scalar is not None and key in _SCALAR_KEYS:
            setattr(checkpoint, key, "\n".join(block_scalar).strip("\n"))
        block_scalar = None

    for line in text.splitlines():
        top = _TOP_LEVEL_KEY.match(line)
        if top is not None:
            close_block()
            key, value = top.group(1), (top.group(2) or "").strip()
            item = None
            seen_objective = seen_objective or key == "objective"
            if key in _SCALAR_KEYS:
                if value in ("|", "|-"):
                    block_scalar = []
                else:
                    setattr(checkpoint, key, _unquote(value))
            continue
        if block_scalar is not None:
            block_scalar.append(line[2:] if line.startswith("  ") else line.lstrip())
            continue
        if not line.strip() or key is None or not line[0].isspace():
            continue  # only indented lines belong to a key; stray prose or a closing fence is ignored
        list_item = _LIST_ITEM.match(line)
        if key in _LIST_KEYS:
            items: list[str] = getattr(checkpoint, key)
            if list_item is not None:
                items.append(_unquote(list_item.group(1)))
            elif items:  # a wrapped item continues on an indented line
                items[-1] = f"{items[-1]} {line.strip()}"
        elif key in ("important_files", "running_processes"):
            text_after_dash = list_item.group(1) if list_item is not None else None
            if text_after_dash is not None:
                item = {}
                if key == "important_files":
                    checkpoint.important_files.append(ImportantFile(path=""))
                else:
                    checkpoint.running_processes.append(CheckpointProcess(id="", command=""))
                line = "  " + text_after_dash
            field_match = _ITEM_FIELD.match(line)
            if field_match is None or item is None:
                continue
            name, value = field_match.group(1), _unquote(field_match.group(2) or "")
            item[name] = value
            if key == "important_files" and name in ("path", "reason"):
                setattr(checkpoint.important_files[-1], name, value)
            elif key == "running_processes" and name in ("id", "command", "status"):
                setattr(checkpoint.running_processes[-1], name, value)
        elif key in _SCALAR_KEYS:  # a wrapped scalar continues on an indented line
            setattr(checkpoint, key, f"{getattr(checkpoint, key)} {line.strip()}".strip())
    close_block()
    return checkpoint if seen_objective else None


# compaction.ts extractCheckpointBody: a whole-text code fence, then everything from ``objective:``.
_FENCE = re.compile(r"```[a-zA-Z]*\n([\s\S]*?)\n```\Z")
_OBJECTIVE_LINE = re.compile(r"^objective:", re.MULTILINE)


def extract_checkpoint_body(raw: str) -> str:
    """compaction.ts ``extractCheckpointBody``: strip code fences and leading prose."""
    text = raw.strip()
    fence = _FENCE.match(text)
    if fence is not None:
        text = fence.group(1).strip()
    start = _OBJECTIVE_LINE.search(text)
    return text[start.start() :] if start is not None and start.start() > 0 else text


def parse_checkpoint_lenient(raw: str) -> Checkpoint:
    """compaction.ts ``parseCheckpointLenient``: structured when possible, else raw text → current_state."""
    parsed = parse_checkpoint(extract_checkpoint_body(raw))
    if parsed is not None:
        return parsed
    return Checkpoint(current_state=raw.strip())


def _scalar_line(key: str, value: str) -> list[str]:
    if "\n" in value:
        return [f"{key}: |", *(f"  {line}" if line else "" for line in value.split("\n"))]
    return [f"{key}: {value}" if value else f"{key}:"]


def _one_line(value: str) -> str:
    return " ".join(value.split("\n"))


def serialize_checkpoint(checkpoint: Checkpoint) -> str:
    """YAML-like, keys in the prompt's order, ``key: []`` for empty lists (docs/formats/khaelor.md)."""
    lines: list[str] = []
    for key in _KEY_ORDER:
        if key in _SCALAR_KEYS:
            lines.extend(_scalar_line(key, getattr(checkpoint, key)))
            continue
        entries = getattr(checkpoint, key)
        if not entries:
            lines.append(f"{key}: []")
            continue
        lines.append(f"{key}:")
        for entry in entries:
            if isinstance(entry, ImportantFile):
                lines += [f"  - path: {_one_line(entry.path)}", f"    reason: {_one_line(entry.reason)}"]
            elif isinstance(entry, CheckpointProcess):
                lines += [
                    f"  - id: {_one_line(entry.id)}",
                    f"    command: {_one_line(entry.command)}",
                    f"    status: {entry.status}",
                ]
            else:
                lines.append(f"  - {_one_line(entry)}")
    return "\n".join(lines) + "\n"


# ───────────────────────────── reading the view ─────────────────────────────


def _payload(message: Message) -> dict[str, Any]:
    payload = message.data.get("payload")
    return payload if isinstance(payload, dict) else {}


def _seq(message: Message) -> int:
    seq = message.data.get("seq")
    return seq if isinstance(seq, int) else message.line


def _tool_id(message: Message) -> str | None:
    for block in message.blocks:
        if block.tool_id is not None:
            return block.tool_id
    tool_id = _payload(message).get("toolUseId")
    return tool_id if isinstance(tool_id, str) else None


def _conversation_estimate(message: Message) -> int:
    """compaction.ts ``conversationTextEstimate``: one field per event type, 0 for the rest."""
    kind = message.raw_type
    if kind not in CONVERSATION_EVENT_TYPES or kind == STEERING_INJECTED:
        return 0  # the seed's switch has no case for steering-injected
    return estimate_tokens("".join(block.text for block in message.blocks))


def collect_running_processes(messages: Iterable[Message]) -> list[CheckpointProcess]:
    """compaction.ts ``collectRunningProcesses``: running_processes come from events, never the LLM."""
    running: dict[str, CheckpointProcess] = {}
    for message in messages:
        if message.raw_type not in (PROCESS_STARTED, PROCESS_EXITED):
            continue
        payload = _payload(message)
        process_id = str(payload.get("processId", ""))
        if message.raw_type == PROCESS_STARTED:
            running[process_id] = CheckpointProcess(id=process_id, command=str(payload.get("command", "")))
        else:
            running.pop(process_id, None)
    return list(running.values())


@dataclass(slots=True)
class PruneDecision:
    """compaction.ts ``PruneDecision``: what KHAELOR records as a ``context.pruned`` payload."""

    tool_use_ids: list[str]
    placeholder: str
    tokens_reclaimed_estimate: int

    def payload(self) -> dict[str, Any]:
        return {
            "toolUseIds": self.tool_use_ids,
            "placeholder": self.placeholder,
            "tokensReclaimedEstimate": self.tokens_reclaimed_estimate,
        }


_NO_TAIL = 2**63  # a seq past every event: the tail walk found nothing after the head


class _Estimates:
    """``_conversation_estimate`` of each message a replay's views read, made once per message object.

    A compaction replaces the replay's view by a new list (head, summary, tail): its ``_View`` is built again from
    every message, 40 times in a KHAELOR replay of the 53 MB session, and the text estimates were most of that. The
    message is held beside its estimate, so its ``id`` cannot be reused by another message while the entry lives.
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Message, int]] = {}

    def extend(self, into: list[int], messages: Sequence[Message]) -> None:
        known = self._known
        for message in messages:
            hit = known.get(id(message))
            if hit is None or hit[0] is not message:
                hit = known[id(message)] = (message, _conversation_estimate(message))
            into.append(hit[1])


class _View:
    """What the seed derives from the whole log, computed once per call over a conversation view."""

    def __init__(
        self, messages: Sequence[Message], *, also_pruned: Iterable[str] = (), estimates: _Estimates | None = None
    ) -> None:
        self.estimates = estimates if estimates is not None else _Estimates()
        self.messages: list[Message] = []
        self.seqs: list[int] = []
        self.placeholders: dict[str, str] = {}  # pruned tool id → the placeholder its prune recorded
        self.compacted_ranges: list[tuple[int, int]] = []
        # compaction.ts selectCompactionCut's ``conversation``: every conversation event of the log, in order,
        # earlier compacted ranges included.
        self.all_conversation: list[int] = []
        # The conversation events still in the model's context (the context estimate and the transcript).
        self.conversation: list[int] = []
        self.request_index: dict[str, int] = {}
        self.result_index: dict[str, int] = {}
        self._text_estimates: list[int] = []  # _conversation_estimate of each message (a pure function of it)
        self._total: int | None = None  # context_total(), once asked for
        self._add(messages)
        extra = list(also_pruned)
        for tool_id in extra:
            self.placeholders.setdefault(tool_id, PRUNE_PLACEHOLDER)
        self.exact = not extra  # only what the messages say: a longer view may grow from this one (``grown``)

    @classmethod
    def grown(cls, previous: _View | None, messages: Sequence[Message], *, estimates: _Estimates) -> _View:
        """The view of ``messages``; when they are ``previous``'s messages (the same objects) and more, only the
        new ones are read. A replay asks about a view one call longer each time: rebuilding it whole made a
        KHAELOR replay of a 16,000-record session quadratic (2 s)."""
        if (
            previous is None
            or not previous.exact
            or len(messages) < len(previous.messages)
            or not all(map(operator.is_, previous.messages, messages))
        ):
            return cls(messages, estimates=estimates)
        view = cls.__new__(cls)
        view.estimates = estimates
        view.messages = list(previous.messages)
        view.seqs = list(previous.seqs)
        view.placeholders = dict(previous.placeholders)
        view.compacted_ranges = list(previous.compacted_ranges)
        view.all_conversation = list(previous.all_conversation)
        view.conversation = list(previous.conversation)
        view.request_index = dict(previous.request_index)
        view.result_index = dict(previous.result_index)
        view._text_estimates = list(previous._text_estimates)
        view._total = previous._total
        view.exact = True
        view._add(messages[len(previous.messages) :])
        return view

    def with_pruned(self, tool_ids: Iterable[str]) -> _View:
        """``_View(self.messages, also_pruned=tool_ids)`` without reading the messages again: only the
        placeholders differ (a decision's middle is priced with its own prune applied, once per call)."""
        view = _View.__new__(_View)
        view.estimates = self.estimates
        view.messages = self.messages
        view.seqs = self.seqs
        view.compacted_ranges = self.compacted_ranges
        view.all_conversation = self.all_conversation
        view.conversation = self.conversation
        view.request_index = self.request_index
        view.result_index = self.result_index
        view._text_estimates = self._text_estimates
        view._total = None
        view.placeholders = dict(self.placeholders)
        extra = list(tool_ids)
        for tool_id in extra:
            view.placeholders.setdefault(tool_id, PRUNE_PLACEHOLDER)
        view.exact = self.exact and not extra  # shares this view's lists: never grown in place
        return view

    def _add(self, messages: Sequence[Message]) -> None:
        """Read ``messages`` as the next events of the log (what a whole build reads, in the same order)."""
        start = len(self.messages)
        ranges_before = len(self.compacted_ranges)
        pruned = False
        self.messages.extend(messages)
        self.seqs.extend(_seq(m) for m in messages)
        self.estimates.extend(self._text_estimates, messages)
        new_conversation: list[int] = []
        for i, message in enumerate(messages, start):
            kind = message.raw_type
            if kind == CONTEXT_COMPACTED:
                cut = _payload(message).get("cut")
                if isinstance(cut, dict) and isinstance(cut.get("fromSeq"), int) and isinstance(cut.get("toSeq"), int):
                    self.compacted_ranges.append((cut["fromSeq"], cut["toSeq"]))
            elif kind == CONTEXT_PRUNED:
                pruned = True
                payload = _payload(message)
                placeholder = payload.get("placeholder")
                ids = payload.get("toolUseIds")
                for tool_id in ids if isinstance(ids, list) else []:
                    if isinstance(tool_id, str):
                        self.placeholders[tool_id] = placeholder if isinstance(placeholder, str) else PRUNE_PLACEHOLDER
            if kind in CONVERSATION_EVENT_TYPES:
                new_conversation.append(i)
                if kind == TOOL_REQUESTED or kind in TOOL_RESULT_TYPES:
                    tool_id = _tool_id(message)
                    by_id = self.request_index if kind == TOOL_REQUESTED else self.result_index
                    if tool_id is not None:
                        by_id.setdefault(tool_id, i)
        self.all_conversation.extend(new_conversation)
        if len(self.compacted_ranges) != ranges_before:  # a new cut may consume earlier events too
            self.conversation = [i for i in self.all_conversation if not self.consumed(self.seqs[i])]
            self._total = None
            return
        added = [i for i in new_conversation if not self.consumed(self.seqs[i])]
        self.conversation.extend(added)
        if pruned:  # a prune changes the estimate of results already in the view
            self._total = None
        elif self._total is not None:
            self._total += sum(self.estimate(i) for i in added)

    def context_total(self) -> int:
        """What is still in context, estimated (``sum(self.estimate(i) for i in self.conversation)``), kept up as
        the view grows: a replay asks for it at every call, over a view one call longer each time."""
        if self._total is None:
            self._total = sum(self.estimate(i) for i in self.conversation)
        return self._total

    def consumed(self, seq: int) -> bool:
        """compaction.ts ``inAnyRange``: inside an earlier compaction's cut."""
        return any(start <= seq <= end for start, end in self.compacted_ranges)

    def estimate(self, index: int) -> int:
        """The seed's estimate of one event, with a recorded prune applied (what is really in context)."""
        message = self.messages[index]
        if message.raw_type in TOOL_RESULT_TYPES:
            placeholder = self.placeholders.get(_tool_id(message) or "")
            if placeholder is not None:
                return estimate_tokens(placeholder)
        return self._text_estimates[index]

    def first_user(self) -> int | None:
        return next((i for i in self.all_conversation if self.messages[i].raw_type == USER_MESSAGE), None)

    def protected_from_seq(self, *, first_user: int, tail_tokens_floor: int) -> int:
        """compaction.ts ``selectCompactionCut`` tail floors: the latest user message, and tail tokens.

        Over every conversation event, each priced by ``conversationTextEstimate`` (a pruned result by its
        raw ``modelText``), as the seed does.
        """
        first_user_seq = self.seqs[first_user]
        last_user_seq = first_user_seq
        for i in self.all_conversation:
            if self.messages[i].raw_type == USER_MESSAGE:
                last_user_seq = self.seqs[i]
        tail_tokens = 0
        tail_start_seq = _NO_TAIL
        for i in reversed(self.all_conversation):
            if self.seqs[i] <= first_user_seq:
                break
            tail_start_seq = self.seqs[i]
            tail_tokens += self._text_estimates[i]
            if tail_tokens >= tail_tokens_floor:
                break
        return tail_start_seq if last_user_seq == first_user_seq else min(tail_start_seq, last_user_seq)

    def pairing_violation(self, start: int, end: int) -> str | None:
        """Why ``messages[start:end]`` splits a tool call from its result, or None when pairing-safe.

        ``isPairingSafeCut`` (session/, not shown), reconstructed from compaction.ts: every tool call inside
        the cut has its result inside, and no result inside lost its call to the outside.
        """
        for i in self.all_conversation:
            if not start <= i < end:
                continue
            message = self.messages[i]
            tool_id = _tool_id(message)
            if tool_id is None:
                continue
            if message.raw_type == TOOL_REQUESTED:
                result = self.result_index.get(tool_id)
                if result is None or not start <= result < end:
                    where = "has no result" if result is None else f"has its result at seq {self.seqs[result]}"
                    return f"tool call {tool_id} (seq {self.seqs[i]}) is inside the cut but {where} outside it"
            elif message.raw_type in TOOL_RESULT_TYPES:
                request = self.request_index.get(tool_id)
                if request is not None and not start <= request < end:
                    return (
                        f"tool result {tool_id} (seq {self.seqs[i]}) is inside the cut but its call "
                        f"(seq {self.seqs[request]}) is outside it"
                    )
        return None


# ───────────────────────────── the strategy ─────────────────────────────


class KhaelorStrategy:
    """KHAELOR's compaction pipeline (seeds/002 ``compaction.ts``) over an imported session."""

    name = "khaelor"
    label = "KHAELOR-style (compaction.ts; window and trigger assumed)"
    short_label = "KHAELOR"
    # Its model client is Anthropic's (the seed imports ../anthropic; docs/formats/khaelor.md §3): a Claude model.
    example_model = "claude-sonnet-4-5"
    params_type = KhaelorParams
    editable = ("context_window", "protect_recent_tool_tokens", "protect_tail_tokens", "proactive_ratio")
    window_parameter = "context_window"
    parameters = {
        "context_window": ParameterSpec("Context window", "tokens", unset="from the session"),
        "protect_recent_tool_tokens": ParameterSpec("Recent tool output never pruned", "tokens"),
        "protect_tail_tokens": ParameterSpec("Tail kept at a compaction", "tokens"),
        "proactive_ratio": ParameterSpec("Compacts early at", "of the window (0 to 1)"),
    }
    estimator_label = "ceil(characters / 4) of the conversation text (KHAELOR's estimateTokens, assumed)"
    compaction_refusals: tuple[str, ...] = ()  # no such notice is documented for KHAELOR (docs/formats/khaelor.md)
    cache_policy: CachePolicy = ANTHROPIC_CACHE  # KHAELOR's sessions are read with Anthropic usage
    summary_structure = SummaryStructure(sections=CHECKPOINT_FIELDS, heading="yaml")
    public_source: str | None = None  # KHAELOR publishes no source; its trigger is assumed

    def compacts(self, *, version: str | None) -> bool:
        return True

    def circuit_breaker(self, *, version: str | None) -> int | None:
        return None  # compaction.ts shows no limit on failed compactions

    def __init__(self, params: KhaelorParams | None = None) -> None:
        self.params = params or KhaelorParams()
        self.max_summary_tokens = self.params.summary_max_output_tokens
        self._last_view: _View | None = None
        self._estimates = _Estimates()

    def _view(self, messages: Sequence[Message]) -> _View:
        """``_View(messages)``, grown from the last view asked for when these messages extend it."""
        view = _View.grown(self._last_view, messages, estimates=self._estimates)
        self._last_view = view
        return view

    @classmethod
    def from_session(cls, info: SessionInfo, overrides: Mapping[str, Any]) -> KhaelorStrategy:
        return cls.for_session(info, **overrides)

    @classmethod
    def for_session(cls, info: SessionInfo, **overrides: Any) -> KhaelorStrategy:
        """Parameters from what ``session.started`` recorded (window, model, aux model)."""
        recorded = {
            "context_window": info.context_window,
            "model": info.model,
            "aux_model": info.data.get("aux_model"),
        }
        return cls(KhaelorParams(**{**recorded, **overrides}))

    # ----------------------------------------------------------------- thresholds and estimates

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds:
        recorded = self.params.context_window
        window = recorded or model_context_window(model=model or self.params.model, observed_max=observed_max)
        window_source = "session.started contextWindow" if recorded else "the model's window (compaction.windows)"
        return Thresholds(
            window=window,
            autocompact=int(window * self.params.proactive_ratio),
            source=(
                f"window: {window_source}. KHAELOR's compaction.ts (seeds/002) shows no trigger: proactive "
                f"compaction at {self.params.proactive_ratio:.0%} of the window is our assumption "
                "(docs/formats/khaelor.md)"
            ),
            assumption=True,
        )

    def session_thresholds(self, messages: Sequence[Message], *, info: SessionInfo | None = None) -> Thresholds:
        return recorded_thresholds(self, messages, info=info)

    def reaches_model(self, message: Message) -> bool:
        return sent_to_model(message)

    def estimate(self, message: Message) -> int:
        """compaction.ts ``conversationTextEstimate`` with ``estimateTokens`` = ceil(chars / 4) (assumed)."""
        return _conversation_estimate(message)

    def context_estimate(self, messages: Sequence[Message]) -> int:
        """Estimated history size: events still in context, pruned results counted as their placeholder."""
        return self._view(messages).context_total()

    def context_estimates(self, messages: Sequence[Message]) -> list[int]:
        """Each message as it stands in the context at the end of ``messages`` (``base.context_estimates``): an
        event inside an earlier compaction's cut is 0 (its ``context.compacted`` checkpoint stands for it), a
        pruned result its placeholder, every other event its ``conversationTextEstimate``. They add up to
        ``context_estimate(messages)``."""
        view = self._view(messages)
        estimates = [0] * len(messages)
        for i in view.conversation:
            estimates[i] = view.estimate(i)
        return estimates

    def context_tokens(self, messages: Sequence[Message], *, at: int | None = None) -> int:
        """The real context where usage is recorded: the last call's (context + output) plus the estimate of the
        events after it. The estimate alone without usage, or when a prune or compaction since made it stale."""
        view_messages = messages[:at] if at is not None else messages
        view = self._view(view_messages)
        anchor = next(
            (i for i in range(len(view_messages) - 1, -1, -1) if (u := view_messages[i].usage) and u.context > 0),
            None,
        )
        stale = anchor is not None and any(
            m.raw_type in (CONTEXT_COMPACTED, CONTEXT_PRUNED) for m in view_messages[anchor + 1 :]
        )
        if anchor is None or stale:
            return view.context_total()
        usage = view_messages[anchor].usage
        assert usage is not None
        return usage.context + usage.output_tokens + sum(view.estimate(i) for i in view.conversation if i > anchor)

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool:
        threshold = self.thresholds(model=None, version=None).autocompact
        return threshold is not None and context_tokens > threshold

    # ----------------------------------------------------------------- prune

    def prune_decision(self, messages: Sequence[Message]) -> PruneDecision:
        """compaction.ts ``selectPruneCandidates``."""
        view = self._view(messages)
        placeholder_tokens = estimate_tokens(PRUNE_PLACEHOLDER)
        results: list[tuple[str, int]] = []
        for i, message in enumerate(messages):
            if message.raw_type not in TOOL_RESULT_TYPES:
                continue
            tool_id = _tool_id(message)
            if tool_id is None or tool_id in view.placeholders or view.consumed(view.seqs[i]):
                continue
            results.append((tool_id, estimate_tokens(message.blocks[0].text if message.blocks else "")))

        # Protect the newest N tokens of tool output; everything older is a candidate.
        protected_tokens = 0
        protect_from_index = len(results)
        for index in range(len(results) - 1, -1, -1):
            protected_tokens += results[index][1]
            if protected_tokens > self.params.protect_recent_tool_tokens:
                break
            protect_from_index = index

        tool_use_ids: list[str] = []
        reclaimed = 0
        for tool_id, tokens in results[:protect_from_index]:
            if tokens <= placeholder_tokens:
                continue  # nothing to reclaim
            tool_use_ids.append(tool_id)
            reclaimed += tokens - placeholder_tokens
        return PruneDecision(
            tool_use_ids=tool_use_ids, placeholder=PRUNE_PLACEHOLDER, tokens_reclaimed_estimate=reclaimed
        )

    def select_prune(self, messages: Sequence[Message]) -> list[str]:
        return self.prune_decision(messages).tool_use_ids

    # ----------------------------------------------------------------- cut

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None:
        return self._select_cut(messages[:at] if at is not None else messages)

    def _select_cut(self, messages: Sequence[Message]) -> Cut | None:
        """compaction.ts ``selectCompactionCut``; the Cut's indices are positions in ``messages``."""
        view = self._view(messages)
        first_user = view.first_user()
        if first_user is None:
            return None
        protected_from_seq = view.protected_from_seq(
            first_user=first_user, tail_tokens_floor=self.params.protect_tail_tokens
        )
        first_user_seq = view.seqs[first_user]
        candidates = [i for i in view.all_conversation if first_user_seq < view.seqs[i] < protected_from_seq]
        if not candidates:
            return None

        # toSeq walks down from the last candidate until the cut is pairing-safe. One forward pass
        # records, for each candidate end, whether the cut [first candidate .. it] is safe.
        start = candidates[0]
        safe_at: list[bool] = []
        needed_until = -1  # the furthest result position a call inside the cut needs
        split_result = False  # a result inside the cut whose call precedes the cut
        for i in candidates:
            message = messages[i]
            tool_id = _tool_id(message)
            if message.raw_type == TOOL_REQUESTED and tool_id is not None:
                result = view.result_index.get(tool_id)
                needed_until = max(needed_until, len(messages) if result is None else result)
            elif message.raw_type in TOOL_RESULT_TYPES and tool_id is not None:
                request = view.request_index.get(tool_id)
                split_result = split_result or (request is not None and request < start)
            safe_at.append(not split_result and needed_until <= i)
        for position in range(len(candidates) - 1, -1, -1):
            if safe_at[position]:
                last = candidates[position]
                from_seq, to_seq = view.seqs[start], view.seqs[last]
                first_kept = view.seqs[last + 1] if last + 1 < len(messages) else to_seq + 1
                return Cut(
                    start=start,
                    end=last + 1,
                    first_kept=first_kept,
                    reason=f"cut fromSeq {from_seq} toSeq {to_seq}",
                )
        return None

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        """compaction.ts ``compressEvents`` refuses only a cut that is not pairing-safe: a cut by hand may take
        the head or reach into the tail. A cut must also hold a conversation event, for its fromSeq and toSeq."""
        if not 0 <= cut.start < cut.end <= len(messages):
            raise CutRefused(f"the cut [{cut.start}, {cut.end}) is empty or outside the session")
        view = _View(messages)
        if not any(cut.start <= i < cut.end for i in view.all_conversation):
            raise CutRefused("the cut holds no conversation event: nothing to summarise")
        violation = view.pairing_violation(cut.start, cut.end)
        if violation is not None:
            raise CutRefused(f"the cut is not pairing-safe: {violation}")

    # ----------------------------------------------------------------- middle and transcript

    def extract_middle(
        self, messages: Sequence[Message], cut: Cut, *, also_pruned: Iterable[str] = ()
    ) -> list[Message]:
        """compaction.ts ``extractCutEvents``: conversation events in the cut, every steering-queued event,
        then every ``context.pruned`` event, so the transcript shows placeholders (prune first).

        ``also_pruned`` adds the ids a prune decided in the same step would record before compacting.
        Pass the result to ``render_transcript``.
        """
        view = _View(messages)
        middle: list[Message] = []
        prunes: list[Message] = []
        for i, message in enumerate(messages):
            if message.raw_type == STEERING_QUEUED:
                middle.append(message)
            elif message.raw_type == CONTEXT_PRUNED:
                prunes.append(message)
            elif message.raw_type in CONVERSATION_EVENT_TYPES and cut.start <= i < cut.end:
                middle.append(message)
        pending = [tool_id for tool_id in also_pruned if tool_id not in view.placeholders]
        if pending:
            payload = PruneDecision(pending, PRUNE_PLACEHOLDER, 0).payload()
            prunes.append(
                Message(line=0, role="system", kind="system", raw_type=CONTEXT_PRUNED, data={"payload": payload})
            )
        return middle + prunes

    def render_transcript(self, messages: Sequence[Message]) -> str:
        """compaction.ts ``renderTranscript`` over ``buildConversation(middle)``.

        ``buildConversation`` is not in the seed: we assume it is the LlmHistory projection, so it applies the
        ``context.pruned`` events present in ``messages`` (id-targeted, idempotent) and every
        ``context.compacted`` event in them (its checkpoint stands for its cut), and renders each remaining
        conversation event's block.
        """
        view = _View(messages)
        cap = self.params.max_block_chars
        parts: list[str] = []
        for i in view.conversation:
            message = messages[i]
            for block in message.blocks:
                part = self._render_block(message, block, view, cap)
                if part is not None:
                    parts.append(part)
        transcript = "\n\n".join(parts)
        limit = self.params.max_transcript_chars
        if len(transcript) <= limit:
            return transcript
        head_chars = int(limit * TRANSCRIPT_HEAD_SHARE)
        tail_chars = int(limit * TRANSCRIPT_TAIL_SHARE)
        return transcript[:head_chars] + TRANSCRIPT_TRUNCATION_MARKER + transcript[len(transcript) - tail_chars :]

    @staticmethod
    def _render_block(message: Message, block: Block, view: _View, cap: int) -> str | None:
        if block.kind == "text":
            return f"[{message.role}]\n{_cap_text(block.text, cap)}"
        if block.kind == "tool_use":
            return f"[tool_use {block.tool_name} {block.tool_id}]\n{_cap_text(json_stringify(block.tool_input), cap)}"
        if block.kind == "tool_result":
            marker = " (error)" if block.is_error else ""
            content = view.placeholders.get(block.tool_id or "", block.text)
            return f"[tool_result {block.tool_id}{marker}]\n{_cap_text(content, cap)}"
        return None  # thinking blocks are omitted from the summarization transcript (compaction.ts)

    # ----------------------------------------------------------------- summary

    def prompt(self) -> str:
        return SUMMARY_SYSTEM_PROMPT

    @staticmethod
    def summary_user_text(transcript: str) -> str:
        """compaction.ts ``summarizeToCheckpointText``: the single user message around the transcript."""
        return f"Transcript of the conversation segment to checkpoint:\n\n{transcript}\n\nProduce the checkpoint now."

    summary_model_reason = "its auxiliary model, recorded by session.started (ADR-10: never the main model)"

    def summary_model(self, messages: Sequence[Message]) -> str | None:
        """The aux model session.started recorded (ADR-10: compaction summaries never use the main model)."""
        return self.params.aux_model

    def parse_summary(self, raw: str) -> str:
        """The checkpoint YAML from a raw summary; running_processes need the events (``checkpoint_yaml``)."""
        return serialize_checkpoint(parse_checkpoint_lenient(raw))

    def checkpoint_yaml(self, raw: str, *, messages: Sequence[Message]) -> str:
        """compaction.ts ``compressEvents``: lenient parse, running_processes from the process events."""
        checkpoint = parse_checkpoint_lenient(raw)
        checkpoint.running_processes = collect_running_processes(messages)
        return serialize_checkpoint(checkpoint)

    def carried_over(self, messages: Sequence[Message], cut: Cut) -> int:
        return 0  # compressEvents keeps nothing of the cut: the checkpoint stands for all of it

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        """KHAELOR names events by seq: the first kept event's, or one past the last event's."""
        if not messages:
            return end
        if end < len(messages):
            return _seq(messages[end])
        return _seq(messages[-1]) + 1

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        middle = self.extract_middle(messages, cut, also_pruned=prune)
        # compaction.ts summarizeToCheckpointText wraps the transcript in one user message.
        user_text = self.summary_user_text(self.render_transcript(middle))
        request = PlannedRequest(
            kind="checkpoint",
            system=self.prompt(),
            transcript=user_text,
            rounds=None,
            instructions="",
            max_tokens=self.max_summary_tokens,
            # summarizeToCheckpointText joins the completed text blocks with "\n".
            block_separator="\n",
            offline_reply=self.offline_checkpoint(messages, middle),
            # summarizeToCheckpointText's ModelRequest: ``system`` is a list of named text entries, the user
            # message one text block, ``tools: []``. The seed does not show the ModelClient that turns it into
            # a Messages API body (src/anthropic); assumed one to one: each system entry a text block (the API
            # has no field for its name), the content blocks as written, the empty tool list sent as it is.
            system_blocks=[{"type": "text", "text": self.prompt()}],
            user_blocks=[{"type": "text", "text": user_text}],
            extra_body={"tools": []},
        )
        return SummarizerPlan(requests=[request])

    def offline_checkpoint(self, messages: Sequence[Message], middle: Sequence[Message]) -> str:
        """The checkpoint written without a model, from the middle's events only (``extract_middle``).

        The objective is the head (selectCompactionCut protects the first user message as the original
        objective); files are the paths tools were asked to read or write; changes and completed work are the
        writing tools that succeeded; failed attempts are the failed tools with their first error line; the
        current state is the last step (assistant text or tool outcome); the next step is the latest user
        request inside the middle.
        An earlier checkpoint inside the middle is carried over. Nothing comes from the summarizer's prompt.
        """
        view = _View(middle)
        carried = [
            parse_checkpoint_lenient(middle[i].blocks[0].text if middle[i].blocks else "")
            for i in view.conversation
            if middle[i].raw_type == CONTEXT_COMPACTED
        ]
        checkpoint = Checkpoint()
        head = next((m for m in messages if m.raw_type == USER_MESSAGE), None)
        checkpoint.objective = _offline_line(head.text if head is not None else "", _OFFLINE_OBJECTIVE_CHARS)
        for earlier in carried:
            checkpoint.objective = checkpoint.objective or earlier.objective
            checkpoint.current_state = earlier.current_state
            checkpoint.completed += earlier.completed
            checkpoint.important_files += earlier.important_files
            checkpoint.changes += earlier.changes
            checkpoint.failed_attempts += earlier.failed_attempts
            checkpoint.decisions += earlier.decisions
        requests: dict[str, tuple[str, str | None, str]] = {}  # tool id → (tool name, path, what it was asked)
        user_requests: list[str] = []
        for i in view.conversation:
            message = middle[i]
            kind = message.raw_type
            if kind in (USER_MESSAGE, STEERING_INJECTED):
                line = _offline_line(message.text, _OFFLINE_LINE_CHARS)
                if line:
                    user_requests.append(line)
            elif kind == MODEL_TEXT_BLOCK:
                line = _offline_line(message.text, _OFFLINE_LINE_CHARS)
                checkpoint.current_state = line or checkpoint.current_state
            elif kind == TOOL_REQUESTED and message.blocks:
                block = message.blocks[0]
                name = block.tool_name or "tool"
                path = _tool_path(block.tool_input)
                requests[block.tool_id or ""] = (name, path, path or _asked(block.tool_input, block.text))
                if path is not None and all(f.path != path for f in checkpoint.important_files):
                    verb = "written" if _WRITING_TOOL.search(name) else "read"
                    checkpoint.important_files.append(ImportantFile(path=path, reason=f"{verb} by {name}"))
            elif kind in TOOL_RESULT_TYPES:
                name, path, target = requests.get(_tool_id(message) or "", ("tool", None, ""))
                outcome = {TOOL_COMPLETED: "done", TOOL_FAILED: "failed"}.get(kind, "cancelled")
                checkpoint.current_state = _offline_line(f"Last step: {name} {target} ({outcome})", _OFFLINE_LINE_CHARS)
                if kind == TOOL_FAILED:
                    error = view.placeholders.get(_tool_id(message) or "") or message.text
                    checkpoint.failed_attempts.append(
                        _offline_line(f"{name} {target} failed: {_offline_line(error, 160)}", _OFFLINE_LINE_CHARS)
                    )
                elif kind == TOOL_COMPLETED and _WRITING_TOOL.search(name) and path is not None:
                    checkpoint.changes.append(f"{name} {path}")
                    checkpoint.completed.append(f"{name} {path}")
        if user_requests:
            checkpoint.next_steps.append(f"Continue with the latest user request: {user_requests[-1]}")
        for key in ("completed", "changes", "failed_attempts", "decisions"):
            setattr(checkpoint, key, _unique(getattr(checkpoint, key))[-_OFFLINE_MAX_ITEMS:])
        checkpoint.important_files = checkpoint.important_files[-_OFFLINE_MAX_ITEMS:]
        return serialize_checkpoint(checkpoint)

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        return self.checkpoint_yaml(replies.get("checkpoint", ""), messages=messages)

    # The event log is append-only (docs/formats/khaelor.md): a compaction is one more event, not a new file.
    export_suffix: str | None = ".events.jsonl"
    export_keeps_after_point = True
    # docs/formats/khaelor.md: a context.compacted event replaces the events of its cut; the later one's cut
    # reaches past this one.
    resumes_from_last_compaction: str | None = "KHAELOR resumes from the last context.compacted event in the log"

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """The events up to the point, the ``context.compacted`` event KHAELOR would append there, then every
        event recorded after the point, unless ``data.end_at_point``: the last ``context.compacted`` replaces
        the history (docs/formats/khaelor.md), so a real one recorded later would hide this checkpoint.

        The new event takes the seq after the last one before the point, so each later event's seq, and any
        later compaction's cut that reaches that far, moves up by one: seqs stay strictly increasing. The trigger
        is ``user-command``: a reviewer, not the token budget, asked for this compaction. Written as the assumed
        import format is (one JSON object per line; docs/formats/khaelor.md), not as KHAELOR's own code would.
        """
        seqs = [_seq(m) for m in data.messages[data.cut.start : data.cut.end] if m.raw_type in CONVERSATION_EVENT_TYPES]
        if not seqs:
            raise ValueError("The cut holds no conversation event: a context.compacted event needs fromSeq and toSeq.")
        last_seq = 0
        last_ts: str | None = None  # the time of the last event before the point, as the log wrote it
        new_seq: int | None = None
        for number, line in data.lines:
            if new_seq is None and data.stop_line is not None and number >= data.stop_line:
                new_seq = last_seq + 1
                yield self._compacted_event(data, new_seq, seqs[0], seqs[-1], ts=last_ts)
                if data.end_at_point:
                    return
            if new_seq is None:
                event = _event_or_none(line)
                if event is not None and isinstance(event.get("seq"), int):
                    last_seq = event["seq"]
                if event is not None and isinstance(event.get("ts"), str):
                    last_ts = event["ts"]
                yield line
            else:
                yield _renumbered(line, new_seq)
        if new_seq is None:
            yield self._compacted_event(data, last_seq + 1, seqs[0], seqs[-1], ts=last_ts)

    def _compacted_event(self, data: ExportInput, seq: int, from_seq: int, to_seq: int, *, ts: str | None) -> bytes:
        payload = {
            "checkpointYaml": data.summary,
            "cut": {"fromSeq": from_seq, "toSeq": to_seq},
            "trigger": TRIGGER_USER,
            "tokensBefore": data.tokens_before,
            "summaryModel": data.summary_model,
        }
        # The time of the event before it, as the log wrote it (docs/formats/khaelor.md: "ts": "<ISO-8601>",
        # optional; the sample writes UTC with milliseconds and Z); the point's time from the conversation when
        # that event has none; the export's own only when no time is known.
        parsed = parse_timestamp(point_timestamp(data.messages)) or datetime.now(UTC)
        moment = ts or parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        event = {"seq": seq, "type": CONTEXT_COMPACTED, "ts": moment, "sessionId": data.session_id, "payload": payload}
        return (json.dumps(event, ensure_ascii=False) + "\n").encode()

    def compaction_payload(
        self,
        raw: str,
        *,
        messages: Sequence[Message],
        cut: Cut,
        trigger: str,
        tokens_before: int,
        summary_model: str,
    ) -> dict[str, Any]:
        """The ``context.compacted`` payload KHAELOR would record (compaction.ts ``CompactionCheckpoint``)."""
        self.check_cut(messages, cut)
        seqs = [_seq(m) for m in messages[cut.start : cut.end] if m.raw_type in CONVERSATION_EVENT_TYPES]
        return {
            "checkpointYaml": self.checkpoint_yaml(raw, messages=messages),
            "cut": {"fromSeq": seqs[0], "toSeq": seqs[-1]},
            "trigger": trigger,
            "tokensBefore": tokens_before,
            "summaryModel": summary_model,
        }

    # ----------------------------------------------------------------- decision

    def replay_rules(self, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> ReplayRules:
        return KhaelorReplayRules(self, thresholds=thresholds, summary_tokens=summary_tokens)

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision:
        """Prune first (the seed's order, docs/formats/khaelor.md §2), then compact if still over the trigger."""
        view_messages = messages[:at] if at is not None else messages
        estimated = self.context_estimate(view_messages)
        tokens_before = context_tokens if context_tokens is not None else self.context_tokens(view_messages)
        prune = self.prune_decision(view_messages)
        after_prune = max(tokens_before - prune.tokens_reclaimed_estimate, 0)
        compact = self.should_compact(messages=view_messages, context_tokens=after_prune)
        # The seed prices a pruned result by its raw modelText, so the prune recorded first leaves the cut as
        # select_cut finds it: decide, select_cut and the preview name one cut.
        cut = self._select_cut(view_messages)
        tokens_after = after_prune
        details: dict[str, Any] = {
            "prune": prune.payload(),
            "threshold": self.thresholds(model=None, version=None).autocompact,
            "threshold_is_assumption": True,
            "estimate": "ceil(chars / 4), assumed (budget.ts not shown)",
            "context_estimate": estimated,
        }
        replaced = 0  # conversation events of the cut an earlier compaction already replaced
        if cut is not None:
            middle_view = self._view(view_messages).with_pruned(prune.tool_use_ids)
            middle_tokens = sum(middle_view.estimate(i) for i in middle_view.conversation if cut.start <= i < cut.end)
            replaced = sum(
                1
                for i in middle_view.all_conversation
                if cut.start <= i < cut.end and middle_view.consumed(middle_view.seqs[i])
            )
            details["cut"] = {
                "fromSeq": _seq(view_messages[cut.start]),
                "toSeq": _seq(view_messages[cut.end - 1]),
                # What leaves the context: the cut's events still in it (the replaced ones are gone already).
                "middle_tokens": middle_tokens,
                "replaced_events": replaced,
            }
            if compact:
                # The checkpoint is at most the summary budget; the middle leaves the context.
                tokens_after = max(after_prune - middle_tokens, 0) + self.params.summary_max_output_tokens
        if compact and cut is None:
            reason = "over the proactive trigger, but there is no pairing-safe middle to compact"
        elif compact:
            reason = "over the proactive trigger after pruning: compact the middle"
        elif prune.tool_use_ids:
            reason = "under the proactive trigger after pruning: prune only"
        else:
            reason = "under the proactive trigger: nothing to do"
        if replaced:
            # compaction.ts selectCompactionCut walks every conversation event of the log, an earlier compaction's
            # cut included (only selectPruneCandidates skips those, inAnyRange): say so, the numbers count only
            # what is still in the context.
            reason += (
                f"; {replaced} event(s) of the cut were already replaced by an earlier compaction's checkpoint "
                "(selectCompactionCut walks the whole log): they are no longer in the context and count 0"
            )
        return Decision(
            strategy=self.name,
            should_compact=compact and cut is not None,
            tokens_before=tokens_before,
            cut=cut,
            prune=prune.tool_use_ids,
            tokens_after_estimate=tokens_after,
            reason=reason,
            details=details,
        )


# The offline checkpoint (KhaelorStrategy.offline_checkpoint) keeps each entry short and each list bounded, so
# it stays within the summary budget without being clipped mid-YAML.
_OFFLINE_OBJECTIVE_CHARS = 600
_OFFLINE_LINE_CHARS = 200
_OFFLINE_MAX_ITEMS = 20
# Tool-input keys naming the file a tool works on (KHAELOR's read_file / edit_file take ``path``).
_PATH_KEYS = ("path", "file_path", "filePath", "notebook_path")
_WRITING_TOOL = re.compile(r"write|edit|patch|create|delete|move|rename", re.IGNORECASE)
# A line of a numbered file listing (``29→code``, ``  12\tcode``): tool output, not a statement.
_DEVICE_PATH = re.compile(r"\S*/dev/\S*")
_NUMBERED_LINE = re.compile(r"^\s*\d+(?:→|\t)")


def _tool_path(tool_input: Any) -> str | None:
    """The file a tool was asked to work on; device files (``/dev/null``, ``/dev/tty``) are not files touched."""
    if not isinstance(tool_input, dict):
        return None
    for key in _PATH_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value.strip() and not value.startswith("/dev/"):
            return value.strip()
    return None


def _asked(tool_input: Any, rendered: str) -> str:
    """A tool call in a few words: its command when it has one, else its input; device paths left out."""
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    text = command if isinstance(command, str) else rendered
    return _offline_line(_DEVICE_PATH.sub("", text), 80)


def _offline_line(text: str, limit: int) -> str:
    """The first line of ``text`` that is a statement (not a numbered listing line), on one line, clipped."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip() and not _NUMBERED_LINE.match(ln)), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _cap_text(text: str, max_chars: int) -> str:
    """compaction.ts ``capText``."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + BLOCK_TRUNCATION_SUFFIX


# ───────────────────────────── in a replay ─────────────────────────────


def event_type_for(message: Message, block: Block) -> str | None:
    """The KHAELOR event type closest to one block of another agent's record (docs/formats/khaelor.md)."""
    if block.kind == "tool_use":
        return TOOL_REQUESTED
    if block.kind == "tool_result":
        return TOOL_FAILED if block.is_error else TOOL_COMPLETED
    if block.kind == "thinking" and message.role == "assistant":
        return MODEL_THINKING_BLOCK
    if block.kind != "text" or message.role == "meta" or message.kind in ("system", "bookkeeping", "unknown"):
        return None
    if message.role == "assistant":
        return MODEL_TEXT_BLOCK
    return USER_MESSAGE if message.kind == "prompt" else STEERING_INJECTED


class KhaelorReplayRules(ReplayRules):
    """KHAELOR in a replay: counts the whole prompt, acts above the line, prunes by a ``context.pruned`` event."""

    counts = "actual"
    strict = True

    def __init__(self, strategy: KhaelorStrategy, *, thresholds: Thresholds, summary_tokens: int) -> None:
        super().__init__(strategy, thresholds=thresholds, summary_tokens=summary_tokens)
        self.kh = strategy
        self.seq = 0  # seqs given to converted records of other agents

    def admit(self, message: Message) -> list[Message]:
        """KHAELOR events as they are; another agent's records as one KHAELOR-shaped event per block."""
        if message.raw_type in EVENT_TYPES:
            return [message]
        converted: list[Message] = []
        for block in message.blocks:
            event_type = event_type_for(message, block)
            if event_type is None:
                continue
            self.seq += 1
            # Message(...) field by field, not dataclasses.replace: twice as fast, once per block of every record
            # of a replayed session (tests/compaction/strategies/test_khaelor.py compares the two).
            converted.append(
                Message(
                    line=message.line,
                    role=message.role,
                    kind=message.kind,
                    agent=message.agent,
                    blocks=[block],
                    uuid=message.uuid,
                    parent_uuid=message.parent_uuid,
                    timestamp=message.timestamp,
                    model=message.model,
                    call_key=message.call_key,
                    usage=message.usage,
                    raw_type=event_type,
                    data={"seq": self.seq, "payload": {"toolUseId": block.tool_id} if block.tool_id else {}},
                    raw=message.raw,
                )
            )
        return converted

    def real_facts(self, message: Message) -> tuple[str, int | None]:
        # context.compacted keeps its trigger and tokensBefore in its payload (docs/formats/khaelor.md).
        payload = message.data.get("payload")
        if not isinstance(payload, dict):
            return super().real_facts(message)
        tokens = payload.get("tokensBefore")
        return str(payload.get("trigger") or ""), tokens if isinstance(tokens, int) else None

    def real_prune_saving(self, message: Message) -> int | None:
        # context.pruned records KHAELOR's own estimate of what it reclaimed (compaction.ts PruneDecision).
        payload = message.data.get("payload")
        saved = payload.get("tokensReclaimedEstimate") if isinstance(payload, dict) else None
        return saved if isinstance(saved, int) and not isinstance(saved, bool) else None

    def real_prune_ids(self, message: Message) -> tuple[str, ...]:
        # context.pruned names the results it cleared in its payload (compaction.ts PruneDecision ``toolUseIds``).
        payload = message.data.get("payload")
        ids = payload.get("toolUseIds") if isinstance(payload, dict) else None
        return tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()

    def kept_by_real(self, messages: Sequence[Message], position: int) -> Sequence[int]:
        # The log is append-only: a context.compacted event stands for its cut, every earlier event stays, and the
        # context estimate leaves out what a compaction replaced (ADR-5, ``context_estimate``).
        return range(position)

    def _seq_of(self, view: list[Message], index: int) -> int:
        message = view[max(0, min(index, len(view) - 1))] if view else None
        seq = message.data.get("seq") if message is not None else None
        return seq if isinstance(seq, int) else (message.line if message is not None else 0)

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        filler = "x" * (4 * self.summary_tokens)
        # An empty cut range (no recorded seq is -1): the summarised events are already out of the view.
        payload = {"checkpointYaml": filler, "cut": {"fromSeq": -1, "toSeq": -1}, "trigger": "replay"}
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            raw_type=CONTEXT_COMPACTED,
            blocks=[Block("text", filler)],
            data={"replay_synthetic": True, "seq": self._seq_of(view, cut.end - 1), "payload": payload},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        # Prune records stay wherever they were: they keep the kept results' placeholders in force.
        prunes = [i for i in range(cut.start, cut.end) if view[i].raw_type == CONTEXT_PRUNED]
        return (
            view[: cut.start] + [view[i] for i in prunes] + [summary] + view[cut.end :],
            origin[: cut.start] + [origin[i] for i in prunes] + [None] + origin[cut.end :],
        )

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        payload = {"toolUseIds": list(tool_ids), "placeholder": PRUNE_PLACEHOLDER, "tokensReclaimedEstimate": 0}
        view.append(
            Message(
                line=0,
                role="system",
                kind="system",
                raw_type=CONTEXT_PRUNED,
                data={"replay_synthetic": True, "seq": self._seq_of(view, len(view) - 1), "payload": payload},
            )
        )

    def view_tokens(self, view: list[Message]) -> int:
        return self.kh.context_estimate(view)


def _event_or_none(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _renumbered(line: bytes, inserted: int) -> bytes:
    """An event recorded after an event inserted with seq ``inserted``: its seq, and a cut reaching it, one up."""
    event = _event_or_none(line)
    if event is None or not isinstance(event.get("seq"), int):
        return line  # not an event: kept byte for byte (the importer reports it as it did before)
    event["seq"] += 1
    payload = event.get("payload")
    cut = payload.get("cut") if isinstance(payload, dict) and event.get("type") == CONTEXT_COMPACTED else None
    if isinstance(cut, dict):
        for key in ("fromSeq", "toSeq"):
            if isinstance(cut.get(key), int) and cut[key] >= inserted:
                cut[key] += 1
    return (json.dumps(event, ensure_ascii=False) + "\n").encode()
