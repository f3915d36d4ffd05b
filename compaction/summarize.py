"""Summarizers: turn the summarised middle of a cut into summary text.

Two implementations of one protocol:

* ``AnthropicSummarizer`` streams the request through the official ``anthropic`` SDK, with the SDK's own
  retries switched off so that our policy applies (and is testable): exponential backoff on 429 (honouring
  ``retry-after``), 529, 5xx and dropped connections or streams; a prompt-too-long answer retried with the
  oldest API rounds dropped, as Claude Code does; and a circuit breaker after consecutive failures.
* ``OfflineSummarizer`` needs no key and no network: a deterministic, extractive, clearly labelled summary,
  so every screen can be tried without an API key.

Pure Python: no Django here.

Sections (§) refer to docs/compaction/claude-code.md.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import httpx2

from compaction.costs import PriceOverrides, call_cost
from compaction.tokens import chars_div_4
from compaction.transcript import Usage

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[str], None]

# Prefix Claude Code puts before the kept rounds after a prompt-too-long retry
# (docs/compaction/claude-code.md §2.6 step 4, compact.ts truncateHeadForPTLRetry).
TRUNCATION_MARKER = "[earlier conversation truncated for compaction retry]"
# Claude Code retries the compact request at most 3 times on prompt-too-long (§1.2 MAX_PTL_RETRIES, compact.ts:227).
MAX_PTL_RETRIES = 3
# When the token gap cannot be parsed, Claude Code drops 20% of the API-round groups, at least one
# (§1.2 "PTL fallback drop fraction", compact.ts truncateHeadForPTLRetry).
PTL_FALLBACK_DROP_FRACTION = 0.2
# Consecutive failures before giving up (§1.2 MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES, autoCompact.ts:70).
BREAKER_THRESHOLD = 3
# Backoff of Claude Code v2.1.88 src/services/api/withRetry.ts getRetryDelay: 500 ms * 2^(attempt-1),
# at most 32 s, plus up to 25% jitter.
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 32.0
BACKOFF_JITTER = 0.25
# Our own cap on a server-sent retry-after: a background run should not sit for an hour on one header.
RETRY_AFTER_CAP_S = 60.0
# Total requests per summary, whatever happens (transient retries plus prompt-too-long retries).
MAX_ATTEMPTS = 8
# The API's wording, parsed as Claude Code's parsePromptTooLongTokenCounts does (§2.8).
_PTL_RE = re.compile(r"prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)\s*maximum", re.IGNORECASE)


@dataclass(slots=True)
class SummaryRequest:
    """What to summarise and how.

    ``rounds`` is the transcript split into API-round groups (oldest first; a new group starts at each new
    assistant message id, as in Claude Code's grouping.ts), so a prompt-too-long retry can drop the oldest.
    When it is None the transcript is one indivisible round.
    """

    system: str
    transcript: str
    rounds: list[str] | None
    model: str
    max_tokens: int
    instructions: str = ""  # the strategy's summary prompt, sent after the transcript
    round_tokens: list[int] | None = None  # the strategy's estimate of each round (else chars / 4 of its text)
    block_separator: str = ""  # how the agent joins the reply's text blocks into one summary
    offline_reply: str | None = None  # the agent-shaped reply the strategy extracts itself, used without a key
    # The conversation as Messages API turns, one list per round (same length as ``rounds``), for an agent that
    # sends the conversation itself rather than a rendering of it (Claude Code's compaction); None: one user
    # message of text.
    round_messages: list[list[dict[str, Any]]] | None = None
    # The request's shape where the agent's own client sends more than a system string and one text block:
    # ``system`` as content blocks, the one user message's content blocks, other body fields (temperature,
    # tool_choice, ...) and headers (betas). klaude-code's Anthropic provider sends all four.
    system_blocks: list[dict[str, Any]] | None = None
    user_blocks: list[dict[str, Any]] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    extra_headers: dict[str, str] = field(default_factory=dict)


def request_body(request: SummaryRequest, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON body the summarizer sends for ``messages``, as it goes on the wire (a streamed request)."""
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system": request.system if request.system_blocks is None else request.system_blocks,
        "messages": messages,
        "stream": True,
    }
    body.update(request.extra_body)
    return body


