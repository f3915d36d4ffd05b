"""Streaming parser for Claude Code session transcripts (``~/.claude/projects/<slug>/<id>.jsonl``).

Reference: ``docs/formats/claude-code.md`` (section numbers below refer to it). The format has no
schema and changes often, so the parser keeps every line, understands a known subset and never
aborts on something new: unknown ``type`` values become ``kind="unknown"`` records with the
verbatim line; lines that are not JSON objects, or whose known fields have an impossible shape,
become ``LineError`` records and parsing continues.

Per source line the parser yields exactly one ``Message`` or one ``LineError`` (blank lines and a
partial last line yield nothing, see ``compaction.formats.jsonl``), followed by the ``ContextEvent``s
drawn from that line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from compaction.agents import AgentProfile, Fix, InstructionSources, ToolRoles
from compaction.formats.jsonl import json_objects, line_error, readable_time
from compaction.transcript import (
    CARRIED,
    MAIN,
    Block,
    ContextEvent,
    EventKind,
    Kind,
    LineError,
    Message,
    ParentLink,
    Record,
    SessionInfo,
    Usage,
    note_prompt_title,
)

FORMAT = "claude-code"
LABEL = "Claude Code"
# Where Claude Code keeps its transcripts under the home folder (claude-code.md §1).
SESSION_FOLDERS = (".claude/projects",)
# What neutral code asks about Claude Code (``compaction.agents``). Tool names as its records write them
# (docs/formats/claude-code.md §5, §11): the file tools take file_path (NotebookEdit notebook_path), Grep and Glob a
# folder in path; Bash (PowerShell on Windows, microCompact.ts SHELL_TOOL_NAMES) a command; TodoWrite its todos[].
_FIXES = "docs/formats/claude-code.md §14"
PROFILE = AgentProfile(
    fixes=(
        Fix(
            "read_output",
            "CLAUDE.md",
            "Before reading a large file, find the lines you need with Grep, then Read only them with offset and "
            "limit; do not Read whole files over a few hundred lines.",
            _FIXES,
        ),
        Fix(
            "command_output",
            "CLAUDE.md",
            "Keep command output short: pipe commands that print a lot through `| tail -n 50` (or `| head -n 50`), "
            "and write long logs to a file and grep it instead of printing them.",
            _FIXES,
        ),
        Fix(
            "repeated_reads",
            "CLAUDE.md",
            "Do not Read a file again that you already read in this conversation unless it changed since; use the "
            "earlier content.",
            _FIXES,
        ),
        Fix(
            "warning_line",
            "~/.claude/settings.json",
            '{"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}}',
            _FIXES,
        ),
    ),
    colour="#d9773f",
    dark_colour="#f0a070",
    # Claude Code's CLI: ``claude --resume <session id>`` (``-r``), in the project's folder, whose transcripts it
    # lists (docs/archive.md).
    resume_command="claude --resume {session_id}",
    replay_colour="#0f766e",
    tools=ToolRoles(
        read=frozenset({"Read", "NotebookRead"}),
        edit=frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"}),
        shell=frozenset({"Bash", "PowerShell"}),
        search=frozenset({"Grep", "Glob", "LS"}),
        web=frozenset({"WebFetch", "WebSearch"}),
        spawn=frozenset({"Task", "Agent"}),  # SUBAGENT_TOOLS below
        todo=frozenset({"TodoWrite"}),
        ask=frozenset({"AskUserQuestion"}),  # docs/formats/claude-code.md, "Tools that ask the user"
        path_keys=("file_path", "notebook_path", "path"),
        command_keys=("command",),
        # Edit, MultiEdit (edits), Write, NotebookEdit (new_source) inputs (docs/formats/claude-code.md §4.1)
        old_keys=("old_string",),
        new_keys=("new_string",),
        content_keys=("content", "new_source"),
        edits_keys=("edits",),
    ),
    # docs/formats/claude-code.md §1: workflow journals and persisted tool outputs sit beside the transcripts;
    # subagents write agent-*.jsonl under <session>/subagents/.
    not_transcript_names=("journal.jsonl",),
    not_transcript_folders=("tool-results",),
    subagent_name_prefixes=("agent-",),
    subagent_folders=("subagents",),
    compaction_agent_prefixes=("acompact-",),  # agent-acompact-<hex>.jsonl: the compaction request itself (§1, §8.4)
    # Files holding only ``summary`` records title another conversation (leafUuid, §3).
    title_records_elsewhere=True,
    upload_hint="transcripts (*.jsonl, with their subagents/agent-*.jsonl)",
    # The instructions it works under (issue 38). A skill's body is an isMeta user record opening with its folder
    # (docs/formats/claude-code.md §2, isMeta: skill bodies); reminders are <system-reminder> text (§4, tag
    # conventions). After a compaction it re-attaches invoked skills, and CLAUDE.md is part of every request (the
    # re-attached files leave it out for that reason): docs/compaction/claude-code.md §2.6, step 5. Reminders come
    # again with the reads and turns that raise them.
    instructions=InstructionSources(
        skill_patterns=(r"^Base directory for this skill: (?P<name>\S+)",),
        reminder_tags=("system-reminder",),
        reinjected=frozenset({"instruction_file", "skill", "reminder"}),
        unrecorded="CLAUDE.md files: Claude Code sends them with every request and never writes them to the "
        "transcript, so no compaction loses them.",
    ),
)

# Conversation record types sharing the uuid/parentUuid envelope (§2).
CONVERSATION_TYPES = frozenset({"user", "assistant", "system"})

# Record types observed in real files that never reach the model (§3 table, "versions seen" rows;
# `attachment` and `progress` are in the chain but are kept as bookkeeping, see the module brief).
# The "reported only" types of §3 are deliberately absent: we do not know their shape, so they are
# kept verbatim as unknown records.
BOOKKEEPING_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "pr-link",
        "last-prompt",
        "permission-mode",
        "ai-title",
        "custom-title",
        "agent-name",
        "mode",
        "bridge-session",
    }
)

KNOWN_TYPES = CONVERSATION_TYPES | BOOKKEEPING_TYPES

# Title-bearing records and their field (§3): a user-set title beats an AI title, which beats the
# old `summary` title; within one kind the latest wins.
_TITLE_FIELDS: dict[str, tuple[str, int]] = {
    "summary": ("summary", 0),
    "ai-title": ("aiTitle", 1),
    "custom-title": ("customTitle", 2),
}

# Records that say Claude Code changed its own history (§8-9): a compaction replaced it by a summary; a
# microcompact cleared tool results.
COMPACTION_RECORD_TYPES = frozenset({"system/compact_boundary"})
PRUNE_RECORD_TYPES = frozenset({"system/microcompact_boundary"})
# Bookkeeping lines (file-history snapshots, titles, queue operations) never reach the model: the
# conversation view leaves them out.
CONVERSATION_KEEPS_BOOKKEEPING = False

# Locally generated assistant lines with all-zero usage (§6.4).
SYNTHETIC_MODEL = "<synthetic>"

# Tools that start a subagent: `Task` through CC 2.1.5x, `Agent` from ~2.1.8x (§11).
SUBAGENT_TOOLS = frozenset({"Task", "Agent"})

# User-side text that Claude Code injects rather than the human typing it (§4 tag conventions,
# claude-code-log dev-docs/messages.md; "[Request interrupted by user…]" markers are written by CC).
# A slash command's record is a prompt to the model but names nothing: it never titles a session.
_COMMAND_PREFIXES = ("<command-name>", "<command-message>", "<command-args>", "<bash-input>")
_INJECTED_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "<task-notification>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
)

# Error texts that mean "the prompt did not fit the window": Anthropic's 400 "prompt is too long",
# HTTP 413 request_too_large, and generic "context length" wording of third-party endpoints.
_OVERFLOW_PATTERN = re.compile(r"prompt is too long|\b413\b|context[ _-]length|request_too_large", re.IGNORECASE)
# Only this much of an error text is searched / kept; error texts are short, tool output is not.
_ERROR_TEXT_LIMIT = 2000

# Envelope fields that SessionInfo / Message attributes already carry (§2), left out of `data`.
_ENVELOPE_KEYS = frozenset(
    {
        "type",
        "subtype",
        "uuid",
        "parentUuid",
        "sessionId",
        "isSidechain",
        "agentId",
        "timestamp",
        "version",
        "cwd",
        "gitBranch",
        "userType",
        "slug",
        "entrypoint",
        "message",
    }
)
# Bookkeeping payloads can be huge (multi-MB `progress` lines, §1 / §11); keep only short scalars.
_DATA_STRING_LIMIT = 300

# What a system record's data leaves out: the envelope, its text (the block) and the metadata read below.
_SYSTEM_DATA_EXCLUDED = _ENVELOPE_KEYS | {"content", "compactMetadata", "microcompactMetadata"}

# Flags copied from user/assistant envelopes into Message.data when true (§2).
_MESSAGE_FLAGS = ("isMeta", "isCompactSummary", "isVisibleInTranscriptOnly", "isApiErrorMessage", "isSidechain")


class _ShapeError(ValueError):
    """A known field has a shape the format never has; becomes a LineError for that line."""


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(mapping: dict[str, Any], *keys: str) -> int | None:
    """First integer among ``keys`` (camelCase in transcripts, snake_case in SDK-shaped records, §12.3)."""
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    return None


def _short(value: str) -> str:
    return value if len(value) <= _DATA_STRING_LIMIT else value[:_DATA_STRING_LIMIT] + "…"


def _small_scalars(mapping: dict[str, Any], *, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Scalar fields of ``mapping`` (strings shortened), dropping None/False noise."""
    small: dict[str, Any] = {}
    for key, value in mapping.items():
        if key in exclude or value is None or value is False:
            continue
        if isinstance(value, str):
            small[key] = _short(value)
        elif isinstance(value, int | float | bool):
            small[key] = value
    return small


