"""Streaming parser for klaude-code sessions (``~/.klaude/projects/<key>/sessions/<id>/``).

Format reference: docs/formats/klaude-code.md §1 (klaude-code 2.7.0 and 2.8.x write the same
shape; 2.8.0 adds ``CompactionEntry``). One JSON object ``{"type": <class name>, "data": {...}}``
per line of ``events.jsonl``; ``meta.json`` holds the session-level facts.

Every non-blank line gives exactly one ``Message`` or ``LineError`` (plus a ``ContextEvent`` after
the Message of a CompactionEntry or StreamErrorItem). Exceptions: an unterminated last line that does
not parse is a write in progress, skipped and flagged in ``info.data["partial_last_line"]``
(``compaction.formats.jsonl`` reads the lines for every agent); and a line holding a break only
``str.splitlines()`` sees (U+2028, U+2029, U+0085, a lone CR, VT, FF, FS, GS, RS) is read as klaude's
loader reads it, piece by piece: each piece that decodes is a record of that line, and a line that
loses a piece (usually all of it: the break sits inside a string) also gets a ``LineError``.

Indices: klaude's ``first_kept_index`` and every other index point into its decoded history, which
skips blank lines, invalid JSON and unknown types (§1.2). ``Message.data["index"]`` is that index;
it is None on unknown-type records. Build the strategy's ``messages`` list with
``history_messages(records)`` so that a list position equals klaude's index.

Usage: ``Usage.context`` equals klaude's ``usage.context_size`` (falling back to ``total_tokens``, which
klaude computes as input + output whatever the line stores, §5.2), the number klaude itself compares
against its threshold. klaude's Anthropic client folds cache reads into ``input_tokens`` and adds the
output to ``context_size`` (§1.3), so the neutral fields are: ``cache_read_input_tokens`` = klaude
``cached_tokens``, ``input_tokens`` = context_size minus that (for Anthropic: fresh input plus this
call's output), ``output_tokens`` = klaude ``output_tokens``, ``cache_creation_input_tokens`` = 0
(klaude does not record it). The raw klaude usage is kept in ``Message.data["usage"]``. Responses that
ended ``aborted``/``error`` get ``usage=None`` (klaude's own threshold ignores them, §3.3/§5.2); their
usage stays in data.

Sections (§) refer to docs/formats/klaude-code.md.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from compaction.agents import AgentProfile, InstructionSources, ToolRoles
from compaction.formats.jsonl import json_objects, readable_time, records_of_line, unstorable
from compaction.strategies.klaude_code import (
    ASSISTANT,
    COMPACTION,
    COMPACTION_SUMMARY_PREFIX,
    DEVELOPER,
    HISTORY_TYPES,
    STREAM_ERROR,
    SYSTEM,
    TASK_METADATA,
    TOOL_RESULT,
    UNSUCCESSFUL_STOP_REASONS,
    USER,
    KlaudeParams,
    is_context_overflow,
)
from compaction.transcript import (
    MAIN,
    Block,
    ContextEvent,
    LineError,
    Message,
    ParentLink,
    Record,
    SessionInfo,
    Usage,
    note_prompt_title,
)

FORMAT = "klaude-code"
LABEL = "klaude-code"
# Where klaude-code keeps its sessions under the home folder (klaude-code.md §1).
SESSION_FOLDERS = (".klaude/projects",)
# What neutral code asks about klaude-code (``compaction.agents``): its tools as its records name them
# (klaude-code.md §3: Read, Edit, Write, apply_patch, Bash, TodoWrite; sub-agents run as a Task); the parser keeps
# the raw item in data["item"], and the strategy memoises one rebuilt from the blocks in data["_klaude_item"].
PROFILE = AgentProfile(
    colour="#7c3aed",
    dark_colour="#a78bfa",
    # klaude's ``--resume <id>`` (klaude_code/cli/main.py 2.8.1, rewritten to ``--resume-by-id``; docs/archive.md).
    resume_command="klaude --resume {session_id}",
    replay_colour="#9333ea",
    tools=ToolRoles(
        read=frozenset({"Read"}),
        edit=frozenset({"Write", "Edit", "apply_patch", "ApplyPatch"}),
        patch=frozenset({"apply_patch", "ApplyPatch"}),
        shell=frozenset({"Bash"}),
        spawn=frozenset({"Task"}),
        todo=frozenset({"TodoWrite"}),
        path_keys=("file_path", "path", "notebook_path"),
        command_keys=("command",),
        patch_keys=("patch", "input"),
        # Edit and Write inputs, as Claude Code's (docs/formats/klaude-code.md §1.4a)
        old_keys=("old_string",),
        new_keys=("new_string",),
        content_keys=("content",),
    ),
    sidecar_names=("meta.json",),  # read beside events.jsonl (make_parser's path), never a session alone
    raw_payload_keys=("item", "_klaude_item"),
    upload_hint="events.jsonl (with its meta.json)",
    # The instructions it works under (issue 38): DeveloperMessages are reminders wrapped in <system-reminder>, their
    # ui_extra items say which carried memory files (AGENTS.md/CLAUDE.md) and which a skill
    # (docs/formats/klaude-code.md §1.3); 2.0.0 wrote flat fields instead (§1.5). Nothing says klaude puts them back
    # after a compaction, but a reminder is injected again at each turn start (§1.3).
    instructions=InstructionSources(
        reminder_tags=("system-reminder",),
        item_list_path=("item", "ui_extra", "items"),
        item_kinds=(("memory_loaded", "instruction_file"), ("skill_activated", "skill")),
        # memory_loaded: {"files": [{"path": …}]} as the samples write it; a skill's name key is assumed (no sample).
        item_name_keys=("files", "path", "paths", "name", "skill_name"),
        reinjected=frozenset({"reminder"}),
    ),
)
# session/store.py load_history reads events.jsonl with read_text() (universal newlines) and str.splitlines(), so
# besides "\n" it also breaks lines at a lone CR, VT, FF, FS, GS, RS, NEL (U+0085), U+2028 and U+2029. json.dumps(
# ensure_ascii=False) writes the last three raw inside strings (UTF-8 bytes): such a line splits into pieces that are
# not JSON and klaude drops it. (CR + LF at the end of a line is one break and harmless.)
# Substring tests, not one regular expression: an alternation without a common prefix made the parser 3x slower.
_BREAK_BYTES = (b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2\x85", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


def _splitlines_breaks(line: bytes) -> bool:
    """Whether ``str.splitlines()`` breaks this line (newline included) anywhere but at its closing CR/LF."""
    for sequence in _BREAK_BYTES:
        if sequence in line:
            return True
    cr = line.find(b"\r")
    # CRs and LFs that only end the line make empty pieces, which the loader skips
    return cr != -1 and bool(line[cr:].strip(b"\r\n"))


_DROPPED_LINE = (
    "klaude-code drops this line when it reloads the session: its loader splits events.jsonl with str.splitlines(), "
    "which also breaks at the raw {breaks} in it, and no piece decodes (later history indices move down by one)"
)
_PARTLY_DROPPED_LINE = (
    "klaude-code reads only {kept} of the pieces str.splitlines() makes of this line (it breaks at the raw {breaks} "
    "in it); the rest is dropped"
)
_BREAK_NAMES = {
    "\r": "CR",
    "\x0b": "VT",
    "\x0c": "FF",
    "\x1c": "FS",
    "\x1d": "GS",
    "\x1e": "RS",
    "\x85": "U+0085",
    "\u2028": "U+2028",
    "\u2029": "U+2029",
}

EVENTS_FILE = "events.jsonl"  # const.py ProjectPaths.events_file (§1)
META_FILE = "meta.json"  # session/store.py (§1)
CONTINUE_TEXT = "<system>continue</system>"  # core/turn.py: synthetic prompt after a partial response (§1.3)
# Records that say klaude changed its own history (§1.2 CompactionEntry); klaude never prunes.
COMPACTION_RECORD_TYPES = frozenset({COMPACTION})
PRUNE_RECORD_TYPES: frozenset[str] = frozenset()
# Every history item keeps its place: klaude indexes its history by position (first_kept_index).
CONVERSATION_KEEPS_BOOKKEEPING = True
# "prompt is too long: 229975 tokens > 200000 maximum" (Anthropic's wording, §1.3 StreamErrorItem)
_PROMPT_TOO_LONG_RE = re.compile(r"(\d+) tokens > (\d+) maximum")
# §1.5: 2.0.0 DeveloperMessages carried these flat fields instead of ui_extra
_DEVELOPER_FLAT_FIELDS_2_0 = ("memory_paths", "external_file_changes", "todo_use", "at_files", "skill_name")


class _SplitLines:
    """Hands the JSON reader a stand-in (an empty object, as a bytearray: orjson reads no bytes subclass) for each
    line klaude's loader splits, and keeps the line itself for the parser, in order."""

    def __init__(self) -> None:
        self.pending: deque[tuple[bytearray, bytes]] = deque()

    def mark(self, lines: Iterable[bytes]) -> Iterator[bytes | bytearray]:
        # Not emulated: a byte order mark. klaude reads the file as plain UTF-8, so json.loads refuses a first line
        # that starts with one; the project's one JSONL reader (compaction/formats/jsonl.py) reads past it for every
        # agent. klaude never writes one (session/codec.py); only an editor would.
        for line in lines:
            if _splitlines_breaks(line):
                stand_in = bytearray(b"{}\n")
                self.pending.append((stand_in, line))
                yield stand_in
            else:
                yield line

    def original(self, raw: bytes | bytearray) -> bytes | None:
        """The split line ``raw`` stands for, or None when ``raw`` is a line of its own."""
        if self.pending and raw is self.pending[0][0]:
            return self.pending.popleft()[1]
        return None