def first_messages(request: SummaryRequest) -> list[dict[str, Any]]:
    """The ``messages`` of the first attempt (no round dropped yet)."""
    rounds = list(request.rounds) if request.rounds else [request.transcript]
    if request.round_messages and len(request.round_messages) == len(rounds):
        return build_messages(request.round_messages, truncated=False, instructions=request.instructions)
    if request.user_blocks is not None:
        return [{"role": "user", "content": [dict(block) for block in request.user_blocks]}]
    return [{"role": "user", "content": build_user_content(rounds, truncated=False, instructions=request.instructions)}]


@dataclass(slots=True)
class SummaryResult:
    text: str
    model: str
    input_tokens: int  # whole prompt: input + cache creation + cache read
    output_tokens: int
    cost_usd: float | None  # None when the model has no known price (compaction.costs)
    duration_s: float
    attempts: int  # requests sent, successful one included
    dropped_rounds: int  # oldest rounds left out after prompt-too-long answers
    raw: dict[str, Any] = field(default_factory=dict)  # response id, usage, stop reason, attempt log
    offline: bool = False


class SummaryFailed(Exception):
    """A summary could not be produced; the message says why and never contains the API key."""

    def __init__(self, message: str, *, reason: str, attempts: int, last_error: str = "") -> None:
        super().__init__(message)
        # "circuit_breaker" | "prompt_too_long" | "rejected" | "max_attempts"
        self.reason = reason
        self.attempts = attempts
        self.last_error = last_error


class Summarizer(Protocol):
    def summarize(self, request: SummaryRequest, *, on_progress: ProgressCallback | None = None) -> SummaryResult:
        """Summarise; ``on_progress`` receives the text so far while it streams (throttled)."""
        ...


# --- model names --------------------------------------------------------------------------------

# claude-opus-4-5-20251101, claude-sonnet-5, claude-opus-4-20250514, claude-haiku-4-5[1m]
_NEW_ID = re.compile(r"^claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-\d{8}|-latest)?(?:\[1m\])?$")
# claude-3-5-sonnet-20241022, claude-3-opus-latest
_OLD_ID = re.compile(r"^claude-(\d+)(?:-(\d))?-(opus|sonnet|haiku)(?:-\d{8}|-latest)?$")


def model_family(model: str) -> tuple[str, str] | None:
    """("sonnet", "4.5") for claude-sonnet-4-5-20250929; None for a name we do not recognise."""
    name = model.strip().lower().removeprefix("anthropic/")
    if match := _NEW_ID.match(name):
        family, major, minor = match.groups()
        return family, f"{major}.{minor}" if minor else major
    if match := _OLD_ID.match(name):
        major, minor, family = match.groups()
        return family, f"{major}.{minor}" if minor else major
    return None


def estimate_cost_usd(
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    prices: PriceOverrides | None = None,
) -> float | None:
    """Cost of one call at the price a session's calls are costed at (``compaction.costs``: genai-prices, or the
    ``prices`` override for the models it names); None for a model without a known price."""
    usage = Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_creation_input_tokens=cache_creation_input_tokens,
        cache_read_input_tokens=cache_read_input_tokens,
    )
    cost = call_cost(usage, model=model, overrides=prices)
    return cost.total if cost is not None else None


# --- the Anthropic summarizer -------------------------------------------------------------------

FailureKind = Literal["transient", "prompt_too_long", "rejected"]


@dataclass(slots=True)
class _Failure:
    kind: FailureKind
    label: str  # short, key-free description: "529 overloaded: Overloaded"
    retry_after: float | None = None
    token_gap: int | None = None  # prompt-too-long: tokens over the maximum


class _IncompleteStream(Exception):
    """The stream ended without message_stop (a proxy closed it cleanly mid-answer)."""