def _small_data(record: dict[str, Any], *, exclude: frozenset[str]) -> dict[str, Any]:
    """A bounded summary of a record: its scalars, plus the scalars of each nested object, one level deep."""
    small = _small_scalars(record, exclude=exclude)
    for key, value in record.items():
        if key in exclude or key in small:
            continue
        if isinstance(value, dict):
            nested = _small_scalars(value)
            if nested:
                small[key] = nested
        elif isinstance(value, list):
            small[key + "_count"] = len(value)
    return small


def _context_record_data(obj: dict[str, Any]) -> dict[str, Any]:
    """What a compaction or microcompact record says it did, under neutral keys, so a replay reading only
    messages can apply the real agent's own prune (``cleared_tool_ids``) and compare its counts (§8.1, §9)."""
    # A reported variant carries both metadata keys; microcompactMetadata wins (§9).
    metadata = obj.get("microcompactMetadata")
    if not isinstance(metadata, dict):
        metadata = obj.get("compactMetadata")
    if not isinstance(metadata, dict):
        return {}
    data: dict[str, Any] = {
        "trigger": _opt_str(metadata.get("trigger")),
        "pre_tokens": _opt_int(metadata, "preTokens", "pre_tokens"),
        "tokens_saved": _opt_int(metadata, "tokensSaved", "tokens_saved"),
    }
    raw_ids = metadata.get("compactedToolIds")
    if isinstance(raw_ids, list):
        data["cleared_tool_ids"] = [tool_id for tool_id in raw_ids if isinstance(tool_id, str)]
    # What a compaction kept verbatim (§8.1): preservedMessages.uuids (newer builds, "supersedes preserved_segment"),
    # else preservedSegment's head and tail; a partial compaction (/rewind) also says how many it summarised.
    data["messages_summarized"] = _opt_int(metadata, "messagesSummarized", "messages_summarized")
    preserved = metadata.get("preservedMessages", metadata.get("preserved_messages"))
    uuids = preserved.get("uuids") if isinstance(preserved, dict) else None
    if isinstance(uuids, list):
        data["preserved_uuids"] = [uuid for uuid in uuids if isinstance(uuid, str)]
    segment = metadata.get("preservedSegment", metadata.get("preserved_segment"))
    if isinstance(segment, dict):
        ends = [
            _opt_str(segment.get(key, segment.get(alias)))
            for key, alias in (("headUuid", "head_uuid"), ("tailUuid", "tail_uuid"))
        ]
        if all(ends):
            data["preserved_segment"] = ends
    return {key: value for key, value in data.items() if value is not None}


