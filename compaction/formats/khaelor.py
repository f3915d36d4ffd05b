"""KHAELOR's durable event log (JSONL, one ``DurableEvent`` per line) → the neutral model.

Format and assumptions: docs/formats/khaelor.md. KHAELOR's source is not public; the only primary
source is seeds/002 (``src/context/compaction.ts``), which shows the in-memory event shape
``{seq, type, payload}``. The JSONL wrapping (``ts``, ``sessionId``), ``session.started``, the
steering id and ``model.usage`` are our assumptions (docs/formats/khaelor.md, "The durable event log").

The parser streams: one ``Message`` (or ``LineError``) per non-blank line, followed by the
``ContextEvent``s that line implies. It keeps only small maps (tool id → name, steering id → text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from compaction.agents import AgentProfile, InstructionSources, ToolRoles
from compaction.formats.jsonl import json_objects, readable_time, records_of_line
from compaction.transcript import (
    MAIN,
    Block,
    ContextEvent,
    Kind,
    LineError,
    Message,
    ParentLink,
    Record,
    Role,
    SessionInfo,
    Usage,
    note_prompt_title,
)

FORMAT = "khaelor"
LABEL = "KHAELOR"
# docs/formats/khaelor.md names no per-user folder of event logs: they are imported by path only.
SESSION_FOLDERS: tuple[str, ...] = ()
# What neutral code asks about KHAELOR (``compaction.agents``): its tools as docs/formats/khaelor.md and the
# samples name them (read_file, edit_file, write_file, bash); the others are assumed from its tool family
# (view, create_file, grep, glob, list_dir, search, todo_write). Paths in path (filePath in some tools),
# commands in command/cmd.
PROFILE = AgentProfile(
    colour="#db2777",
    dark_colour="#f472b6",
    replay_colour="#be185d",
    tools=ToolRoles(
        read=frozenset({"read_file", "view"}),
        edit=frozenset({"edit_file", "write_file", "create_file"}),
        shell=frozenset({"bash"}),
        search=frozenset({"grep", "glob", "list_dir", "search"}),
        todo=frozenset({"todo_write"}),
        path_keys=("path", "file_path", "filePath", "notebook_path"),
        command_keys=("command", "cmd"),
        # edit_file's path/old/new (the samples); write_file's content assumed (docs/formats/khaelor.md §3)
        old_keys=("old",),
        new_keys=("new",),
        content_keys=("content",),
    ),
    upload_hint="event logs (*.events.jsonl)",
    # The instructions it works under (issue 38): its event log records no instruction file, skill or reminder
    # (docs/formats/khaelor.md: the event types), so only the user's own constraints count: its prompts, and the
    # steering text the user queued while it worked, once injected (user.steering-injected).
    instructions=InstructionSources(user_record_types=("user.steering-injected",)),
)

# Event types named in seeds/002 (compaction.ts) and docs/formats/khaelor.md (table of event types).
SESSION_STARTED = "session.started"  # assumed (docs/formats/khaelor.md): model, auxModel, contextWindow, cwd
USER_MESSAGE = "user.message-created"
STEERING_QUEUED = "user.steering-queued"
STEERING_INJECTED = "user.steering-injected"
MODEL_TEXT_BLOCK = "model.text-block-completed"
MODEL_THINKING_BLOCK = "model.thinking-block-completed"
TOOL_REQUESTED = "tool.requested"
TOOL_COMPLETED = "tool.completed"
TOOL_FAILED = "tool.failed"
TOOL_CANCELLED = "tool.cancelled"
TOOL_RESULT_TYPES = frozenset({TOOL_COMPLETED, TOOL_FAILED, TOOL_CANCELLED})
CONTEXT_PRUNED = "context.pruned"
CONTEXT_COMPACTED = "context.compacted"
PROCESS_STARTED = "process.started"
PROCESS_EXITED = "process.exited"
MODEL_USAGE = "model.usage"  # assumed (docs/formats/khaelor.md, "Where the seed is silent": Usage)
# Events that say KHAELOR changed its own history.
COMPACTION_RECORD_TYPES = frozenset({CONTEXT_COMPACTED})
PRUNE_RECORD_TYPES = frozenset({CONTEXT_PRUNED})
# Process and session events feed the checkpoint (compaction.ts collectRunningProcesses).
CONVERSATION_KEEPS_BOOKKEEPING = True

# compaction.ts CompactionCheckpoint.trigger: the compaction that follows a context overflow.
REACTIVE_OVERFLOW = "reactive-overflow"

# Wording of "the prompt did not fit" errors (Anthropic API "prompt is too long", generic provider
# phrasings). Only the start of an error is searched: a failing tool's output may quote any text.
_OVERFLOW_WORDING = re.compile(
    r"prompt is too long|input is too long|context_length_exceeded|maximum context length"
    r"|context (?:window|length) (?:exceeded|overflow)|exceeds? the (?:model'?s? )?(?:context|maximum)"
    r"|too many (?:input )?tokens|context overflow",
    re.IGNORECASE,
)
_OVERFLOW_SEARCH_CHARS = 1_000
_EXCERPT_CHARS = 300


def json_stringify(value: Any) -> str:
    """Compact JSON like JavaScript's ``JSON.stringify`` (compaction.ts estimates and renders tool input so)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers beyond 64 bits: orjson refuses them, the stdlib does not
        import json

        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def is_overflow_text(text: str) -> bool:
    return _OVERFLOW_WORDING.search(text[:_OVERFLOW_SEARCH_CHARS]) is not None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _usage_from(payload: dict[str, Any]) -> Usage:
    fields = payload.get("usage")
    source = fields if isinstance(fields, dict) else payload
    return Usage(
        input_tokens=_int_or_none(source.get("input_tokens")) or 0,
        cache_creation_input_tokens=_int_or_none(source.get("cache_creation_input_tokens")) or 0,
        cache_read_input_tokens=_int_or_none(source.get("cache_read_input_tokens")) or 0,
        output_tokens=_int_or_none(source.get("output_tokens")) or 0,
    )