class AnthropicSummarizer:
    """Summaries through the Messages API, streamed, with our own retry policy."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        breaker_threshold: int = BREAKER_THRESHOLD,
        backoff_base: float = BACKOFF_BASE_S,
        backoff_max: float = BACKOFF_MAX_S,
        retry_after_cap: float = RETRY_AFTER_CAP_S,
        max_ptl_retries: int = MAX_PTL_RETRIES,
        jitter: bool = True,
        timeout_s: float = 600.0,
        attempt_deadline_s: float | None = None,
        progress_interval_s: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        prices: PriceOverrides | None = None,
    ) -> None:
        if not api_key:
            raise ValueError("AnthropicSummarizer needs an API key; use OfflineSummarizer without one")
        self.prices = prices  # the MODEL_PRICES override, as a session's calls are costed with
        self._api_key = api_key
        self.max_attempts = max_attempts
        self.breaker_threshold = breaker_threshold
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_cap = retry_after_cap
        self.max_ptl_retries = max_ptl_retries
        self.jitter = jitter
        self.progress_interval_s = progress_interval_s
        self._sleep = sleep
        self._clock = clock
        # The SDK's timeout bounds each read; the deadline bounds a whole attempt, so an API that trickles a
        # byte now and then cannot hold a run for long either.
        self.attempt_deadline_s = attempt_deadline_s
        if attempt_deadline_s is not None:
            timeout_s = min(timeout_s, attempt_deadline_s)

        # The SDK takes about 2 s to import: only a process that really calls the API pays for it.
        import anthropic

        # max_retries=0: every retry decision is ours, so backoff, breaker and round dropping are testable.
        self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s)

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicSummarizer(base_url={str(self._client.base_url)!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> AnthropicSummarizer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def summarize(self, request: SummaryRequest, *, on_progress: ProgressCallback | None = None) -> SummaryResult:
        import anthropic
        import httpx2

        started = self._clock()
        rounds = list(request.rounds) if request.rounds else [request.transcript]
        priced = request.round_tokens if request.rounds and request.round_tokens else None
        round_tokens = list(priced) if priced and len(priced) == len(rounds) else [chars_div_4(r) for r in rounds]
        dropped = 0
        consecutive_failures = 0
        ptl_retries = 0
        attempt_log: list[dict[str, Any]] = []
        last_label = ""
        turns = request.round_messages
        if not turns or len(turns) != len(rounds):
            turns = None
        for attempt in range(1, self.max_attempts + 1):
            if turns is not None:
                messages = build_messages(turns[dropped:], truncated=dropped > 0, instructions=request.instructions)
            elif request.user_blocks is not None and dropped == 0:  # the agent's own blocks, as it sends them
                messages = first_messages(request)
            else:
                content = build_user_content(rounds[dropped:], truncated=dropped > 0, instructions=request.instructions)
                messages = [{"role": "user", "content": content}]
            try:
                message, text = self._stream_once(request, messages, on_progress)
            except (anthropic.AnthropicError, httpx2.HTTPError, _IncompleteStream) as err:
                failure = self._classify(err)
            else:
                return self._result(
                    request=request,
                    message=message,
                    text=text,
                    started=started,
                    attempts=attempt,
                    dropped=dropped,
                    kept=len(rounds) - dropped,
                    attempt_log=attempt_log,
                )
            # Handled outside the except block so SummaryFailed carries no __context__: the SDK error holds
            # the request, and its headers hold the key.
            last_label = failure.label
            entry: dict[str, Any] = {"attempt": attempt, "error": failure.label, "kept_rounds": len(rounds) - dropped}
            attempt_log.append(entry)
            if failure.kind == "rejected":
                raise SummaryFailed(
                    f"summary request rejected: {failure.label}",
                    reason="rejected",
                    attempts=attempt,
                    last_error=failure.label,
                )
            if failure.kind == "prompt_too_long":
                # A definite answer from a healthy API, not an outage: it does not count toward the breaker.
                consecutive_failures = 0
                ptl_retries += 1
                remaining = rounds[dropped:]
                if len(remaining) <= 1 or ptl_retries > self.max_ptl_retries:
                    why = "no older round is left to drop" if len(remaining) <= 1 else "too many retries"
                    raise SummaryFailed(
                        f"{failure.label}; {why} (dropped {dropped} of {len(rounds)} rounds)",
                        reason="prompt_too_long",
                        attempts=attempt,
                        last_error=failure.label,
                    )
                drop = rounds_to_drop(round_tokens[dropped:], token_gap=failure.token_gap)
                dropped += drop
                entry["dropped_rounds"] = drop
                logger.info("summary prompt too long (%s); dropping %d oldest round(s)", failure.label, drop)
                continue
            consecutive_failures += 1
            if consecutive_failures >= self.breaker_threshold:
                raise SummaryFailed(
                    f"circuit breaker open after {consecutive_failures} consecutive failures: {failure.label}",
                    reason="circuit_breaker",
                    attempts=attempt,
                    last_error=failure.label,
                )
            if attempt == self.max_attempts:
                break
            wait = self._wait_seconds(failure, consecutive_failures)
            entry["wait_s"] = wait
            logger.warning("summary attempt %d failed (%s); retrying in %.2fs", attempt, failure.label, wait)
            self._sleep(wait)
        raise SummaryFailed(
            f"gave up after {self.max_attempts} attempts: {last_label}",
            reason="max_attempts",
            attempts=self.max_attempts,
            last_error=last_label,
        )

    def _result(
        self,
        *,
        request: SummaryRequest,
        message: Any,
        text: str,
        started: float,
        attempts: int,
        dropped: int,
        kept: int,
        attempt_log: list[dict[str, Any]],
    ) -> SummaryResult:
        usage = message.usage
        input_tokens = usage.input_tokens or 0
        output_tokens = usage.output_tokens or 0
        cache_creation = usage.cache_creation_input_tokens or 0
        cache_read = usage.cache_read_input_tokens or 0
        model = message.model or request.model
        return SummaryResult(
            text=text,
            model=model,
            input_tokens=input_tokens + cache_creation + cache_read,
            output_tokens=output_tokens,
            cost_usd=estimate_cost_usd(
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_creation_input_tokens=cache_creation,
                cache_read_input_tokens=cache_read,
                prices=self.prices,
            ),
            duration_s=self._clock() - started,
            attempts=attempts,
            dropped_rounds=dropped,
            raw={
                "id": message.id,
                "stop_reason": message.stop_reason,
                "usage": {
                    "input_tokens": input_tokens,
                    "output_tokens": output_tokens,
                    "cache_creation_input_tokens": cache_creation,
                    "cache_read_input_tokens": cache_read,
                },
                "attempt_log": attempt_log,
                "kept_rounds": kept,
            },
        )

    def _stream_once(
        self, request: SummaryRequest, messages: list[dict[str, Any]], on_progress: ProgressCallback | None
    ) -> tuple[Any, str]:
        text = ""
        last_emit = self._clock()
        deadline = None if self.attempt_deadline_s is None else last_emit + self.attempt_deadline_s
        emitted = ""
        finished = False
        # The body ``request_body`` writes: the SDK adds "stream": true itself, and fields it has no parameter for
        # (temperature) go as extra body.
        body = request_body(request, messages)
        with self._client.messages.stream(
            model=body.pop("model"),
            max_tokens=body.pop("max_tokens"),
            system=body.pop("system"),
            messages=body.pop("messages"),
            extra_body={key: value for key, value in body.items() if key != "stream"} or None,
            extra_headers=request.extra_headers or None,
        ) as stream:
            for event in stream:
                if deadline is not None and self._clock() > deadline:
                    raise _IncompleteStream(f"the attempt took longer than its {self.attempt_deadline_s:g} s deadline")
                if event.type == "text":
                    text = event.snapshot
                    now = self._clock()
                    if on_progress is not None and now - last_emit >= self.progress_interval_s:
                        on_progress(text)
                        emitted, last_emit = text, now
                elif event.type == "message_stop":
                    finished = True
            if not finished:
                raise _IncompleteStream("stream ended before message_stop")
            message = stream.get_final_message()
        text = request.block_separator.join(block.text for block in message.content if block.type == "text")
        if on_progress is not None and text != emitted:
            on_progress(text)
        return message, text

    def _classify(self, err: BaseException) -> _Failure:
        import anthropic
        import httpx2

        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            error_type = err.type or ""
            detail = self._redact(err.api_message or "")
            said = f": {detail}" if detail else ""
            if (status == 400 and "prompt is too long" in (err.api_message or str(err)).lower()) or status == 413:
                match = _PTL_RE.search(err.api_message or str(err))
                gap = int(match.group(1)) - int(match.group(2)) if match else None
                return _Failure("prompt_too_long", f"{status} prompt is too long{said}", token_gap=gap)
            # Mid-stream errors arrive as SSE "error" events on a 200 response: go by the error type.
            if status == 429 or error_type == "rate_limit_error":
                return _Failure("transient", f"429 rate limited{said}", retry_after=_retry_after(err.response))
            if status == 529 or error_type == "overloaded_error":
                return _Failure("transient", f"529 overloaded{said}", retry_after=_retry_after(err.response))
            if status >= 500 or status in (408, 409) or error_type == "api_error":
                return _Failure("transient", f"{status} server error{said}", retry_after=_retry_after(err.response))
            return _Failure("rejected", f"{status} {error_type or 'error'}{said}")
        if isinstance(err, anthropic.APIConnectionError):
            cause = err.__cause__
            return _Failure("transient", self._redact(f"connection error: {cause or err.message}"))
        if isinstance(err, httpx2.HTTPError):
            return _Failure("transient", self._redact(f"stream dropped: {err}"))
        if isinstance(err, _IncompleteStream):
            return _Failure("transient", str(err))
        return _Failure("rejected", self._redact(f"{type(err).__name__}: {err}"))

    def _wait_seconds(self, failure: _Failure, consecutive_failures: int) -> float:
        if failure.retry_after is not None and failure.retry_after >= 0:
            return min(failure.retry_after, self.retry_after_cap)
        base = min(self.backoff_base * 2 ** (consecutive_failures - 1), self.backoff_max)
        return base * (1 + BACKOFF_JITTER * random.random()) if self.jitter else base

    def _redact(self, text: str) -> str:
        # Short keys would blank out ordinary words; real keys are long.
        if len(self._api_key) >= 8:
            text = text.replace(self._api_key, "[redacted]")
        return text


def _retry_after(response: httpx2.Response | None) -> float | None:
    """Seconds from retry-after-ms or retry-after (seconds or HTTP date); None when absent or unreadable."""
    if response is None or response.status_code == 200:
        return None
    headers = response.headers
    if (value := headers.get("retry-after-ms")) is not None:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        return max(0.0, email.utils.mktime_tz(parsed) - time.time()) if parsed else None


def build_user_content(rounds: Sequence[str], *, truncated: bool, instructions: str) -> str:
    """The one user message sent: [truncation marker], the kept rounds, then the summary instructions."""
    parts = [TRUNCATION_MARKER] if truncated else []
    parts.extend(r for r in rounds if r)
    if instructions:
        parts.append(instructions)
    return "\n\n".join(parts)


def build_messages(
    rounds: Sequence[Sequence[dict[str, Any]]], *, truncated: bool, instructions: str
) -> list[dict[str, Any]]:
    """The Messages API turns sent for a conversation: [truncation marker], the kept rounds' turns, then the
    summary instructions as the last user turn.

    As Claude Code's ``normalizeMessagesForAPI`` (docs/compaction/claude-code.md §2.6 step 3), consecutive
    turns of one role are merged into one message, so the instructions join a trailing user turn (tool
    results) as its last block. After a prompt-too-long retry the kept rounds start with an assistant turn,
    which the API refuses: the marker goes first as a user turn (§2.6 step 4, truncateHeadForPTLRetry). A hand
    cut that starts on an assistant turn gets the same marker: the summarizer does not see what came before.
    """
    turns: list[dict[str, Any]] = [turn for kept in rounds for turn in kept]
    if truncated or (turns and turns[0]["role"] != "user"):
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": TRUNCATION_MARKER}]})
    if instructions:
        turns.append({"role": "user", "content": [{"type": "text", "text": instructions}]})
    merged: list[dict[str, Any]] = []
    for turn in turns:
        if merged and merged[-1]["role"] == turn["role"]:
            merged[-1]["content"].extend(turn["content"])
        else:
            merged.append({"role": turn["role"], "content": list(turn["content"])})
    for turn in merged:
        if turn["role"] == "user":
            # The API takes a user turn's tool results only before its other blocks.
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    return merged


def rounds_to_drop(round_tokens: Sequence[int], *, token_gap: int | None) -> int:
    """How many of the oldest rounds to drop after a prompt-too-long answer (always keeps one).

    As Claude Code's truncateHeadForPTLRetry (docs/compaction/claude-code.md §2.6 step 4): drop until the
    estimated tokens dropped (``round_tokens``, oldest first) cover the gap parsed from "N tokens > M
    maximum"; without a gap, 20% of the rounds.
    """
    droppable = len(round_tokens) - 1
    if droppable <= 0:
        return 0
    if token_gap is None or token_gap <= 0:
        return min(droppable, max(1, int(len(round_tokens) * PTL_FALLBACK_DROP_FRACTION)))
    covered = 0
    count = 0
    while count < droppable and covered < token_gap:
        covered += round_tokens[count]
        count += 1
    return max(1, count)


# --- the offline summarizer ---------------------------------------------------------------------

OFFLINE_MODEL = "offline-extractive"
OFFLINE_HEADER = "# Offline extractive summary\n_No model was called: these lines were extracted from the transcript._"

# A line that starts a speaker's section in a rendered transcript: "User:", "[assistant]", "### Tool result (Read):",
# "<user>", "Human:", "[tool_use Read] {...}". The optional qualifier is short so prose rarely matches.
_ROLE_RE = re.compile(
    r"^\s*(?:#{1,6}\s*|\*\*|\[|<)?\s*"
    r"(?P<role>user|human|assistant|claude|tool(?:[ _-]?(?:use|call|result|output))?|system)\b"
    r"(?P<qualifier>[^:\]>\n]{0,40}?)\s*(?:\*\*)?\s*[:\]>]\s?(?P<rest>.*)$",
    re.IGNORECASE,
)
_JSON_PATH_RE = re.compile(r'"(?:file_path|path|notebook_path|filename)"\s*:\s*"([^"\n]+)"')
_ABS_PATH_RE = re.compile(r"(?<![\w.:/~])(~?/(?:[\w.@+-]+/)+[\w.@+-]+)")
_REL_PATH_RE = re.compile(r"(?<![\w./~-])((?:[\w.@-]+/)+[\w@-]+\.[A-Za-z0-9]{1,8})\b")
_TASK_RE = re.compile(
    r"\b(?:TODO|FIXME|XXX)\b|^\s*[-*]\s*\[ \]|"
    r"\b(?:next steps?|remaining|still (?:need|to do)|not yet|pending|follow[- ]up)\b",
    re.IGNORECASE,
)
_MAX_FILES = 30
_MAX_ACTIONS = 6
_MAX_TASKS = 10
_LINE_CHARS = 200
_OBJECTIVE_CHARS = 600


@dataclass(slots=True)
class _Section:
    role: str  # user | assistant | tool | system | text (before any role line)
    lines: list[str]


class OfflineSummarizer:
    """A deterministic extractive summary: same request, same text. No key, no network."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock

    def summarize(self, request: SummaryRequest, *, on_progress: ProgressCallback | None = None) -> SummaryResult:

        started = self._clock()
        transcript = request.transcript or "\n\n".join(request.rounds or [])
        sections = split_sections(transcript)
        parts = extract_parts(sections)
        text = render_offline_summary(parts) if request.offline_reply is None else request.offline_reply
        limit = max(request.max_tokens, 1) * 4  # the strategy's output budget, at chars/4
        # A strategy's own reply is bounded by the strategy, and clipping it would break its format.
        if request.offline_reply is None and len(text) > limit:
            text = text[: limit - 1].rstrip() + "…"
        if on_progress is not None:
            on_progress(text)
        return SummaryResult(
            text=text,
            model=OFFLINE_MODEL,
            # Estimates (ceil(chars/4), compaction.tokens.chars_div_4): nothing was sent anywhere.
            input_tokens=chars_div_4(request.system) + chars_div_4(transcript) + chars_div_4(request.instructions),
            output_tokens=chars_div_4(text),
            cost_usd=0.0,
            duration_s=self._clock() - started,
            attempts=1,
            dropped_rounds=0,
            raw={"sections": dict(parts), "estimated_tokens": True},
            offline=True,
        )