def session_files(path: Path) -> tuple[Path, Path | None]:
    """``(events.jsonl, meta.json or None)`` from a session directory or an ``events.jsonl`` path."""
    path = Path(path)
    events = path / EVENTS_FILE if path.is_dir() else path
    meta = events.parent / META_FILE
    return events, meta if meta.is_file() else None


def read_meta(path: Path | None) -> dict[str, Any]:
    """``meta.json`` as a dict; {} when it is missing or unreadable (klaude then uses defaults, §1.1)."""
    if path is None:
        return {}
    path = Path(path)
    if path.is_dir():
        path = path / META_FILE
    try:
        loaded = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def history_messages(records: Iterable[Record]) -> list[Message]:
    """The strategy's ``messages``: every decoded history item in order, so position == klaude index."""
    return [r for r in records if isinstance(r, Message) and r.data.get("index") is not None]


def neutral_usage(usage: dict[str, Any]) -> Usage:
    """Neutral ``Usage`` whose ``.context`` is klaude's ``context_size`` (see the module docstring)."""
    output = _int(usage.get("output_tokens"))
    context_size = usage.get("context_size")
    if context_size is None:
        # klaude's fallback, total_tokens, is a computed field (protocol/model.py Usage: input_tokens +
        # output_tokens); the stored total_tokens is not read back.
        context_size = _int(usage.get("input_tokens")) + output
    context = max(0, _int(context_size))
    cache_read = min(max(0, _int(usage.get("cached_tokens"))), context)
    return Usage(input_tokens=context - cache_read, cache_read_input_tokens=cache_read, output_tokens=output)