class KhaelorParser:
    """Stream records from the lines of one KHAELOR ``*.events.jsonl`` file.

    ``info`` fills in while parsing; read it after ``parse`` is exhausted.
    """

    def __init__(self, *, agent: str = MAIN, first_line: int = 1) -> None:
        self.agent = agent
        self.first_line = first_line
        self.info = SessionInfo(format=FORMAT)
        self._tool_names: dict[str, str] = {}
        self._steering_texts: dict[str, str] = {}
        self._last_seq: int | None = None

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]:
        for item in json_objects(lines, first_line=self.first_line, info=self.info):
            if isinstance(item, LineError):
                yield item
            else:
                yield from records_of_line(item[0], partial(self._parse_event, *item))

    # ----------------------------------------------------------------- one line

    def _parse_event(self, number: int, raw: bytes, event: dict[str, Any]) -> Iterator[Record]:
        seq = _int_or_none(event.get("seq"))
        if seq is None:
            yield LineError(line=number, message="missing or non-integer 'seq'")
            return
        event_type = event.get("type")
        if not isinstance(event_type, str) or not event_type:
            yield LineError(line=number, message="missing or non-string 'type'")
            return
        payload = event.get("payload", {})
        if not isinstance(payload, dict):
            yield LineError(line=number, message=f"'payload' of {event_type} is not an object")
            return
        yield from self._records(number, raw, seq, event_type, event, payload)

    def _records(
        self, number: int, raw: bytes, seq: int, event_type: str, event: dict[str, Any], payload: dict[str, Any]
    ) -> Iterator[Record]:
        timestamp = _str_or_none(event.get("ts"))
        self._note_session(seq, event, timestamp)

        def message(
            role: Role, kind: Kind, blocks: list[Block] | None = None, **extra: Any
        ) -> Message:  # the fields every record of this line shares
            return Message(
                line=number,
                role=role,
                kind=kind,
                agent=self.agent,
                blocks=blocks or [],
                timestamp=timestamp,
                raw_type=event_type,
                data={"seq": seq, "payload": payload},
                **extra,
            )

        def context_event(kind: Any, **fields: Any) -> ContextEvent:
            return ContextEvent(kind=kind, line=number, agent=self.agent, timestamp=timestamp, **fields)

        text = _str_or_none(payload.get("text")) or ""
        if event_type == SESSION_STARTED:
            self._note_session_started(payload)
            yield message("meta", "bookkeeping")
        elif event_type == USER_MESSAGE:
            if self.agent == MAIN:
                note_prompt_title(self.info, text)
            yield message("user", "prompt", [Block("text", text=text)])
        elif event_type == STEERING_QUEUED:
            steering_id = _str_or_none(payload.get("steeringId"))
            if steering_id is not None:
                self._steering_texts[steering_id] = text
            # Queued text reaches the model only when injected (compaction.ts extractCutEvents).
            yield message("meta", "bookkeeping", [Block("text", text=text)])
        elif event_type == STEERING_INJECTED:
            steering_id = _str_or_none(payload.get("steeringId"))
            injected = text or self._steering_texts.get(steering_id or "", "")
            yield message("user", "injected", [Block("text", text=injected)] if injected else [])
        elif event_type == MODEL_TEXT_BLOCK:
            yield message("assistant", "assistant", [Block("text", text=text)], model=self._model(payload))
        elif event_type == MODEL_THINKING_BLOCK:
            thinking = _str_or_none(payload.get("thinking")) or ""
            yield message("assistant", "assistant", [Block("thinking", text=thinking)], model=self._model(payload))
        elif event_type == TOOL_REQUESTED:
            tool_id = _str_or_none(payload.get("toolUseId"))
            name = _str_or_none(payload.get("name"))
            if tool_id is not None and name is not None:
                self._tool_names[tool_id] = name
            tool_input = payload.get("input")
            block = Block(
                "tool_use", text=json_stringify(tool_input), tool_id=tool_id, tool_name=name, tool_input=tool_input
            )
            yield message("assistant", "assistant", [block], model=self._model(payload))
        elif event_type in TOOL_RESULT_TYPES:
            tool_id = _str_or_none(payload.get("toolUseId"))
            model_text = _str_or_none(payload.get("modelText")) or ""
            block = Block(
                "tool_result",
                text=model_text,
                tool_id=tool_id,
                tool_name=self._tool_names.get(tool_id or ""),
                is_error=event_type == TOOL_FAILED,
            )
            yield message("user", "tool_result", [block])
            if event_type == TOOL_FAILED and is_overflow_text(model_text):
                yield context_event(
                    "overflow", message=model_text[:_EXCERPT_CHARS], tool_ids=[tool_id] if tool_id else []
                )
        elif event_type == CONTEXT_PRUNED:
            yield message("system", "system")
            tool_ids = payload.get("toolUseIds")
            yield context_event(
                "prune",
                tool_ids=[i for i in tool_ids if isinstance(i, str)] if isinstance(tool_ids, list) else [],
                tokens_saved=_int_or_none(payload.get("tokensReclaimedEstimate")),
                data={"seq": seq, "placeholder": payload.get("placeholder")},
            )
        elif event_type == CONTEXT_COMPACTED:
            checkpoint = _str_or_none(payload.get("checkpointYaml")) or ""
            # The checkpoint replaces the cut in the model's history (compaction.ts conversation types).
            yield message("user", "compact_summary", [Block("text", text=checkpoint)])
            trigger = _str_or_none(payload.get("trigger"))
            tokens_before = _int_or_none(payload.get("tokensBefore"))
            if trigger == REACTIVE_OVERFLOW:
                yield context_event(
                    "overflow",
                    trigger=trigger,
                    pre_tokens=tokens_before,
                    message="the context overflowed; KHAELOR compacted reactively",
                )
            cut = payload.get("cut")
            yield context_event(
                "compaction",
                trigger=trigger,
                pre_tokens=tokens_before,
                message=checkpoint[:_EXCERPT_CHARS],
                data={
                    "seq": seq,
                    "cut": cut if isinstance(cut, dict) else None,
                    "checkpointYaml": checkpoint,
                    "summaryModel": payload.get("summaryModel"),
                },
            )
        elif event_type in (PROCESS_STARTED, PROCESS_EXITED):
            yield message("system", "system")
        elif event_type == MODEL_USAGE:
            call_key = _str_or_none(payload.get("requestId")) or _str_or_none(payload.get("messageId"))
            yield message(
                "assistant",
                "assistant",
                model=self._model(payload),
                usage=_usage_from(payload),
                call_key=call_key or f"seq:{seq}",
            )
        else:
            unknown = message("meta", "unknown")
            unknown.raw = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            yield unknown

    # ----------------------------------------------------------------- session info

    def _model(self, payload: dict[str, Any]) -> str | None:
        return _str_or_none(payload.get("model")) or self.info.model

    def _note_session(self, seq: int, event: dict[str, Any], timestamp: str | None) -> None:
        info = self.info
        if info.session_id is None:
            info.session_id = _str_or_none(event.get("sessionId"))
        if readable_time(timestamp) is not None:  # an unreadable time is no start or end of the session
            # File order, not min/max: ts formats may mix offsets, and seq order is the log's truth.
            if info.started_at is None:
                info.started_at = timestamp
            info.ended_at = timestamp
        if self._last_seq is not None and seq <= self._last_seq:
            info.data["seq_regressions"] = info.data.get("seq_regressions", 0) + 1
        self._last_seq = seq

    def _note_session_started(self, payload: dict[str, Any]) -> None:
        info = self.info
        info.model = _str_or_none(payload.get("model")) or info.model
        info.context_window = _int_or_none(payload.get("contextWindow")) or info.context_window
        info.cwd = _str_or_none(payload.get("cwd")) or info.cwd
        info.agent_version = _str_or_none(payload.get("version")) or info.agent_version
        info.session_id = info.session_id or _str_or_none(payload.get("sessionId"))
        aux_model = _str_or_none(payload.get("auxModel"))
        if aux_model is not None:
            info.data["aux_model"] = aux_model


def make_parser(*, agent: str, path: Path) -> KhaelorParser:
    return KhaelorParser(agent=agent)


def parent_link(head: list[bytes], path: Path) -> ParentLink | None:
    return None  # one event log per session: nothing attaches to another session


def vote(obj: dict[str, Any]) -> bool:
    """A KHAELOR durable event, for format detection: {"seq": int, "type": "dotted.type", "payload": {...}}
    (khaelor.md)."""
    record_type, seq = obj.get("type"), obj.get("seq")
    return (
        isinstance(record_type, str)
        and isinstance(seq, int)
        and not isinstance(seq, bool)
        and "." in record_type
        and isinstance(obj.get("payload"), dict)
    )
