"""The protocol every compaction strategy implements, and the values it returns.

A strategy works on the *conversation view* of a session: the ``Message`` records that reach
the model, in order (bookkeeping and unknown records removed). Indices in ``Cut`` and
``Decision`` are positions in that list. ``at`` means "the session as it stood when
``messages[:at]`` existed" (None = the whole session).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import orjson

from compaction.agents import SummaryStructure
from compaction.prompt_cache import CachePolicy
from compaction.summarize import SummaryRequest, build_messages, build_user_content, model_family, request_body

# Re-exported: strategy modules and older callers still import Thresholds from here.
from compaction.thresholds import Thresholds as Thresholds
from compaction.transcript import Block, Message, SessionInfo


@dataclass(slots=True)
class Cut:
    """messages[:start] is the kept head, messages[start:end] is summarised, messages[end:] the kept tail."""

    start: int
    end: int
    first_kept: int  # the agent's own index of the first kept item (klaude ``first_kept_index``)
    reason: str = ""


class CutRefused(ValueError):
    """A hand-placed cut that the strategy will not accept; the message says why."""


@dataclass(slots=True)
class Decision:
    strategy: str
    should_compact: bool
    tokens_before: int
    cut: Cut | None
    prune: list[str] = field(default_factory=list)  # tool ids whose results would be pruned
    tokens_after_estimate: int = 0
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PlannedRequest:
    """One summarizer call exactly as the agent builds it."""

    kind: str  # the agent's name for the call: "compact", "history", "task_prefix", "checkpoint", ...
    system: str
    transcript: str
    rounds: list[str] | None  # API-round groups, oldest first, when the agent drops them on prompt-too-long
    instructions: str
    max_tokens: int
    round_tokens: list[int] | None = None  # the agent's own estimate of each round, when it prices them
    block_separator: str = ""  # how the agent joins the reply's text blocks into one summary
    offline_reply: str | None = None  # the reply in the agent's own format, extracted without a model
    # The conversation as Messages API turns per round, when the agent sends the conversation itself (Claude
    # Code); None: the user message is ``user_content``'s text.
    round_messages: list[list[dict[str, Any]]] | None = None
    # The agent client's own request shape, when it is more than a system string and one text block
    # (``SummaryRequest``: klaude-code's system and user content blocks, body fields and betas).
    system_blocks: list[dict[str, Any]] | None = None
    user_blocks: list[dict[str, Any]] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)

    @property
    def api_messages(self) -> list[dict[str, Any]]:
        """The ``messages`` of the request exactly as sent (before any prompt-too-long retry)."""
        if self.round_messages is not None:
            return build_messages(self.round_messages, truncated=False, instructions=self.instructions)
        if self.user_blocks is not None:
            return [{"role": "user", "content": [dict(block) for block in self.user_blocks]}]
        return [{"role": "user", "content": self.user_content}]

    def api_body(self, *, model: str) -> dict[str, Any]:
        """The whole JSON body the summarizer sends for this request with ``model`` (first attempt)."""
        return request_body(self.summary_request(model=model), self.api_messages)

    @property
    def user_content(self) -> str:
        """Exactly what the summarizer receives as the user message (before any prompt-too-long retry)."""
        return build_user_content(self.rounds or [self.transcript], truncated=False, instructions=self.instructions)

    def summary_request(self, *, model: str) -> SummaryRequest:
        return SummaryRequest(
            system=self.system,
            transcript=self.transcript,
            rounds=self.rounds,
            model=model,
            max_tokens=self.max_tokens,
            instructions=self.instructions,
            round_tokens=self.round_tokens,
            block_separator=self.block_separator,
            offline_reply=self.offline_reply,
            round_messages=self.round_messages,
            system_blocks=self.system_blocks,
            user_blocks=self.user_blocks,
            extra_body=self.extra_body,
            extra_headers=self.extra_headers,
        )


@dataclass(slots=True)
class SummarizerPlan:
    """The requests a compaction sends, and what the agent keeps to assemble the final summary from them."""

    requests: list[PlannedRequest] = field(default_factory=list)
    state: Any = None  # strategy-owned (klaude's plan and file details); opaque to callers

    @property
    def sha256(self) -> str:
        """One digest of every request: what a reviewer saw is what a run sends."""
        digest = hashlib.sha256()
        for request in self.requests:
            for part in (request.kind, request.system, request.user_content, str(request.max_tokens)):
                digest.update(part.encode())
                digest.update(b"\0")
            if request.round_messages is not None:  # the turns themselves, as sent
                digest.update(orjson.dumps(request.api_messages))
                digest.update(b"\0")
            # The agent client's blocks, fields and headers (system_blocks, user_blocks, extra_*) are fixed by the
            # text above and the strategy's code, and stay out: a run stored before they existed keeps its digest.
        return digest.hexdigest()


@dataclass(slots=True)
class ExportInput:
    """What writing a compacted copy of a session in the agent's own format needs."""

    lines: Iterable[tuple[int, bytes]]  # (1-based line number, raw line with its newline) of the source file
    messages: Sequence[Message]  # the conversation view up to the point
    cut: Cut
    plan: SummarizerPlan
    summary: str  # the accepted final summary
    tokens_before: int
    stop_line: int | None  # the source line of the first record after the point (what follows is kept as is)
    session_id: str
    project: str
    version: str
    summary_model: str = ""  # the model that wrote the summary, for agents that record it (KHAELOR)
    # Drop every line from ``stop_line`` on. The agent resumes from its LAST compaction record, so an export
    # that kept a real compaction recorded after the point would resume from that one, not from this summary.
    end_at_point: bool = False