def _usage_from(raw: Any) -> Usage:
    # Fast path for the usual shape (every assistant line): four plain ints, tested with `type(...) is int`
    # (which also rules out bool) instead of the loop below; anything else takes the loop, which says
    # which field is wrong.
    if type(raw) is dict:
        get = raw.get
        inp, created = get("input_tokens"), get("cache_creation_input_tokens")
        read, out = get("cache_read_input_tokens"), get("output_tokens")
        if type(inp) is int and type(created) is int and type(read) is int and type(out) is int:
            return Usage(inp, created, read, out, _one_hour_writes(raw, created=created))
    if not isinstance(raw, dict):
        raise _ShapeError(f"'message.usage' is not an object (got {type(raw).__name__})")
    values: list[int] = []
    for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"):
        value = raw.get(name)
        if value is None:  # old versions omit the cache fields
            values.append(0)
        elif isinstance(value, int) and not isinstance(value, bool):
            values.append(value)
        else:
            raise _ShapeError(f"'message.usage.{name}' is not an integer (got {type(value).__name__})")
    inp, created, read, out = values
    return Usage(inp, created, read, out, _one_hour_writes(raw, created=created))


def _one_hour_writes(raw: dict[str, Any], *, created: int) -> int:
    """The 1-hour part of the cache creation (``usage.cache_creation.ephemeral_1h_input_tokens``, §6.3).

    Older versions write no ``cache_creation`` object: 0, so every write counts as a 5-minute one. A value
    that is not a count is ignored rather than failing the line: the totals above are what the line says.
    """
    split = raw.get("cache_creation")
    value = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return min(max(value, 0), created)