def split_sections(transcript: str) -> list[_Section]:
    """Split rendered transcript text into speaker sections (text before the first role line is role "text")."""
    sections: list[_Section] = [_Section("text", [])]
    for line in transcript.splitlines():
        match = _ROLE_RE.match(line)
        if match:
            role = match.group("role").lower()
            role = {"human": "user", "claude": "assistant"}.get(role, role)
            if role.startswith("tool"):
                role = "tool"
            head = (match.group("qualifier").strip() + " " + match.group("rest").strip()).strip()
            sections.append(_Section(role, [head] if head else []))
        else:
            sections[-1].lines.append(line)
    return [s for s in sections if s.role != "text" or any(line.strip() for line in s.lines)]


def extract_parts(sections: Sequence[_Section]) -> dict[str, list[str]]:
    users = [s for s in sections if s.role == "user" and _joined(s)]
    first_text = next((_joined(s) for s in sections if _joined(s)), "")
    objective = _clip(_joined(users[0]) if users else first_text, _OBJECTIVE_CHARS)

    tool_sections = [s for s in sections if s.role == "tool"]
    path_sources = tool_sections or list(sections)
    files: list[str] = []
    for section in path_sources:
        for line in section.lines:
            for path in _paths(line):
                if path not in files:
                    files.append(path)
    files = files[:_MAX_FILES]

    action_lines = [
        f"[{s.role}] {_clip(line.strip(), _LINE_CHARS)}"
        for s in sections
        if s.role in ("assistant", "tool")
        for line in s.lines
        if line.strip()
    ]
    actions = action_lines[-_MAX_ACTIONS:]

    tasks: list[str] = []
    for section in sections:
        for line in section.lines:
            if _TASK_RE.search(line):
                item = _clip(line.strip(" -*\t"), _LINE_CHARS)
                if item and item not in tasks:
                    tasks.append(item)
    tasks = tasks[-_MAX_TASKS:]
    if users:
        tasks.append("Last user request: " + _clip(_joined(users[-1]), _LINE_CHARS))
    return {"objective": [objective] if objective else [], "files": files, "actions": actions, "tasks": tasks}


def render_offline_summary(parts: dict[str, list[str]]) -> str:
    def bullets(items: list[str]) -> str:
        return "\n".join(f"- {item}" for item in items) if items else "- (none found)"

    objective = parts["objective"][0] if parts["objective"] else "(none found)"
    return (
        f"{OFFLINE_HEADER}\n\n"
        f"## Objective\n{objective}\n\n"
        f"## Files touched\n{bullets(parts['files'])}\n\n"
        f"## Last actions\n{bullets(parts['actions'])}\n\n"
        f"## Open tasks\n{bullets(parts['tasks'])}\n"
    )


def _paths(line: str) -> list[str]:
    """Paths in one line, in the order they appear."""
    found = sorted(
        (match.start(1), match.group(1))
        for pattern in (_JSON_PATH_RE, _ABS_PATH_RE, _REL_PATH_RE)
        for match in pattern.finditer(line)
    )
    seen: list[str] = []
    for _, path in found:
        path = path.rstrip(".,:;)'\"`")
        if path and path not in seen:
            seen.append(path)
    return seen


def _joined(section: _Section) -> str:
    return " ".join(" ".join(section.lines).split())


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