def point_timestamp(messages: Sequence[Message]) -> str | None:
    """The time of the last record at or before the point, as the agent wrote it (None: no record has one).

    An inserted compaction record carries it, not the export's own time: the agent would have written it then.
    """
    for message in reversed(messages):
        if message.timestamp:
            return message.timestamp
    return None


def written_text(line: bytes | None, *path: str) -> str | None:
    """The non-empty string at ``path`` (keys, outermost first) in a raw JSON line, exactly as the agent wrote it;
    None when the line is missing, not JSON, or holds no string there. An export copies a neighbour's time with it."""
    if line is None:
        return None
    try:
        value: Any = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def sent_to_model(message: Message) -> bool:
    """The records an agent sends: not bookkeeping, system notices or unknown records (the rule of the agents
    whose strategy names no other; Claude Code's ``reaches_model`` is the same, from its estimator)."""
    return message.role != "meta" and message.kind not in ("system", "bookkeeping", "unknown")


class Strategy(Protocol):
    name: str  # "claude-code" | "klaude-code" | "khaelor"
    label: str
    short_label: str  # the agent's name in sentences ("Claude Code", "klaude-code")
    estimator_label: str  # how the strategy's ``estimate`` counts, in words a user reads
    # Texts the agent writes when a compaction could not run (the diagnosis lists such a notice as a failure).
    compaction_refusals: tuple[str, ...]
    public_source: str | None  # where a user can read the agent's own rules (None: not published)
    # A model the agent runs, named in its docs/formats page: the one the help page computes the lines for.
    example_model: str
    cache_policy: CachePolicy  # its API provider's prompt cache: lifetime, writes (the cache-miss wording)
    summary_structure: SummaryStructure  # the sections its summary prompt asks for, and how they are headed
    window_parameter: str  # the parameter that is its context window (what ``--context-limit`` sets)

    def reaches_model(self, message: Message) -> bool:
        """Whether the agent sends this record to the model (what a diagnosis sizes and lists)."""
        ...

    def compacts(self, *, version: str | None) -> bool:
        """Whether this version of the agent compacts at all (no compaction: none can fail)."""
        ...

    def circuit_breaker(self, *, version: str | None) -> int | None:
        """After how many consecutive failed compactions the agent stops trying; None without such a rule."""
        ...

    @property
    def max_summary_tokens(self) -> int:
        """The output budget the strategy gives its summarizer."""
        ...

    def thresholds(self, *, model: str | None, version: str | None, observed_max: int = 0) -> Thresholds: ...

    def estimate(self, message: Message) -> int:
        """The strategy's own token estimate of one message."""
        ...

    def should_compact(self, *, messages: Sequence[Message], context_tokens: int) -> bool: ...

    def select_prune(self, messages: Sequence[Message]) -> list[str]: ...

    def select_cut(self, messages: Sequence[Message], *, at: int | None = None) -> Cut | None: ...

    def check_cut(self, messages: Sequence[Message], cut: Cut) -> None:
        """Raise ``CutRefused`` when a hand-placed cut splits a tool call from its result or cuts a protected part."""
        ...

    def render_transcript(self, messages: Sequence[Message]) -> str:
        """The exact text the summarizer receives for the summarised middle."""
        ...

    def prompt(self) -> str:
        """The system/instruction prompt the agent sends its summarizer."""
        ...

    def parse_summary(self, raw: str) -> str: ...

    def decide(
        self, messages: Sequence[Message], *, at: int | None = None, context_tokens: int | None = None
    ) -> Decision: ...

    def first_kept_id(self, messages: Sequence[Message], end: int) -> int:
        """The agent's own id of the first item kept after a cut ending at list position ``end``."""
        ...

    def carried_over(self, messages: Sequence[Message], cut: Cut) -> int:
        """The strategy's estimate of what it puts back from the summarised range after its summary
        (Codex re-inserts the newest user messages); 0 for an agent that keeps nothing of it."""
        ...

    def summarizer_plan(
        self, messages: Sequence[Message], cut: Cut, *, prune: Sequence[str], by_hand: bool
    ) -> SummarizerPlan:
        """The summarizer requests the agent sends for ``cut`` (``prune``: results pruned in the same step)."""
        ...

    def final_summary(self, replies: Mapping[str, str], *, plan: SummarizerPlan, messages: Sequence[Message]) -> str:
        """The summary the agent stores, from the summarizer's raw replies keyed by request kind."""
        ...

    def summary_model(self, messages: Sequence[Message]) -> str | None:
        """The model the agent itself summarises with; None when the session does not tell (a run then uses
        SUMMARY_MODEL)."""
        ...

    # Why that is the agent's model, in words a run page shows ("the session's main model: ...").
    summary_model_reason: str

    @property
    def export_suffix(self) -> str | None:
        """The file suffix of a compacted export in the agent's own format; None when it has none."""
        ...

    # Whether the export keeps what was recorded after the point (when no real compaction follows it); False:
    # the export always ends at the point.
    export_keeps_after_point: bool
    # Why the agent would resume from a real compaction recorded after an exported point, not from the exported
    # one (its loader starts from its last compaction record), in words an export page shows; None: the agent
    # names no such rule (the page then says it resumes from its last compaction).
    resumes_from_last_compaction: str | None

    def export_compacted(self, data: ExportInput) -> Iterator[bytes]:
        """A compacted copy of the session, as the agent itself would leave it after the compaction."""
        ...

    def session_thresholds(self, messages: Sequence[Message], *, info: SessionInfo | None = None) -> Thresholds:
        """The strategy's lines for this session, from its records (model, version, largest recorded context).

        ``info`` supplies what the records do not say (a log without a model or version).
        """
        ...

    def replay_rules(self, *, thresholds: Thresholds, summary_tokens: int, version: str | None) -> ReplayRules:
        """How a replay applies this strategy to a session with these lines and this summary size."""
        ...