def _progress_response(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The subagent API response an ``agent_progress`` line carries (§6.4), as costs need it.

    Such a response is a subagent's call, never a main-chain one; it is the only record of the call when the
    subagent's own file is not there, and it costs money either way. Kept as data on the bookkeeping
    record: ``{"id", "model", "agent", "usage": [input, cache creation, cache read, output, 1h creation]}``.
    """
    progress = obj.get("data")
    if not isinstance(progress, dict) or progress.get("type") != "agent_progress":
        return None
    envelope = progress.get("message")
    payload = envelope.get("message") if isinstance(envelope, dict) else None
    if not isinstance(payload, dict) or not isinstance(payload.get("id"), str):
        return None
    raw_usage = payload.get("usage")
    if not isinstance(raw_usage, dict) or payload.get("model") == SYNTHETIC_MODEL:
        return None
    try:
        usage = _usage_from(raw_usage)
    except _ShapeError:
        return None
    return {
        "id": payload["id"],
        "model": _opt_str(payload.get("model")),
        "agent": _opt_str(progress.get("agentId")),
        "usage": [
            usage.input_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens,
            usage.output_tokens,
            usage.cache_creation_1h_input_tokens,
        ],
    }


class ClaudeCodeParser:
    """Parse one Claude Code JSONL file; ``info`` is filled as lines go by.

    ``agent`` is MAIN for a session file and the agent id for a ``subagents/agent-<id>.jsonl`` file.
    In a MAIN file, inline 1.0.x sidechain lines (``isSidechain: true``) are routed to their own agent
    ``sidechain-<first 8 chars of the sidechain's root uuid>`` by following ``parentUuid`` (§1).
    """

    def __init__(self, *, agent: str = MAIN, first_line: int = 1) -> None:
        self.agent = agent
        self.info = SessionInfo(format=FORMAT, data={"models": {}})
        self.first_line = first_line
        self._tool_names: dict[str, str] = {}  # tool_use id -> tool name, to name tool results
        self._sidechain_agents: dict[str, str] = {}  # uuid of an inline sidechain line -> its agent id
        self._title_rank = -1
        self._last_version: str | None = None
        self._last_cwd: str | None = None

    # ---------------------------------------------------------------- driving

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]:
        """Yield records for ``lines`` (raw lines as read from a binary file, newline included)."""
        # Runs once per line of files tens of MB long: ``records_of_line``'s rule (any failure on a line is
        # that line's error, with the same message) is applied here without a partial() and a list per line.
        for item in json_objects(lines, first_line=self.first_line, info=self.info):
            if isinstance(item, LineError):
                yield item
                continue
            number, line, obj = item
            try:
                message = self._message(obj, number, line)
                events = self._events(obj, message)
            except _ShapeError as exc:
                yield LineError(number, f"{obj.get('type')!s} record: {exc}")
                continue
            except Exception as exc:  # any failure on one line's content is that line's error
                yield line_error(number, exc)
                continue
            yield message
            if events:
                yield from events
            if message.raw_type == "progress" and self.agent == MAIN:
                carried = self._carried_records(obj, number)
                if carried:
                    yield from carried

    # ---------------------------------------------------------------- records

    def _message(self, obj: dict[str, Any], number: int, line: bytes) -> Message:
        # The envelope fields are read once here and handed to the record's builder (no dict of common fields
        # built per line): this is the hottest code of an import.
        record_type = obj.get("type")
        uuid = _opt_str(obj.get("uuid"))
        parent_uuid = _opt_str(obj.get("parentUuid"))
        timestamp = _opt_str(obj.get("timestamp"))
        version = _opt_str(obj.get("version"))
        cwd = _opt_str(obj.get("cwd"))
        agent = self.agent
        if agent == MAIN and obj.get("isSidechain") is True:
            agent = self._sidechain_agent(uuid, parent_uuid)
        self._note_session(obj, timestamp, version, cwd)
        if record_type == "assistant":
            return self._assistant(obj, number, agent, uuid, parent_uuid, timestamp, version, cwd)
        if record_type == "user":
            return self._user(obj, number, agent, uuid, parent_uuid, timestamp, version, cwd)
        if record_type == "system":
            return self._system(obj, number, agent, uuid, parent_uuid, timestamp, version, cwd)
        if isinstance(record_type, str) and record_type in BOOKKEEPING_TYPES:
            self._note_title(obj, record_type)
            data = _small_data(obj, exclude=_ENVELOPE_KEYS)
            response = _progress_response(obj) if record_type == "progress" else None
            if response is not None:
                data["response"] = response
            return Message(
                line=number,
                role="meta",
                kind="bookkeeping",
                agent=agent,
                uuid=uuid,
                parent_uuid=parent_uuid,
                timestamp=timestamp,
                raw_type=record_type,
                data=data,
            )
        raw_type = record_type if isinstance(record_type, str) else ""
        raw = line.decode("utf-8", errors="replace").rstrip("\r\n")
        return Message(
            line=number,
            role="meta",
            kind="unknown",
            agent=agent,
            uuid=uuid,
            parent_uuid=parent_uuid,
            timestamp=timestamp,
            raw_type=raw_type,
            raw=raw,
        )

    def _assistant(
        self,
        obj: dict[str, Any],
        number: int,
        agent: str,
        uuid: str | None,
        parent_uuid: str | None,
        timestamp: str | None,
        version: str | None,
        cwd: str | None,
    ) -> Message:
        payload = obj.get("message")
        if not isinstance(payload, dict):
            raise _ShapeError(f"'message' is not an object (got {type(payload).__name__})")
        blocks = self._blocks(payload.get("content"))
        model = _opt_str(payload.get("model"))
        synthetic = model == SYNTHETIC_MODEL
        raw_usage = payload.get("usage")
        usage = None if raw_usage is None else _usage_from(raw_usage)  # validate even when discarded
        if synthetic:
            usage = None  # all-zero usage would draw a false drop to 0 (§6.4)
        elif model is not None and agent == self.agent:  # a routed inline sidechain names no session model
            self.info.model = model
            models: dict[str, int] = self.info.data["models"]
            models[model] = models.get(model, 0) + 1
        # Lines of one streamed response share message.id; fall back to requestId, then uuid (§6.2).
        request_id = _opt_str(obj.get("requestId"))
        call_key = _opt_str(payload.get("id")) or request_id or uuid
        data = self._message_data(obj, version, cwd)
        if synthetic:
            data["synthetic"] = True
        if request_id is not None:
            data["requestId"] = request_id
        stop_reason = payload.get("stop_reason")
        if isinstance(stop_reason, str):
            data["stop_reason"] = stop_reason
        error = obj.get("error")
        if isinstance(error, str):
            data["error"] = error
        return Message(
            line=number,
            role="assistant",
            kind="assistant",
            agent=agent,
            blocks=blocks,
            uuid=uuid,
            parent_uuid=parent_uuid,
            timestamp=timestamp,
            model=model,
            call_key=call_key,
            usage=usage,
            raw_type="assistant",
            data=data,
        )

    def _user(
        self,
        obj: dict[str, Any],
        number: int,
        agent: str,
        uuid: str | None,
        parent_uuid: str | None,
        timestamp: str | None,
        version: str | None,
        cwd: str | None,
    ) -> Message:
        payload = obj.get("message")
        if not isinstance(payload, dict):
            raise _ShapeError(f"'message' is not an object (got {type(payload).__name__})")
        content = payload.get("content")
        blocks = self._blocks(content)
        kind: Kind
        if obj.get("isCompactSummary") is True:
            kind = "compact_summary"
        elif "tool_result" in [block.kind for block in blocks]:  # a list, not any(generator): once per user line
            kind = "tool_result"
        elif obj.get("isMeta") is True or (isinstance(content, str) and content.startswith(_INJECTED_PREFIXES)):
            kind = "injected"
        else:
            kind = "prompt"
            if CARRIED not in obj:  # a carried subagent prompt titles nothing (_carried_records)
                self._note_prompt_title(blocks)
        data = self._message_data(obj, version, cwd)
        tool_use_result = obj.get("toolUseResult")
        if isinstance(tool_use_result, dict) and isinstance(tool_use_result.get("agentId"), str):
            data["agentId"] = tool_use_result["agentId"]  # links a Task result to its subagent file (§11)
        return Message(
            line=number,
            role="user",
            kind=kind,
            agent=agent,
            blocks=blocks,
            uuid=uuid,
            parent_uuid=parent_uuid,
            timestamp=timestamp,
            raw_type="user",
            data=data,
        )

    def _system(
        self,
        obj: dict[str, Any],
        number: int,
        agent: str,
        uuid: str | None,
        parent_uuid: str | None,
        timestamp: str | None,
        version: str | None,
        cwd: str | None,
    ) -> Message:
        subtype = _opt_str(obj.get("subtype"))
        content = obj.get("content")
        blocks = [Block("text", content)] if isinstance(content, str) and content else []
        data = _small_data(obj, exclude=_SYSTEM_DATA_EXCLUDED)
        self._note_changed_envelope(data, version, cwd)
        data.update(_context_record_data(obj))
        # System records are CC-side notices that are not sent to the model, hence role "meta".
        return Message(
            line=number,
            role="meta",
            kind="system",
            agent=agent,
            blocks=blocks,
            uuid=uuid,
            parent_uuid=parent_uuid,
            timestamp=timestamp,
            raw_type=f"system/{subtype}" if subtype else "system",
            data=data,
        )

    def _message_data(self, obj: dict[str, Any], version: str | None, cwd: str | None) -> dict[str, Any]:
        data: dict[str, Any] = {flag: True for flag in _MESSAGE_FLAGS if obj.get(flag) is True}
        self._note_changed_envelope(data, version, cwd)
        return data

    def _note_changed_envelope(self, data: dict[str, Any], version: str | None, cwd: str | None) -> None:
        """version/cwd only where they change (resume/upgrade, worktree moves, §1-2), not on every line."""
        if version is not None and version != self._last_version:
            self._last_version = data["version"] = version
        if cwd is not None and cwd != self._last_cwd:
            self._last_cwd = data["cwd"] = cwd

    # ---------------------------------------------------------------- blocks (§4)

    def _blocks(self, content: Any) -> list[Block]:
        if isinstance(content, str):
            return [Block("text", content)] if content else []
        if not isinstance(content, list):
            raise _ShapeError(f"'message.content' is neither a string nor a list (got {type(content).__name__})")
        blocks: list[Block] = []
        for item in content:
            if not isinstance(item, dict):
                raise _ShapeError(f"a content block is not an object (got {type(item).__name__})")
            block_type = item.get("type")
            if block_type == "text":
                blocks.append(Block("text", _opt_str(item.get("text")) or ""))
            elif block_type == "thinking":
                blocks.append(Block("thinking", _opt_str(item.get("thinking")) or ""))
            elif block_type == "redacted_thinking":
                blocks.append(Block("redacted_thinking"))  # encrypted `data` means nothing to a reader
            elif block_type == "tool_use":
                blocks.append(self._tool_use(item))
            elif block_type == "tool_result":
                blocks.extend(self._tool_result(item))
            elif block_type == "image":
                blocks.append(Block("image", media_type=self._media_type(item)))
            else:
                blocks.append(Block("other", f"[{block_type}]"))
        return blocks

    def _tool_use(self, item: dict[str, Any]) -> Block:
        tool_id = _opt_str(item.get("id"))
        name = _opt_str(item.get("name"))
        tool_input = item.get("input")
        if tool_id is not None and name is not None:
            self._tool_names[tool_id] = name
        text = orjson.dumps(tool_input).decode() if tool_input is not None else ""
        return Block("tool_use", text, tool_id=tool_id, tool_name=name, tool_input=tool_input)

    def _tool_result(self, item: dict[str, Any]) -> list[Block]:
        tool_id = _opt_str(item.get("tool_use_id"))
        raw = item.get("content")
        images: list[Block] = []
        if raw is None:
            text = ""
        elif isinstance(raw, str):
            text = raw
        elif isinstance(raw, list):
            parts: list[str] = []
            for part in raw:
                if not isinstance(part, dict):
                    raise _ShapeError(f"a tool_result content part is not an object (got {type(part).__name__})")
                part_type = part.get("type")
                if part_type == "text":
                    parts.append(_opt_str(part.get("text")) or "")
                elif part_type == "image":
                    images.append(Block("image", tool_id=tool_id, media_type=self._media_type(part)))
                elif part_type == "tool_reference":  # ToolSearch loads a tool by name (§4)
                    parts.append(f"tool_reference: {_opt_str(part.get('tool_name')) or ''}")
                else:
                    parts.append(f"[{part_type}]")
            text = "\n".join(parts)
        else:
            raise _ShapeError(f"tool_result 'content' is neither a string nor a list (got {type(raw).__name__})")
        result = Block(
            "tool_result",
            text,
            tool_id=tool_id,
            tool_name=self._tool_names.get(tool_id) if tool_id is not None else None,
            is_error=item.get("is_error") is True,
        )
        return [result, *images]

    @staticmethod
    def _media_type(item: dict[str, Any]) -> str | None:
        source = item.get("source")
        return _opt_str(source.get("media_type")) if isinstance(source, dict) else None

    # ---------------------------------------------------------------- events

    def _events(self, obj: dict[str, Any], message: Message) -> list[ContextEvent]:
        raw_type = message.raw_type
        if raw_type == "system/compact_boundary":
            return [self._compaction_event(obj, message)]
        if raw_type == "system/microcompact_boundary":
            return [self._microcompact_event(obj, message)]
        if raw_type == "system/api_error":
            return [self._system_api_error_event(obj, message)]
        if raw_type != "assistant":
            return []
        events: list[ContextEvent] = []
        if obj.get("isApiErrorMessage") is True:
            text = message.text[:_ERROR_TEXT_LIMIT]
            kind: EventKind = "overflow" if _OVERFLOW_PATTERN.search(text) else "api_error"
            data = {"error": obj["error"]} if isinstance(obj.get("error"), str) else {}
            events.append(self._event(kind, message, message=text, data=data))
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_name in SUBAGENT_TOOLS:
                tool_input = block.tool_input if isinstance(block.tool_input, dict) else {}
                data = {
                    "tool_id": block.tool_id,
                    "description": _opt_str(tool_input.get("description")),
                    "subagent_type": _opt_str(tool_input.get("subagent_type")),
                }
                events.append(self._event("subagent_spawn", message, data=data))
        return events

    @staticmethod
    def _event(kind: EventKind, source: Message, /, **fields: Any) -> ContextEvent:
        return ContextEvent(kind=kind, line=source.line, agent=source.agent, timestamp=source.timestamp, **fields)

    def _compaction_event(self, obj: dict[str, Any], message: Message) -> ContextEvent:
        # Every field optional: CC itself crashed on a boundary without compactMetadata (§8.1).
        metadata = obj.get("compactMetadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        data: dict[str, Any] = {
            key: value
            for key, value in metadata.items()
            if key not in {"trigger", "preTokens", "pre_tokens", "postTokens", "post_tokens"}
        }
        data["logicalParentUuid"] = _opt_str(obj.get("logicalParentUuid"))
        return self._event(
            "compaction",
            message,
            trigger=_opt_str(metadata.get("trigger")),
            pre_tokens=_opt_int(metadata, "preTokens", "pre_tokens"),
            post_tokens=_opt_int(metadata, "postTokens", "post_tokens"),
            message=_opt_str(obj.get("content")) or "",
            data=data,
        )

    def _microcompact_event(self, obj: dict[str, Any], message: Message) -> ContextEvent:
        # A reported variant carries both metadata keys; microcompactMetadata wins (§9).
        metadata = obj.get("microcompactMetadata")
        if not isinstance(metadata, dict):
            metadata = obj.get("compactMetadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        raw_ids = metadata.get("compactedToolIds")
        tool_ids = [tool_id for tool_id in raw_ids if isinstance(tool_id, str)] if isinstance(raw_ids, list) else []
        data = {
            key: value
            for key, value in metadata.items()
            if key not in {"trigger", "preTokens", "pre_tokens", "tokensSaved", "tokens_saved", "compactedToolIds"}
        }
        return self._event(
            "microcompact",
            message,
            trigger=_opt_str(metadata.get("trigger")),
            pre_tokens=_opt_int(metadata, "preTokens", "pre_tokens"),
            tokens_saved=_opt_int(metadata, "tokensSaved", "tokens_saved"),
            tool_ids=tool_ids,
            message=_opt_str(obj.get("content")) or "",
            data=data,
        )

    def _system_api_error_event(self, obj: dict[str, Any], message: Message) -> ContextEvent:
        # Retry notice (§3): `error` is usually `{}`; keep whatever it says, bounded.
        error = obj.get("error")
        if isinstance(error, str):
            text = error[:_ERROR_TEXT_LIMIT]
        elif error:
            text = orjson.dumps(error).decode()[:_ERROR_TEXT_LIMIT]
        else:
            text = ""
        kind: EventKind = "overflow" if text and _OVERFLOW_PATTERN.search(text) else "api_error"
        data = {key: obj[key] for key in ("retryInMs", "retryAttempt", "maxRetries") if key in obj}
        return self._event(kind, message, message=text, data=data)

    # ---------------------------------------------------------------- session-level facts

    def _carried_records(self, obj: dict[str, Any], number: int) -> list[Record]:
        """The subagent record an ``agent_progress`` line of a MAIN file carries (§6.4, §11), as that subagent's own
        record (agent = ``data.agentId``, the id its ``subagents/agent-<id>.jsonl`` file would have), marked
        ``CARRIED`` with the spawning tool id (``parentToolUseID``), and its events. Claude Code 2.1.1x-2.1.8x writes
        these copies beside the subagent's file; where the file is missing they are the only record of the subagent.
        The copy lacks some records of the file (text-only replies, the last answer), so the file wins when present.
        A copy that is not a user or assistant message, or names no agent, gives nothing."""
        progress = obj.get("data")
        if not isinstance(progress, dict) or progress.get("type") != "agent_progress":
            return []
        agent = _opt_str(progress.get("agentId"))
        envelope = progress.get("message")
        if not agent or agent == MAIN or not isinstance(envelope, dict):
            return []
        record_type = envelope.get("type")
        if record_type not in ("user", "assistant") or not isinstance(envelope.get("message"), dict):
            return []
        uuid = _opt_str(envelope.get("uuid"))
        timestamp = _opt_str(envelope.get("timestamp")) or _opt_str(obj.get("timestamp"))
        build = self._assistant if record_type == "assistant" else self._user
        try:
            message = build({**envelope, CARRIED: True}, number, agent, uuid, None, timestamp, None, None)
        except _ShapeError:
            return []  # the progress line itself is stored; a copy that does not parse adds nothing
        message.data[CARRIED] = _opt_str(obj.get("parentToolUseID")) or ""
        return [message, *self._events(envelope, message)]

    def _sidechain_agent(self, uuid: str | None, parent_uuid: str | None) -> str:
        """Agent id of an inline sidechain line of a MAIN file (``isSidechain: true``, §1, 1.0.x layout)."""
        agent = self._sidechain_agents.get(parent_uuid) if parent_uuid is not None else None
        if agent is None:
            # A sidechain starts with a user line whose parentUuid is null; an unknown parent
            # (dangling reference) is promoted to a root as well (§10).
            agent = f"sidechain-{uuid[:8]}" if uuid else "sidechain"
        if uuid is not None:
            self._sidechain_agents[uuid] = agent
        return agent

    def _note_session(self, obj: dict[str, Any], timestamp: str | None, version: str | None, cwd: str | None) -> None:
        info = self.info
        if info.session_id is None:
            info.session_id = _opt_str(obj.get("sessionId"))
        if version is not None:
            info.agent_version = version
        if info.cwd is None:
            info.cwd = cwd
        if timestamp is not None:
            # Timestamps are not monotonic (forks, replays, §2); ISO-8601 UTC strings compare in time order. Checked
            # only when one would move the start or the end: an unreadable one never does (``readable_time``).
            earlier = info.started_at is None or timestamp < info.started_at
            later = info.ended_at is None or timestamp > info.ended_at
            if (earlier or later) and readable_time(timestamp) is not None:
                if earlier:
                    info.started_at = timestamp
                if later:
                    info.ended_at = timestamp

    def _note_prompt_title(self, blocks: list[Block]) -> None:
        # A session without a title record is named by its first real prompt, as klaude sessions are;
        # the rank stays below every title record's so a later summary / AI / custom title still wins.
        if self.info.title is not None or self.agent != MAIN:
            return
        text = next((b.text.strip() for b in blocks if b.kind == "text" and b.text.strip()), "")
        if not text or text.startswith(_COMMAND_PREFIXES):
            return
        note_prompt_title(self.info, text)

    def _note_title(self, obj: dict[str, Any], record_type: str) -> None:
        spec = _TITLE_FIELDS.get(record_type)
        if spec is None:
            return
        field_name, rank = spec
        title = _opt_str(obj.get(field_name))
        if title and rank >= self._title_rank:
            self.info.title = title
            self._title_rank = rank
            self.info.data["title_from"] = record_type


def make_parser(*, agent: str, path: Path) -> ClaudeCodeParser:
    return ClaudeCodeParser(agent=agent)


def parent_link(head: list[bytes], path: Path) -> ParentLink | None:
    """A subagent transcript (2.x layouts): its ``agentId`` and the parent's ``sessionId`` from a sidechain
    record of the head, else the ``agent-<id>.jsonl`` name; ``<session>/subagents/`` sits beside
    ``<session>.jsonl``, the parent's file."""
    agent: str | None = None
    parent_id = ""
    for raw in head:
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("isSidechain") and record.get("agentId"):
            agent, parent_id = str(record["agentId"]), str(record.get("sessionId") or "")
            break
    if agent is None and path.name.startswith("agent-"):
        agent = path.stem.removeprefix("agent-")
    if agent is None:
        return None
    parent_file = path.parent.parent.with_suffix(".jsonl") if path.parent.name == "subagents" else None
    return ParentLink(agent=agent, parent_id=parent_id, parent_file=parent_file)


# Envelope keys that only Claude Code records carry (claude-code.md §2); they let a line of a record type newer
# than our list still count as Claude Code.
_DETECT_ENVELOPE_KEYS = ("parentUuid", "isSidechain", "leafUuid")


def vote(obj: dict[str, Any]) -> bool:
    """A Claude Code transcript record, for format detection."""
    if not isinstance(obj.get("type"), str):
        return False
    if obj["type"] in KNOWN_TYPES:
        return True
    return isinstance(obj.get("sessionId"), str) and any(key in obj for key in _DETECT_ENVELOPE_KEYS)
