"""The neutral, agent-independent model of a session.

Parsers in ``compaction.formats`` turn an agent's files into a stream of these records;
the Django importer stores them and strategies, replay and diagnosis read them back.

A parser never holds a whole file: it yields one record per source line (or per event)
so memory stays flat however large the file is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal, Protocol, cast

# Who is speaking. "system" covers agent-side records that reach the model (reminders,
# developer messages); bookkeeping records that never reach the model have role "meta".
Role = Literal["user", "assistant", "system", "meta"]

# What a record is, independent of the agent:
#   prompt          text typed by the human
#   assistant       (part of) a model response
#   tool_result     a user-side record carrying tool results
#   injected        text the agent injected as the user (isMeta, reminders, hook context)
#   compact_summary the summary that replaced older history after a compaction
#   system          an agent-side system record (hook summary, turn duration, api_error notice...)
#   bookkeeping     understood records that never reach the model (titles, snapshots, queue ops)
#   unknown         a record type this parser does not understand, kept verbatim
Kind = Literal[
    "prompt",
    "assistant",
    "tool_result",
    "injected",
    "compact_summary",
    "system",
    "bookkeeping",
    "unknown",
]

# Block kinds: text, thinking, redacted_thinking, tool_use, tool_result, image, other.
BlockKind = Literal["text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "other"]

# Context events drawn on the timeline.
EventKind = Literal[
    "compaction",  # a full compaction (summary replaced history)
    "microcompact",  # tool results cleared (Claude Code microcompact)
    "prune",  # tool results replaced by a placeholder (KHAELOR)
    "api_error",  # an API error the agent recorded (retry notice, synthetic error message)
    "overflow",  # an error that says the prompt did not fit the window
    "subagent_spawn",  # a Task/Agent tool call that started a subagent
]

MAIN = "main"  # the agent id of the main chain; subagents use their own agent id
# ``Message.data`` key of a subagent's record that only a record of its parent carries (Claude Code's inline
# ``agent_progress`` copies): the subagent's own file, when there is one, supersedes every such copy. Its value is
# the tool id of the parent's call that started the subagent ("" when the record does not name it).
CARRIED = "carried_by"


@dataclass(slots=True)
class Block:
    kind: BlockKind
    text: str = ""  # text, thinking, flattened tool_result text; JSON of the input for tool_use
    tool_id: str | None = None  # tool_use.id, or tool_result.tool_use_id
    tool_name: str | None = None  # tool_use.name (also filled on tool_result when the call is known)
    tool_input: Any = None  # tool_use.input, as parsed JSON
    is_error: bool = False  # tool_result.is_error
    media_type: str | None = None  # image media type; the image bytes are not kept in blocks


@dataclass(slots=True)
class Usage:
    """Recorded usage of one API call, Anthropic-style."""

    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    # The part of the cache creation written with the 1-hour lifetime (priced higher than a 5-minute write);
    # 0 when the record does not say (Claude Code's usage.cache_creation.ephemeral_1h_input_tokens).
    cache_creation_1h_input_tokens: int = 0

    @property
    def context(self) -> int:
        """Prompt size sent with the call: input + cache creation + cache read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


@dataclass(slots=True)
class Message:
    """One record of a session, in file order."""

    line: int  # 1-based line number in the source file (event index for agents without lines)
    role: Role
    kind: Kind
    agent: str = MAIN  # MAIN or the subagent's id
    blocks: list[Block] = field(default_factory=list)
    uuid: str | None = None
    parent_uuid: str | None = None
    timestamp: str | None = None  # ISO-8601 as written by the agent
    model: str | None = None
    # Records that belong to the same API response share a call_key (Claude Code: message.id).
    call_key: str | None = None
    usage: Usage | None = None  # recorded usage, only on assistant records that carry it
    raw_type: str = ""  # the agent's own type/subtype, e.g. "assistant", "system/compact_boundary"
    # Extra fields worth keeping in structured form (version, cwd, flags, bookkeeping payload).
    data: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None  # the verbatim line, kept only for unknown records

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.blocks if b.text)

    @property
    def synthetic(self) -> bool:
        """A reply the agent wrote itself, not a model (its parser sets the flag: Claude Code's ``<synthetic>``)."""
        return bool(self.data.get("synthetic"))