# total_tokens is left out: klaude computes it (protocol/model.py Usage) and ignores the stored value.
USAGE_COUNTS = ("input_tokens", "cached_tokens", "output_tokens", "context_size", "context_limit")


def _usage_numbers(usage: dict[str, Any]) -> dict[str, Any]:
    """``usage`` with its counts as ints, read as klaude's pydantic model reads them (lax mode: an integral float
    or a string of digits is an int); any other value makes the line unreadable, as it is for klaude."""
    checked = dict(usage)
    for key in USAGE_COUNTS:
        value = usage.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        integral_float = isinstance(value, float) and value.is_integer()
        if integral_float or (isinstance(value, str) and value.strip().lstrip("+-").isdigit()):
            checked[key] = int(value)
        else:
            raise ValueError(f"'usage.{key}' is not an integer ({str(value)[:50]!r})")
    return checked


# pydantic's lax bool strings (what FileStatus.is_memory accepts besides a bool, 0 and 1)
_BOOL_STRINGS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


def _valid_file_status(status: Any) -> bool:
    """Whether protocol/model.py ``FileStatus`` (mtime: float, content_sha256: str | None, is_memory: bool) takes it."""
    if not isinstance(status, dict):
        return False
    mtime = status.get("mtime")
    if isinstance(mtime, str):
        try:
            float(mtime)
        except ValueError:
            return False
    elif not isinstance(mtime, int | float):
        return False
    if status.get("content_sha256") is not None and not isinstance(status.get("content_sha256"), str):
        return False
    memory = status.get("is_memory", False)
    if isinstance(memory, str):
        return memory.strip().lower() in _BOOL_STRINGS
    return isinstance(memory, bool) or (isinstance(memory, int | float) and memory in (0, 1))


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