def with_instructions(request: PlannedRequest, text: str, *, strategy: Strategy) -> PlannedRequest:
    """``request`` with a reviewer's summary instructions (a lab variant), as the agent would take them.

    A strategy whose agent takes instructions of its own declares ``prompt_with_instructions(text)``, the prompt it
    then sends (Claude Code: ``/compact <instructions>``'s "Additional Instructions:" inside its prompt, before the
    trailer, docs/compaction/claude-code.md); it applies to the request that sends that strategy's own prompt.
    Otherwise the text is appended to the agent's own prompt: after its last user block when it sends blocks
    (klaude-code), else after its instructions (or after the transcript when it sends none, KHAELOR). An empty text
    leaves the request as it is.
    """
    text = text.strip()
    if not text:
        return request
    own = getattr(strategy, "prompt_with_instructions", None)
    if callable(own) and request.instructions and request.instructions == strategy.prompt():
        return replace(request, instructions=str(own(text)))
    if request.user_blocks is not None:
        return replace(request, user_blocks=[*(dict(b) for b in request.user_blocks), {"type": "text", "text": text}])
    return replace(request, instructions=f"{request.instructions}\n\n{text}" if request.instructions else text)


def context_estimates(strategy: Strategy, messages: Sequence[Message]) -> list[int]:
    """The strategy's estimate of each of ``messages`` as it stands in the context at the end of ``messages``.

    A strategy whose log keeps what an earlier compaction replaced (KHAELOR's append-only event log: a
    ``context.compacted`` event stands for its cut, the cut's events stay in the log) prices such a message 0, and
    a result an earlier prune replaced as its placeholder, through its own ``context_estimates(messages)``. The
    default, for a strategy without one, is today's: ``strategy.estimate`` of every message (every message of
    its view is in the context). A preview subtracts these, never estimates of messages already gone.
    """
    own = getattr(strategy, "context_estimates", None)
    if own is not None:
        estimates = list(own(messages))
        if len(estimates) != len(messages):
            raise ValueError(f"{strategy.name}.context_estimates gave {len(estimates)} values for {len(messages)}")
        return estimates
    return [strategy.estimate(m) for m in messages]