@dataclass(slots=True)
class ContextEvent:
    """Something that changed (or failed to change) the context window."""

    kind: EventKind
    line: int
    agent: str = MAIN
    timestamp: str | None = None
    trigger: str | None = None  # auto | manual | threshold | overflow | proactive-token-budget ...
    pre_tokens: int | None = None
    post_tokens: int | None = None
    tokens_saved: int | None = None
    tool_ids: list[str] = field(default_factory=list)
    message: str = ""  # error text, summary excerpt, etc.
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LineError:
    """A line that could not be understood; the rest of the file still imports."""

    line: int
    message: str


@dataclass(slots=True)
class SessionInfo:
    """What a parser learned about the session as a whole; filled while parsing."""

    format: str
    session_id: str | None = None
    agent_version: str | None = None
    model: str | None = None
    cwd: str | None = None
    title: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    context_window: int | None = None  # when the log records it (klaude meta, KHAELOR session.started)
    data: dict[str, Any] = field(default_factory=dict)


Record = Message | ContextEvent | LineError

# A session without a title of its own is named by its first real prompt: its first non-empty line, cut at a word
# so a title never ends mid-word. Our choice for every agent (none of them titles a session this way itself).
PROMPT_TITLE_CHARS = 120


def cut_at_word(text: str, limit: int) -> str:
    """``text`` whole when it fits ``limit`` characters, else cut at its last word that fits, an ellipsis saying
    so (within a word only when the cut would drop more than half of it: a long URL or path)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if not text[len(cut)].isspace() and space >= limit // 2:  # the cut ends inside a word: back to its start
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "\u2026"


def prompt_title(text: str) -> str:
    """The first non-empty line of ``text``, cut at a word (an ellipsis says so) when longer than the limit."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return cut_at_word(line, PROMPT_TITLE_CHARS)


def note_prompt_title(info: SessionInfo, text: str) -> None:
    """Title the session by ``text`` (a real prompt's) unless it has a title already, saying where it came from."""
    if info.title is not None:
        return
    title = prompt_title(text)
    if title:
        info.title = title
        info.data["title_from"] = "prompt"


class Parser(Protocol):
    """What every format module's ``make_parser`` returns: records from raw lines, the session facts it learned."""

    info: SessionInfo

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]: ...


@dataclass(frozen=True, slots=True)
class ParentLink:
    """How a file that is not a main session (a subagent transcript, a fork) names the session it belongs to.

    Each format module answers this from a file's first lines (``parent_link``); the importer looks the parent
    up among the sessions of the same format.
    """

    agent: str  # the name its records are stored under in the parent session
    parent_id: str  # the parent's own session id ("" when the file does not name it)
    parent_file: Path | None = None  # where the parent's own file sits by the agent's folder layout, if known
    alone_without_parent: bool = False  # True: until its parent is imported the file is a main session itself


class NotASession(ValueError):
    """The file is not a session of any format we know; the message says why."""


@dataclass(slots=True)
class ApiCall:
    """One API call of one agent (main chain or a subagent): the one call type of the core.

    Every reader uses it: the call tracker and the statistics (a record stream or the stored ``ApiCall`` rows,
    ``sessions_app.selectors.calls.neutral_call``), costs, the prompt-cache reading, the replay and the diagnosis.
    A point between calls is ``compaction.replay.AfterCall``.
    """

    agent: str
    # "call N": the N-th call of this agent, numbered from 1 in record order (README, "Call numbers"); 0 for a
    # response that is no call of its own agent's count (``compaction.stats.embedded_response``).
    number: int
    key: str  # Claude Code: message.id (fallback requestId, then uuid); "" when the log names none
    line: int  # first line of the response
    usage: Usage | None  # recorded usage; None for a reply of a log that records none (``CallTracker.responses``)
    model: str | None = None
    timestamp: str | None = None
    # Where its records lie in the list of messages it was found in (``compaction.replay.api_steps``): the request
    # holds messages[:first], its records end before messages[end]. Both 0 for a call not located in a list
    # (from a record stream or from storage): a located call always has end > first.
    first: int = 0
    end: int = 0

    @property
    def context(self) -> int:
        """The context it sent, as recorded (``usage.context``: input + cache creation + cache read); 0 without
        usage. 0 also for a call whose usage is all zero: no context was recorded."""
        usage = self.usage
        return usage.context if usage is not None else 0