class KlaudeCodeParser:
    """Feed ``events.jsonl`` lines (bytes, in order); read ``info`` once ``parse`` is exhausted."""

    def __init__(
        self, *, meta: dict[str, Any] | None = None, agent: str = MAIN, first_line: int = 1, first_index: int = 0
    ) -> None:
        self.meta = meta or {}
        self.agent = agent
        self.first_line = first_line
        self._index = first_index  # klaude history index of the next decoded item
        self.info = SessionInfo(format=FORMAT)
        self._apply_meta()
        # state for trigger inference and version detection
        self._previous_type: str | None = None
        self._previous_overflow = False
        self._last_context: int | None = None
        self._last_limit: int | None = None
        self._usage_since_compaction = True
        self._seen_compaction = False
        self._overflow_retried_without_compaction = False

    def _apply_meta(self) -> None:
        meta, info = self.meta, self.info
        info.session_id = meta.get("id") if isinstance(meta.get("id"), str) else None
        info.cwd = meta.get("work_dir") if isinstance(meta.get("work_dir"), str) else None
        info.model = meta.get("model_name") if isinstance(meta.get("model_name"), str) else None
        tracker = meta.get("file_tracker")
        # session.py Session.load_meta keeps the entries whose value validates as a FileStatus, skips the others.
        info.data["file_tracker_paths"] = (
            [path for path, status in tracker.items() if _valid_file_status(status)]
            if isinstance(tracker, dict)
            else []
        )
        for key in ("model_config_name", "model_thinking", "sub_agent_state", "messages_count", "todos"):
            if key in meta:
                info.data[key] = meta[key]
        # epoch seconds: the only anchor between naive-local item timestamps and real time (§1.2)
        info.data["meta_created_at"] = meta.get("created_at")
        info.data["meta_updated_at"] = meta.get("updated_at")
        user_messages = meta.get("user_messages")
        if isinstance(user_messages, list):
            first = next((m for m in user_messages if isinstance(m, str) and m and m != CONTINUE_TEXT), None)
            if first:
                note_prompt_title(info, first)

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]:
        split = _SplitLines()
        for item in json_objects(split.mark(lines), first_line=self.first_line, info=self.info):  # type: ignore[arg-type]
            if isinstance(item, LineError):
                yield item
                continue
            line_number, raw, loaded = item
            original = split.original(raw)
            if original is not None:
                yield from self._split_line(line_number, original)
            else:
                yield from self._object(line_number, raw, loaded)
        self._finish()

    def _split_line(self, line_number: int, raw: bytes) -> Iterator[Record]:
        """What klaude's ``load_history`` reads of a line ``str.splitlines()`` breaks: each piece that
        ``decode_jsonl_line`` (strip, json.loads, an object) takes is an item of its own, the others are lost."""
        text = raw.decode("utf-8", "replace")
        breaks = ", ".join(dict.fromkeys(name for char, name in _BREAK_NAMES.items() if char in text.rstrip("\r\n")))
        pieces = [piece.strip() for piece in text.splitlines() if piece.strip()]
        objects: list[tuple[bytes, dict[str, Any]]] = []
        for piece in pieces:
            try:
                loaded = orjson.loads(piece)
            except orjson.JSONDecodeError:
                continue
            if isinstance(loaded, dict):
                objects.append((piece.encode(), loaded))
        if not objects:
            yield LineError(line=line_number, message=_DROPPED_LINE.format(breaks=breaks))
            return
        for piece_bytes, loaded in objects:
            yield from self._object(line_number, piece_bytes, loaded)
        if len(objects) < len(pieces):
            yield LineError(line_number, _PARTLY_DROPPED_LINE.format(kept=len(objects), breaks=breaks))

    def _object(self, line_number: int, raw: bytes, loaded: dict[str, Any]) -> Iterator[Record]:
        item_type = loaded.get("type")
        if not isinstance(item_type, str) or item_type not in HISTORY_TYPES:
            # klaude's loader skips unknown types silently; keep the line, outside the history index
            yield Message(
                line=line_number,
                role="meta",
                kind="unknown",
                agent=self.agent,
                raw_type=str(item_type) if item_type is not None else "",
                raw=raw.strip().decode("utf-8", "replace"),
                data={"index": None},
            )
            return
        # session/codec.py decode_conversation_item: a missing "data" is {} (only TaskMetadataItem needs nothing)
        data = loaded.get("data", {})
        if not isinstance(data, dict):
            yield LineError(line_number, f"{item_type}: 'data' is not an object")
            return
        index_before = self._index
        records = records_of_line(line_number, partial(self._item, line_number, item_type, data))
        # A record the import would refuse to store is refused here, before it counts: a hole in the stored history
        # indices would misplace every later item for klaude-code's strategy (which reads them as klaude's own).
        problem = next((p for r in records if isinstance(r, Message) and (p := unstorable(r))), None)
        if problem is not None:
            records = [LineError(line_number, problem)]
        if len(records) == 1 and isinstance(records[0], LineError):
            self._index = index_before  # an unreadable line is no history item: the indices stay dense
        yield from records

    # -- one history item

    def _item(self, line: int, item_type: str, data: dict[str, Any]) -> Iterator[Record]:
        index = self._index
        self._index += 1
        timestamp = data.get("created_at") if isinstance(data.get("created_at"), str) else None
        if readable_time(timestamp) is not None:  # an unreadable time is no start or end of the session
            if self.info.started_at is None:
                self.info.started_at = timestamp
            self.info.ended_at = timestamp
        message = Message(
            line=line,
            role="meta",
            kind="bookkeeping",
            agent=self.agent,
            timestamp=timestamp,
            raw_type=item_type,
            data={"index": index, "item": data},
        )
        event: ContextEvent | None = None
        if item_type == USER:
            self._user(message, data)
        elif item_type in (DEVELOPER, SYSTEM):
            message.role = "system"
            message.kind = "injected" if item_type == DEVELOPER else "system"
            message.blocks = _content_blocks(data)
            self._developer_version_hint(data)
        elif item_type == ASSISTANT:
            self._assistant(message, data)
        elif item_type == TOOL_RESULT:
            self._tool_result(message, data)
        elif item_type == COMPACTION:
            event = self._compaction(message, data)
        elif item_type == STREAM_ERROR:
            event = self._stream_error(message, data)
        elif item_type == TASK_METADATA:
            self._task_metadata(message, data)
        if item_type != STREAM_ERROR:
            self._previous_overflow = False
        self._previous_type = item_type
        yield message
        if event is not None:
            yield event

    def _user(self, message: Message, data: dict[str, Any]) -> None:
        message.role = "user"
        message.blocks = _content_blocks(data)
        text = message.text
        message.kind = "injected" if text.strip() == CONTINUE_TEXT else "prompt"
        if message.kind == "prompt":
            note_prompt_title(self.info, text)

    def _assistant(self, message: Message, data: dict[str, Any]) -> None:
        message.role = "assistant"
        message.kind = "assistant"
        message.call_key = data.get("response_id") if isinstance(data.get("response_id"), str) else None
        stop_reason = data.get("stop_reason")
        if stop_reason is not None and not isinstance(stop_reason, str):
            # klaude's pydantic model holds a string here and would refuse to load this line too.
            raise ValueError(f"'stop_reason' is {type(stop_reason).__name__}, not a string")
        message.data["stop_reason"] = stop_reason
        blocks: list[Block] = []
        for part in _parts(data):
            part_type = part.get("type")
            if part_type == "text":
                blocks.append(Block("text", text=_str(part.get("text"))))
            elif part_type == "thinking_text":
                blocks.append(Block("thinking", text=_str(part.get("text"))))
                message.model = message.model or _str(part.get("model_id")) or None
            elif part_type == "tool_call":
                arguments = _str(part.get("arguments_json"))
                try:
                    tool_input: Any = orjson.loads(arguments) if arguments else {}
                except orjson.JSONDecodeError:
                    tool_input = arguments
                blocks.append(
                    Block(
                        "tool_use",
                        text=arguments,
                        tool_id=_str(part.get("call_id")) or None,
                        tool_name=_str(part.get("tool_name")) or None,
                        tool_input=tool_input,
                    )
                )
            elif part_type in ("image_url", "image_file"):
                blocks.append(_image_block(part))
            # thinking_signature carries no text the dashboard shows
        message.blocks = blocks
        usage = data.get("usage")
        if isinstance(usage, dict):
            usage = _usage_numbers(usage)
            message.model = _str(usage.get("model_name")) or message.model
            message.data["usage"] = usage
            if usage.get("context_limit") is not None:
                self._last_limit = _int(usage.get("context_limit"))
                self.info.context_window = self._last_limit
            if stop_reason not in UNSUCCESSFUL_STOP_REASONS:
                message.usage = neutral_usage(usage)
                self._last_context = message.usage.context
                self._usage_since_compaction = True
        if message.model:
            self.info.model = self.info.model or message.model

    def _tool_result(self, message: Message, data: dict[str, Any]) -> None:
        message.role = "user"
        message.kind = "tool_result"
        status = _str(data.get("status"))
        message.data["status"] = status
        message.blocks = [
            Block(
                "tool_result",
                text=_str(data.get("output_text")),
                tool_id=_str(data.get("call_id")) or None,
                tool_name=_str(data.get("tool_name")) or None,
                is_error=status not in ("", "success"),
            )
        ]
        message.blocks.extend(_image_block(p) for p in _parts(data) if p.get("type") in ("image_url", "image_file"))
        ui_extra = data.get("ui_extra")
        if isinstance(ui_extra, dict) and ui_extra.get("type") == "session_id":
            # the parent's link to a sub-agent session (§1)
            message.data["sub_agent_session_id"] = ui_extra.get("session_id")

    def _compaction(self, message: Message, data: dict[str, Any]) -> ContextEvent:
        message.role = "user"  # the summary reaches the model as a plain user message (§3.12)
        message.kind = "compact_summary"
        summary = _str(data.get("summary"))
        message.blocks = [Block("text", text=summary)]
        first_kept = data.get("first_kept_index")
        tokens_before = data.get("tokens_before")
        message.data["first_kept_index"] = first_kept
        message.data["tokens_before"] = tokens_before
        trigger = self._infer_trigger()
        message.data["trigger"] = trigger  # inferred (§1.4): a replay and a preview read it beside the entry
        self._seen_compaction = True
        self._usage_since_compaction = False
        return ContextEvent(
            kind="compaction",
            line=message.line,
            agent=self.agent,
            timestamp=message.timestamp,
            trigger=trigger,
            pre_tokens=_int(tokens_before) if tokens_before is not None else None,
            message=summary[:500],
            data={
                "index": message.data["index"],
                "first_kept_index": first_kept,
                "trigger_inferred": True,  # CompactionEntry records no reason (§1.3)
                "split_task": summary.startswith(COMPACTION_SUMMARY_PREFIX),
                "details": data.get("details"),
                "kept_items_brief": data.get("kept_items_brief"),
            },
        )

    def _infer_trigger(self) -> str:
        """threshold / overflow / manual from where the entry sits (§1.4)."""
        previous = self._previous_type
        if previous == STREAM_ERROR and self._previous_overflow:
            return "overflow"
        if previous in (USER, DEVELOPER, TOOL_RESULT):
            return "threshold"  # mid-task: only the turn-start threshold check compacts here
        # between tasks: the TUI runner's threshold check, or the user's /compact
        if self._last_context is not None and self._last_limit and self._usage_since_compaction:
            reserve = KlaudeParams.for_limit(self._last_limit).reserve_tokens
            if self._last_context > self._last_limit - reserve:
                return "threshold"
        return "manual"

    def _stream_error(self, message: Message, data: dict[str, Any]) -> ContextEvent:
        message.role = "meta"
        message.kind = "system"
        error = _str(data.get("error"))
        message.blocks = [Block("text", text=error)]
        overflow = is_context_overflow(error)
        if overflow and self._previous_type == STREAM_ERROR and self._previous_overflow:
            self._overflow_retried_without_compaction = True
        self._previous_overflow = overflow
        event = ContextEvent(
            kind="overflow" if overflow else "api_error",
            line=message.line,
            agent=self.agent,
            timestamp=message.timestamp,
            message=error,
            data={"index": message.data["index"]},
        )
        found = _PROMPT_TOO_LONG_RE.search(error)
        if found:
            event.pre_tokens = int(found.group(1))
            event.data["prompt_tokens"] = int(found.group(1))
            event.data["limit"] = int(found.group(2))
        return event

    def _task_metadata(self, message: Message, data: dict[str, Any]) -> None:
        main = data.get("main_agent")
        if isinstance(main, dict):
            message.data["turn_count"] = main.get("turn_count")
            message.data["task_duration_s"] = main.get("task_duration_s")
            message.model = _str(main.get("model_name")) or None

    def _developer_version_hint(self, data: dict[str, Any]) -> None:
        if "ui_extra" in data:
            self.info.data.setdefault("version_range", "2.5.0-2.8.1")
        elif any(key in data for key in _DEVELOPER_FLAT_FIELDS_2_0):
            self.info.data.setdefault("version_range", "2.0.x")

    def _finish(self) -> None:
        # §1.5: no file records a version; these are the only heuristics.
        if self._seen_compaction:
            self.info.agent_version = "2.8.x"
            self.info.data["version_evidence"] = "CompactionEntry present (written by >= 2.8.0)"
        elif self._overflow_retried_without_compaction:
            self.info.agent_version = "2.7.0"
            self.info.data["version_evidence"] = "context overflow retried with no compaction (2.7.0 has none)"