# ----------------------------------------------------------------------------- session facts


def session_model(messages: Sequence[Message]) -> str | None:
    """The model of the session's last real reply (a reply the agent wrote itself names no real model)."""
    for message in reversed(messages):
        if message.role == "assistant" and message.model and not message.synthetic:
            return message.model
    return None


def session_version(messages: Sequence[Message]) -> str | None:
    """The agent version of the session's last record that names one."""
    for message in reversed(messages):
        version = message.data.get("version")
        if isinstance(version, str):
            return version
    return None


def recorded_thresholds(
    strategy: Strategy, messages: Sequence[Message], *, info: SessionInfo | None = None
) -> Thresholds:
    """``strategy.thresholds`` for the model, version and largest context the records show, else ``info``'s."""
    observed = max((m.usage.context for m in messages if m.usage is not None), default=0)
    model = session_model(messages) or (info.model if info else None)
    version = session_version(messages) or (info.agent_version if info else None)
    return strategy.thresholds(model=model, version=version, observed_max=observed)


# ----------------------------------------------------------------------------- the summary model

ModelSource = Literal["agent", "override", "fallback"]


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model a summary is asked of, and why: the one answer run, preview, CLI and pages show."""

    model: str
    source: ModelSource  # the agent's own, the reviewer's override, or SUMMARY_MODEL
    note: str  # one sentence that says why
    agent_model: str | None  # the model the agent itself would use (None: the session does not tell)


def summary_model_choice(
    strategy: Strategy, messages: Sequence[Message], *, fallback: str, override: str | None = None
) -> ModelChoice:
    """The agent's own summary model when the Anthropic API can run it (a Claude model), else ``fallback``
    (SUMMARY_MODEL); a reviewer's ``override`` wins over both."""
    own = strategy.summary_model(messages)
    agent = strategy.short_label
    if override:
        said = f"{agent} would use {own}" if own else f"the session does not name {agent}'s summary model"
        return ModelChoice(override, "override", f"chosen for this run ({said})", own)
    if own is None:
        return ModelChoice(
            fallback, "fallback", f"SUMMARY_MODEL: the session does not name {agent}'s summary model", None
        )
    if model_family(own) is None:
        return ModelChoice(
            fallback,
            "fallback",
            f"SUMMARY_MODEL: {agent} would use {own} ({strategy.summary_model_reason}), a model the Anthropic API "
            "cannot run",
            own,
        )
    return ModelChoice(own, "agent", f"{agent}'s own: {strategy.summary_model_reason}", own)


# ----------------------------------------------------------------------------- replay rules

# How the agent counts the context it compares with its lines:
# "pending": last usage + an estimate of what arrived since (Claude Code tokenCountWithEstimation,
# compaction doc §4.1); "last_usage": only the last recorded usage (klaude _get_last_context_tokens,
# klaude-code doc §3.3); "actual": the whole prompt (KHAELOR estimate).
ContextCount = Literal["pending", "last_usage", "actual"]