def parse_timestamp(value: str | None) -> datetime | None:
    """An agent's ISO-8601 timestamp, always timezone-aware, or None when missing or unreadable (never an error).

    klaude-code writes naive local times and records no zone; they are read as UTC so that every
    timestamp compares with every other.
    """
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# The layout ``conversation_to_json`` writes, stored with it. Raise it with any change to what is written (a field
# added to, removed from or renamed in ``Message``, ``Block`` or ``Usage`` changes it): data of another layout is
# refused, and whoever stored it reads the records again.
CONVERSATION_LAYOUT = 1

_MESSAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Message))
_MESSAGE_COLUMNS = tuple(name for name in _MESSAGE_FIELDS if name not in ("blocks", "usage"))  # stored apart
_BLOCK_COLUMNS = tuple(f.name for f in dataclasses.fields(Block))
_USAGE_COLUMNS = tuple(f.name for f in dataclasses.fields(Usage))


class UnknownLayout(ValueError):
    """Data that ``conversation_from_json`` does not read: not a stored conversation, or of another layout."""


def conversation_to_json(messages: Sequence[Message]) -> dict[str, Any]:
    """Records as plain JSON data (objects, lists, strings, numbers: ``orjson.dumps`` writes it), every field of
    each record, block and usage; ``conversation_from_json`` reads it back.

    Stored by column, a list of each field's values: one JSON array per record and per block made a third more
    objects to parse and collect, and the 53 MB session's main chain loaded in 0.22-0.25 s instead of 0.15-0.17 s
    (docs/performance.md). The blocks of all records are one set of columns, cut by ``blocks_per_message``; a
    record without usage has null in every usage column."""
    blocks = [block for m in messages for block in m.blocks]
    usages = [m.usage for m in messages]
    return {
        "layout": CONVERSATION_LAYOUT,
        "messages": {name: [getattr(m, name) for m in messages] for name in _MESSAGE_COLUMNS},
        "blocks_per_message": [len(m.blocks) for m in messages],
        "blocks": {name: [getattr(block, name) for block in blocks] for name in _BLOCK_COLUMNS},
        "usage": {name: [None if u is None else getattr(u, name) for u in usages] for name in _USAGE_COLUMNS},
    }


def _columns(data: dict[str, Any], group: str, names: tuple[str, ...], length: int) -> list[list[Any]]:
    """The columns ``names`` of ``data[group]``, each a list of ``length`` values, or ``UnknownLayout``."""
    found = data.get(group)
    columns = [found.get(name) for name in names] if isinstance(found, dict) else [None]
    if not all(isinstance(c, list) and len(c) == length for c in columns):
        raise UnknownLayout(f"a stored conversation whose {group} are not {len(names)} columns of {length} values")
    return cast(list[list[Any]], columns)


def conversation_from_json(data: Any) -> list[Message]:
    """The records ``conversation_to_json`` made ``data`` from. Raises ``UnknownLayout`` (a ``ValueError``) for
    data of another layout or shape; values of the wrong type may raise ``TypeError`` or ``ValueError``."""
    if not isinstance(data, dict) or data.get("layout") != CONVERSATION_LAYOUT:
        found = data.get("layout") if isinstance(data, dict) else type(data).__name__
        raise UnknownLayout(f"not a conversation of layout {CONVERSATION_LAYOUT} ({found!r})")
    counts = data.get("blocks_per_message")
    if not isinstance(counts, list) or not all(isinstance(n, int) and n >= 0 for n in counts):
        raise UnknownLayout("a stored conversation without its count of blocks per record")
    ends = list(accumulate(counts))
    columns = dict(zip(_MESSAGE_COLUMNS, _columns(data, "messages", _MESSAGE_COLUMNS, len(counts)), strict=True))
    block_columns = _columns(data, "blocks", _BLOCK_COLUMNS, ends[-1] if ends else 0)
    usage_columns = _columns(data, "usage", _USAGE_COLUMNS, len(counts))
    # The constructors mapped over the columns, positionally in the fields' order: no Python loop per record.
    blocks = list(map(Block, *block_columns))
    nested = {
        "blocks": map(blocks.__getitem__, map(slice, [0, *ends[:-1]], ends)),
        "usage": (None if values[0] is None else Usage(*values) for values in zip(*usage_columns, strict=True)),
    }
    return list(map(Message, *(nested[name] if name in nested else columns[name] for name in _MESSAGE_FIELDS)))