def _parts(data: dict[str, Any]) -> list[dict[str, Any]]:
    """An item's parts; raises for parts klaude's pydantic models refuse (a part that is not an object, or whose
    ``type``, the union's discriminator, is not a string): klaude cannot load that line, and its item is no history
    item here either."""
    parts = data.get("parts")
    if not isinstance(parts, list):
        return []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ValueError(f"a part of 'parts' is not an object with a string 'type' ({str(part)[:50]!r})")
    return parts


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _image_block(part: dict[str, Any]) -> Block:
    if part.get("type") == "image_file":
        return Block("image", text=_str(part.get("file_path")), media_type=_str(part.get("mime_type")) or None)
    url = _str(part.get("url"))
    if url.startswith("data:"):
        # keep the media type, not the (possibly huge) inline bytes
        return Block("image", text="", media_type=url[5:].split(";", 1)[0] or None)
    return Block("image", text=url)


def _content_blocks(data: dict[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for part in _parts(data):
        if part.get("type") == "text":
            blocks.append(Block("text", text=_str(part.get("text"))))
        elif part.get("type") in ("image_url", "image_file"):
            blocks.append(_image_block(part))
    return blocks


def parse_session(path: Path, *, agent: str = MAIN) -> tuple[KlaudeCodeParser, list[Record]]:
    """Convenience for tests and small files: parse a session directory or events.jsonl path fully."""
    events, meta_path = session_files(path)
    parser = KlaudeCodeParser(meta=read_meta(meta_path), agent=agent)
    with events.open("rb") as handle:
        records = list(parser.parse(handle))
    return parser, records


def make_parser(*, agent: str, path: Path) -> KlaudeCodeParser:
    """klaude-code reads ``meta.json`` beside ``events.jsonl`` (§1.1); without it, its defaults."""
    meta_path = path.with_name(META_FILE)
    return KlaudeCodeParser(meta=read_meta(meta_path) if meta_path.is_file() else None, agent=agent)


def parent_link(head: list[bytes], path: Path) -> ParentLink | None:
    return None  # sub-agent sessions are sessions of their own folder (meta.json sub_agent_state)


# events.jsonl: {"type": <pydantic class name>, "data": {...}}; the full list of persisted classes is the
# HistoryEvent union (klaude-code.md §1.2, protocol/message.py).
DETECT_TYPES = frozenset(
    {
        "SystemMessage",
        "DeveloperMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "StreamErrorItem",
        "TaskMetadataItem",
        "CompactionEntry",
    }
)


def vote(obj: dict[str, Any]) -> bool:
    """A klaude-code history event, for format detection."""
    record_type = obj.get("type")
    return isinstance(record_type, str) and record_type in DETECT_TYPES and isinstance(obj.get("data"), dict)