class ReplayRules:
    """How one strategy counts, which lines make it act, and how its compactions reshape the replay's view.

    The replay keeps a *view*: the records the simulated context still holds, in order. This base class is
    the neutral behaviour (count the whole prompt, act at ``tokens >= autocompact``, a compaction keeps the
    head and the tail around a summary); each strategy module overrides what its agent does differently.
    """

    counts: ContextCount = "actual"
    strict = False  # True: act when tokens > line; False: when tokens >= line
    reactive = True  # compacts after a prompt-too-long error

    def __init__(self, strategy: Strategy, *, thresholds: Thresholds, summary_tokens: int) -> None:
        self.strategy = strategy
        self.thresholds = thresholds
        self.summary_tokens = summary_tokens
        # Without an autocompact line the agent does not compact on its own, neither before nor after an overflow.
        self.reactive = thresholds.autocompact is not None
        self.notes: list[str] = []  # what these rules assumed or inferred for the session, shown with the result

    def real_facts(self, message: Message) -> tuple[str, int | None]:
        """The trigger and the agent's own count before a real compaction, from its record (the parsers keep them
        as ``trigger`` and ``pre_tokens`` / ``tokens_before``); an agent that nests them elsewhere overrides."""
        data = message.data
        count = data.get("pre_tokens", data.get("tokens_before"))
        try:
            tokens = int(count) if isinstance(count, (int, str)) and not isinstance(count, bool) else None
        except ValueError:
            tokens = None
        return str(data.get("trigger") or ""), tokens

    def real_prune_saving(self, message: Message) -> int | None:
        """What a real prune record says it saved, by the agent's own estimate (the parsers keep it as
        ``tokens_saved``); None: not recorded. An agent that nests it elsewhere overrides."""
        saved = message.data.get("tokens_saved")
        return saved if isinstance(saved, int) and not isinstance(saved, bool) else None

    def real_prune_ids(self, message: Message) -> tuple[str, ...]:
        """The tool results a real prune record says it cleared (the parsers keep them as ``cleared_tool_ids``);
        an agent that nests them elsewhere overrides."""
        ids = message.data.get("cleared_tool_ids")
        return tuple(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else ()

    def summary_size(self, message: Message) -> int | None:
        """The strategy's estimate of a real summary as it stands in the context after the compaction; None when
        the record does not show it (an encrypted summary)."""
        return self.estimate(message)

    def user_asked(self, trigger: str) -> bool:
        """Whether a real compaction with this trigger was the user's command (``/compact``): a replay that models
        its own compactions applies it too, where the user asked for it, since no rule of the strategy fires it."""
        return trigger == "manual"

    # The agent puts context back after a compaction that its records do not show (Claude Code's re-read files, todos
    # and skills): a modelled compaction adds what the session's real ones measured (``measured_reattached``, set by
    # the replay), else the rules' own model of it.
    reattaches = False
    measured_reattached: int | None = None

    # A compaction that frees too little: the count reaches the line again within this many calls (what the replay
    # calls out for every agent).
    refill_calls = 3

    def thrash_stop(self) -> tuple[int, int, str] | None:
        """(compactions in a row, within how many calls each, why) after which the agent's version stops compacting
        because each freed too little; None: its version has no such rule and keeps compacting."""
        return None

    def reattached_note(self) -> str:
        """How a modelled compaction sizes what the agent re-attaches, in words the notes show."""
        return ""

    def kept_by_real(self, messages: Sequence[Message], position: int) -> Sequence[int]:
        """Positions before the real compaction record at ``position`` that the agent kept in its context (an agent
        whose log keeps its tail in place before the record, KHAELOR); none for an agent that writes what it keeps
        after the record."""
        return ()

    def user_cut(
        self, view: list[Message], origin: Sequence[int | None], messages: Sequence[Message], position: int
    ) -> Cut | None:
        """The cut of a compaction the user asked for, modelled where its record at ``position`` says which part it
        summarised (Claude Code's partial compaction); None: the strategy's own cut."""
        return None

    def response_output(self, response: Sequence[Message], *, recorded: int) -> tuple[int, bool]:
        """The output tokens of one response as the agent counted them, and whether that is an estimate."""
        return recorded, False

    def blocks(self, counted: int) -> str | None:
        """Why the agent would refuse to send a request it counts at ``counted`` (None: it sends it)."""
        return None

    def overflow_reason(self, actual: int, window: int) -> str:
        return f"the request ({actual:,} tokens) does not fit the {window:,}-token window"

    def apply_recorded_prune(self, view: list[Message], tool_ids: list[str]) -> None:
        """Apply the real agent's own recorded prune of ``tool_ids`` to the view (in place: records changed, or records
        of the strategy's own appended at the end; none removed)."""

    def estimate(self, message: Message) -> int:
        return self.strategy.estimate(message)

    def upcoming_call(self, records: Sequence[Message]) -> None:
        """The records of the call about to be checked (its model, the window it reports), before ``level``.

        An agent whose limit depends on the model of the request it is about to send (Codex's model-downshift
        check) reads it here; the others have one limit for the session.
        """

    def count(self, counted: int) -> int:
        """The agent's whole count from the replay's (last usage and what arrived since): a term the agent adds
        of its own (Codex's reasoning estimate) goes in here, so the count shown is the one it compares."""
        return counted

    def call_window(self, window: int) -> int:
        """The window of the call ``upcoming_call`` saw (``window``: the session's)."""
        return window

    def admit(self, message: Message) -> list[Message]:
        """The record(s) the strategy sees for one recorded message."""
        return [message]

    def fires(self, decision: Decision) -> bool:
        """Whether a decide() taken at the compaction line compacts."""
        return decision.should_compact and decision.cut is not None

    def over(self, tokens: int, line: int | None) -> bool:
        """Whether ``tokens`` reaches ``line`` the way the agent compares them (None: no such line)."""
        if line is None:
            return False
        return tokens > line if self.strict else tokens >= line

    def level(self, counted: int, *, idle_minutes: float | None) -> int:
        """0 = nothing to do, 1 = a prune may be due, 2 = a compaction is due."""
        return 2 if self.over(counted, self.thresholds.autocompact) else 0

    def decide(self, view: list[Message], counted: int) -> Decision:
        return self.strategy.decide(view, context_tokens=counted)

    def reactive_cut(self, view: list[Message]) -> Cut | None:
        return self.strategy.select_cut(view)

    def is_synthetic(self, message: Message) -> bool:
        """A record the replay made itself (a simulated summary or prune), not one of the session's."""
        return bool(message.data.get("replay_synthetic"))

    def summary_message(self, view: list[Message], cut: Cut) -> Message:
        """The simulated summary: ``summary_tokens`` worth of text where the summarised middle was."""
        return Message(
            line=0,
            role="user",
            kind="compact_summary",
            blocks=[Block("text", "x" * (4 * self.summary_tokens))],
            raw_type="replay/summary",
            data={"replay_synthetic": True},
        )

    def after_compaction(
        self, view: list[Message], origin: list[int | None], cut: Cut, summary: Message
    ) -> tuple[list[Message], list[int | None]]:
        """The view once ``cut`` is replaced by ``summary``: the (real) head, the summary, the kept tail.

        ``origin`` holds, for each view record, its position in the session (None for the replay's own).
        """
        head = [i for i in range(cut.start) if not self.is_synthetic(view[i])]
        return (
            [view[i] for i in head] + [summary] + view[cut.end :],
            [origin[i] for i in head] + [None] + origin[cut.end :],
        )

    def apply_prune(self, view: list[Message], tool_ids: list[str], decision: Decision) -> None:
        """Make the pruned results count as what the agent replaces them with (in place: records changed, or records
        of the strategy's own appended at the end, as KHAELOR's ``context.pruned``; none removed)."""

    def view_tokens(self, view: list[Message]) -> int:
        """The strategy's estimate of the whole view."""
        return sum(self.estimate(m) for m in view)


# A strategy makes these for compaction/layers.py, which reads them: defined here, below both, so a strategy needs
# no import of the layers (which replay a session) to describe its own.
@dataclass(slots=True)
class Layer:
    """One layer's verdict on the request about to be sent."""

    number: int  # its place in the order (the blocking check comes last)
    name: str
    enabled: bool
    why: str  # why it is on or off for this session: feature gate, version, setting
    acts: bool  # on, and it would change the request
    removes: int  # tokens it takes out of the request (the agent's own estimate)
    adds: int = 0  # tokens it puts in (a compaction's summary)
    tokens_after: int = 0  # the request left after this layer
    counted_after: int = 0  # what the agent's own count says after it (what the next layers compare)
    detail: str = ""
    tool_ids: list[str] = field(default_factory=list)
    inferred: bool = False  # the verdict rests on an assumption (a remote flag's default, an unknown version)
