"""OpenAI Codex CLI rollouts (``~/.codex/sessions/**/rollout-*.jsonl``) → the neutral model.

Format and its eras: docs/formats/codex.md. Two layouts are read:

* the envelope (0.34 on, PR #3380): every line is ``{timestamp, type, payload}`` with ``type`` one of
  ``session_meta | response_item | compacted | turn_context | event_msg`` (protocol.rs ``RolloutItem``);
* the older flat layout: a bare ``{id, timestamp, instructions, git}`` first line, ``{"record_type": …}``
  lines and bare ``ResponseItem``s. It records no token counts, and ``info.data`` says so.

API calls (doc §4, §10): a ``token_count`` event whose ``info`` is set, whose cumulative total changed and whose
``last_token_usage.input_tokens`` is above 0. Re-emits (same total, fired by rate-limit updates) and the
estimate rows written after a compaction (last input 0) are not calls. Where a call's ``token_count`` falls
relative to its response items changed over the versions (0.34-0.57: before them; 0.92 on: after them), so the
parser holds a response's items until it knows which call they belong to; records still come out in file order.

The ``event_msg`` mirrors of messages and reasoning (``user_message``, ``agent_message``, ``agent_reasoning``)
duplicate ``response_item``s (doc §3 "Mirrors"): they are kept as bookkeeping and never counted.

Sections (§) refer to docs/formats/codex.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from compaction.agents import AgentProfile, Fix, InstructionSources, ToolRoles
from compaction.formats.jsonl import json_objects, readable_time
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

FORMAT = "codex"
LABEL = "Codex"  # the agent's name as users read it (Codex CLI is its command-line client)
# Where Codex keeps its rollouts under the home folder (docs/formats/codex.md §1): sessions/YYYY/MM/DD/ since
# #1596 and archived_sessions/ since #3353.
SESSION_FOLDERS = (".codex/sessions", ".codex/archived_sessions")
# What neutral code asks about Codex (``compaction.agents``). Tool names seen in the samples (docs/formats/codex.md
# §3): shell (0.34-0.57, command as an argv list), shell_command (0.92), exec_command + write_stdin (0.104, cmd),
# local_shell; apply_patch as a freeform tool (its input is the patch) or, before it, a shell call whose command is
# ["apply_patch", "<patch>"]. Its raw item is kept in data["item"] for the strategy.
_FIXES = "docs/formats/codex.md §12"
PROFILE = AgentProfile(
    fixes=(
        Fix(
            "command_output",
            "AGENTS.md",
            "Keep command output short: pipe commands that print a lot through `| tail -n 50` (or `| head -n 50`), "
            "read files in ranges (`sed -n 1,200p FILE`), and write long logs to a file and search it with rg.",
            _FIXES,
        ),
        Fix(
            "read_output",
            "AGENTS.md",
            "Read files in ranges (`rg -n PATTERN FILE`, then `sed -n START,ENDp FILE`) instead of printing them "
            "whole.",
            _FIXES,
        ),
        Fix(
            "repeated_reads",
            "AGENTS.md",
            "Do not print a file again that you already read in this conversation unless it changed since.",
            _FIXES,
        ),
        Fix("warning_line", "~/.codex/config.toml", "model_auto_compact_token_limit = 180000", _FIXES),
    ),
    colour="#0f766e",
    dark_colour="#2dd4bf",
    # Codex CLI's ``codex resume <SESSION_ID>`` subcommand (codex-rs/cli, docs/archive.md).
    resume_command="codex resume {session_id}",
    replay_colour="#4338ca",  # its own, not Claude Code's teal (which is also this agent's colour)
    tools=ToolRoles(
        edit=frozenset({"apply_patch"}),
        patch=frozenset({"apply_patch"}),
        shell=frozenset({"shell", "local_shell", "shell_command", "exec_command"}),
        command_keys=("command", "cmd"),
        patch_keys=("patch", "input"),
    ),
    # The item and its measured size (item_size): a capped result is measured again from its blocks.
    raw_payload_keys=("item", "serialized_bytes"),
    upload_hint="rollouts (rollout-*.jsonl)",
    # The instructions it works under (issue 38): AGENTS.md reaches the model as a user message headed
    # "# AGENTS.md instructions for <folder>" (older builds: <user_instructions>), the sandbox rules as a developer
    # message in <permissions instructions> (docs/formats/codex.md §3). After a compaction Codex re-injects that
    # context (§5: remote compaction, and local since #12252).
    instructions=InstructionSources(
        file_patterns=(r"^# AGENTS\.md instructions for (?P<path>\S+)", r"^<user_instructions>"),
        reminder_tags=("permissions instructions",),
        reinjected=frozenset({"instruction_file", "reminder"}),
    ),
)

# RolloutItem tags (protocol.rs L2861-2869).
SESSION_META = "session_meta"
RESPONSE_ITEM = "response_item"
COMPACTED = "compacted"
TURN_CONTEXT = "turn_context"
EVENT_MSG = "event_msg"
ENVELOPE_TYPES = frozenset({SESSION_META, RESPONSE_ITEM, COMPACTED, TURN_CONTEXT, EVENT_MSG})

# ResponseItem tags (models.rs L440-592); "compaction_summary" is a serde alias of "compaction".
RESPONSE_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "local_shell_call",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "tool_search_call",
        "tool_search_output",
        "web_search_call",
        "image_generation_call",
        "ghost_snapshot",
        "compaction",
        "compaction_summary",
    }
)
# Items the model produces: a call's response. Everything else in the history is input to the next call.
MODEL_OUTPUT_TYPES = frozenset(
    {
        "reasoning",
        "local_shell_call",
        "function_call",
        "custom_tool_call",
        "tool_search_call",
        "web_search_call",
        "image_generation_call",
    }
)
TOOL_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
COMPACTION_ITEM_TYPES = frozenset({"compaction", "compaction_summary"})

# raw_type of the records this parser writes, ``<RolloutItem tag>/<inner type>``.
COMPACTED_RECORD = f"{COMPACTED}"
CONTEXT_COMPACTED_RECORD = f"{EVENT_MSG}/context_compacted"
TOKEN_COUNT_RECORD = f"{EVENT_MSG}/token_count"
COMPACTION_RECORD_TYPES = frozenset({COMPACTED_RECORD, CONTEXT_COMPACTED_RECORD})
PRUNE_RECORD_TYPES: frozenset[str] = frozenset()
# turn_context, mirrors and token rows never reach the model.
CONVERSATION_KEEPS_BOOKKEEPING = False

# compact.rs SUMMARY_PREFIX (templates/compact/summary_prefix.md, #6692): the summary a local compaction
# stores as a user message starts with it (``is_summary_message``).
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. Use this to build "
    "on the work that has already been done and avoid duplicating work. Here is the summary produced by the "
    "other language model, use the information in this summary to assist with your own analysis:"
)

# User-role messages Codex writes itself (contextual user messages: environment context, AGENTS.md, user
# instructions, aborted-turn notices, shell commands run by the user, skills). They reach the model but
# are not the user's prompts, and compaction does not keep them as such.
CONTEXTUAL_USER_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions for ",
    "<INSTRUCTIONS>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<skill>",
)

# Event messages that mirror a response item (doc §3): bookkeeping, counted once through the item.
MIRROR_EVENTS = frozenset({"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"})

_EXCERPT_CHARS = 300


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def content_text(content: Any) -> tuple[list[Block], int]:
    """Blocks of a message's ``content`` list, and how many images it holds."""
    if isinstance(content, str):
        return [Block("text", text=content)], 0
    blocks: list[Block] = []
    images = 0
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        part_type = part.get("type")
        if part_type in ("input_text", "output_text", "text"):
            blocks.append(Block("text", text=str(part.get("text") or "")))
        elif part_type == "input_image":
            images += 1
            url = str(part.get("image_url") or "")
            media = url[5 : url.find(";")] if url.startswith("data:") and ";" in url else None
            blocks.append(Block("image", media_type=media or "image"))
    return blocks, images


def item_size(item: dict[str, Any]) -> dict[str, int]:
    """What Codex's estimate of one history item reads (history.rs estimate_response_item_model_visible_bytes):
    its serialized JSON, and the inline base64 images in it (``data:image/...;base64,`` URLs, whose payload bytes
    Codex counts as a fixed size instead; any other URL counts as it is serialized).

    The rollout line holds the item as serde wrote it, so its compact JSON is the same bytes. In a redacted copy
    (``redaction``) a text counts at the length its marker records, and a redacted image URL as an inline image.
    """
    inline, payload = 0, 0
    for part in _image_parts(item):
        url = str(part.get("image_url") or "")
        meta = url[: url.find(",")].lower() if "," in url else ""
        if meta.startswith("data:image/") and ";base64" in meta:
            inline += 1
            payload += len(url) - len(meta) - 1
        elif redaction(url) is not None:
            # The redaction hid whether it was inline; an image the model saw counts as one (history.rs), and a
            # URL of the recorded length (0.27 to 6.8 million characters in the redacted sample) could only be inline.
            inline += 1
            payload += len(url)
    restored = sum(
        length - len(text)
        for key, text in _strings(item)
        if key != "image_url" and (length := redaction(text)) is not None
    )
    return {
        "serialized_bytes": len(orjson.dumps(item)) + restored,
        "inline_images": inline,
        "image_payload_bytes": payload,
    }


# A redacted copy of a rollout: localpush's fixture capture (scripts/capture_codex_fixture.py, Sanitizer.sanitize_text)
# replaces each free text by "[REDACTED_<KEY> len=<its length in characters> sha=<8 hex digits>]" and keeps token
# counts, timestamps and order (docs/formats/codex.md §11). Codex's own estimates read sizes only (history.rs), so
# such a copy is measured at the lengths it records.
REDACTION_MARKER = re.compile(r"\[REDACTED_[A-Z_]+ len=(\d+) sha=[0-9a-f]+\]")


def redaction(text: str) -> int | None:
    """The original length a redaction marker records; None when ``text`` is not one."""
    match = REDACTION_MARKER.fullmatch(text) if text.startswith("[REDACTED_") else None
    return int(match.group(1)) if match else None


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string of a JSON value, with the key it is under."""
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)


def _image_parts(item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    content = item.get("content")
    output = item.get("output")
    for parts in (content, output):
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "input_image":
                yield part


def output_text(output: Any) -> str:
    """A tool output as the model receives it: the string, or the text of its content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        blocks, _ = content_text(output)
        return "\n".join(b.text for b in blocks if b.text)
    if isinstance(output, dict):
        content = output.get("content")
        if isinstance(content, str):
            return content
        return orjson.dumps(output).decode()
    return "" if output is None else str(output)


def parent_identity(head: list[bytes]) -> tuple[str, str] | None:
    """(the rollout's own id, its parent's id) when the head's session_meta names a parent: a subagent's
    ``source.subagent.thread_spawn.parent_thread_id`` (#4612) or a fork's ``forked_from_id``."""
    for raw in head:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(line, dict) or line.get("type") != SESSION_META:
            continue
        meta = _object(line.get("payload"))
        own = _str_or_none(meta.get("id"))
        spawn = _object(_object(_object(meta.get("source")).get("subagent")).get("thread_spawn"))
        parent = _str_or_none(spawn.get("parent_thread_id")) or _str_or_none(meta.get("forked_from_id"))
        return (own, parent) if own and parent else None
    return None


_BASE64 = re.compile(r"[A-Za-z0-9+/=_-]+")


def encrypted_block(content: str, data: dict[str, Any]) -> Block:
    """An encrypted item's content, shown as such with its size. The ciphertext is not kept (the raw line is):
    only its size matters to Codex's estimate, and its text would pass for tens of thousands of tokens."""
    recorded = redaction(content)
    if recorded is not None:  # a redacted copy: the ciphertext's length as its marker records it (``redaction``)
        data.setdefault("encrypted", []).append({"chars": recorded, "base64": True, "redacted": True})
        return Block("redacted_thinking", text=f"{recorded:,} bytes (redacted)")
    data.setdefault("encrypted", []).append({"chars": len(content), "base64": bool(_BASE64.fullmatch(content))})
    return Block("redacted_thinking", text=f"{len(content):,} bytes")


def is_contextual_user_text(text: str) -> bool:
    stripped = text.lstrip()
    return any(stripped.startswith(prefix) for prefix in CONTEXTUAL_USER_PREFIXES)


def is_summary_text(text: str) -> bool:
    return text.startswith(SUMMARY_PREFIX)


def _json_or_text(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


class CodexParser:
    """Stream records from the lines of one Codex rollout file.

    ``info`` fills in while parsing; read it after ``parse`` is exhausted.
    """

    def __init__(self, *, agent: str = MAIN, first_line: int = 1) -> None:
        self.agent = agent
        self.first_line = first_line
        self.info = SessionInfo(format=FORMAT)
        self.info.data.update({"token_counts": False, "estimate_rows": 0, "layout": None})
        self._model: str | None = None
        self._last_total: int | None = None
        self._calls = 0
        # The call whose response items are still arriving (token_count written before them: 0.34-0.57).
        self._open_call: tuple[str, Usage] | None = None
        # Records held since a response item arrived before its call's token_count (0.92 on).
        self._held: list[Record] = []
        self._held_outputs: list[Message] = []
        self._compaction_since_call = False
        self._last_input: int | None = None  # the prompt size of the last call, for a compaction's "before"
        self._first_input: int | None = None  # the first call's prompt: the fixed prefix every request carries
        self._reasoning_to_give: int | None = None
        self._tool_names: dict[str, str] = {}
        # Lines held while reading a fork's copy of its parent's history (None: not in one).
        self._inheriting: list[tuple[int, bytes, dict[str, Any]]] | None = None
        self._inherited_total: int | None = None

    def parse(self, lines: Iterable[bytes]) -> Iterator[Record]:
        for item in json_objects(lines, first_line=self.first_line, info=self.info):
            if isinstance(item, LineError):
                yield from self._emit(item)
                continue
            try:
                # One line's records, read whole before any is passed on: an odd value anywhere in the line costs
                # that line (reported by number), never the file, as with the other agents' parsers.
                read = list(self._inherited(*item) if self._inheriting is not None else self._line(*item))
            except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as exc:
                yield from self._emit(LineError(item[0], f"cannot read this line ({type(exc).__name__}: {exc})"))
                continue
            yield from read
        if self._inheriting is not None:
            yield from self._end_inheritance()
        yield from self._release()
        if not self.info.data["token_counts"]:
            self.info.data["no_token_counts"] = (
                "This rollout records no token counts (the flat layout before Codex 0.34, or no token_count "
                "event): API calls and context sizes cannot be read from it."
            )

    # ----------------------------------------------------------------- emitting in file order

    def _emit(self, record: Record) -> Iterator[Record]:
        if self._held:
            self._held.append(record)
        else:
            yield record

    def _release(self) -> Iterator[Record]:
        held, self._held, self._held_outputs = self._held, [], []
        yield from held

    def _close_response(self) -> Iterator[Record]:
        """An input item arrived: the previous response is over (held items never got a call)."""
        self._open_call = None
        yield from self._release()

    # ----------------------------------------------------------------- one line

    def _line(self, number: int, raw: bytes, obj: dict[str, Any]) -> Iterator[Record]:
        timestamp = _str_or_none(obj.get("timestamp"))
        self._note_time(timestamp)
        line_type = obj.get("type")
        if line_type is not None and not isinstance(line_type, str):
            yield from self._emit(LineError(number, "'type' is not a string"))
            return
        if "payload" in obj and line_type in ENVELOPE_TYPES:
            self.info.data["layout"] = self.info.data["layout"] or "envelope"
            payload = obj.get("payload")
            if not isinstance(payload, dict):
                yield from self._emit(LineError(number, f"'payload' of {line_type} is not an object"))
                return
            yield from self._envelope(number, raw, timestamp, str(line_type), payload)
            return
        if "payload" not in obj and (line_type in RESPONSE_ITEM_TYPES or "record_type" in obj or number == 1):
            self.info.data["layout"] = self.info.data["layout"] or "flat"
            if line_type in RESPONSE_ITEM_TYPES:
                yield from self._response_item(number, timestamp, obj)
            elif "record_type" in obj:
                yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", raw_type="state"))
            elif number == 1 and isinstance(obj.get("id"), str):
                self._note_meta(obj)
                yield from self._meta_message(number, timestamp, obj)
            else:
                yield from self._unknown(number, timestamp, raw, str(line_type or ""))
            return
        yield from self._unknown(number, timestamp, raw, str(line_type or ""))

    def _envelope(
        self, number: int, raw: bytes, timestamp: str | None, line_type: str, payload: dict[str, Any]
    ) -> Iterator[Record]:
        if line_type == SESSION_META:
            yield from self._close_response()
            if self.info.session_id is not None and payload.get("id") != self.info.session_id:
                # A forked or subagent rollout repeats its parent's meta and history (doc §4 pitfall 4): that
                # inherited prefix is the parent's, already in the parent's own rollout.
                self.info.data["inherited_from_line"] = number
                self._inheriting = []
                self._inherited_total = None
                yield from self._emit(self._inherited_record(number, timestamp, SESSION_META))
                return
            self._note_meta(payload)
            yield from self._meta_message(number, timestamp, payload)
        elif line_type == RESPONSE_ITEM:
            yield from self._response_item(number, timestamp, payload)
        elif line_type == TURN_CONTEXT:
            model = _str_or_none(payload.get("model"))
            if model:
                self._model = model
                self.info.model = model
            data = {k: payload.get(k) for k in ("model", "effort", "turn_id", "cwd") if payload.get(k) is not None}
            yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", TURN_CONTEXT, data=data))
        elif line_type == COMPACTED:
            yield from self._compacted(number, timestamp, payload)
        else:
            yield from self._event(number, raw, timestamp, payload)

    def _message(
        self,
        number: int,
        timestamp: str | None,
        role: Role,
        kind: Kind,
        raw_type: str,
        blocks: list[Block] | None = None,
        data: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Message:
        return Message(
            line=number,
            role=role,
            kind=kind,
            agent=self.agent,
            blocks=blocks or [],
            timestamp=timestamp,
            raw_type=raw_type,
            data=data or {},
            **extra,
        )

    def _unknown(self, number: int, timestamp: str | None, raw: bytes, raw_type: str) -> Iterator[Record]:
        unknown = self._message(number, timestamp, "meta", "unknown", raw_type=raw_type)
        unknown.raw = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        yield from self._emit(unknown)

    def _meta_message(self, number: int, timestamp: str | None, meta: dict[str, Any]) -> Iterator[Record]:
        """The session's base instructions reach the model as the Responses API ``instructions``."""
        instructions = meta.get("base_instructions", meta.get("instructions"))
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        data = {k: v for k, v in meta.items() if k not in ("base_instructions", "instructions")}
        if isinstance(instructions, str) and instructions:
            blocks = [Block("text", text=instructions)]
            yield from self._emit(self._message(number, timestamp, "system", "system", SESSION_META, blocks, data))
        else:
            yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", SESSION_META, data=data))

    # ----------------------------------------------------------------- a fork's inherited prefix

    def _inherited_record(self, number: int, timestamp: str | None, raw_type: str) -> Message:
        return self._message(number, timestamp, "meta", "bookkeeping", raw_type, data={"inherited": True})

    def _inherited(self, number: int, raw: bytes, obj: dict[str, Any]) -> Iterator[Record]:
        """Lines after the parent's copied meta: the parent's token rows grow its cumulative total; the fork's
        own first call restarts it (a new thread's token info starts empty, protocol.rs ``new_or_append``)."""
        assert self._inheriting is not None
        payload = obj.get("payload")
        info = payload.get("info") if isinstance(payload, dict) and payload.get("type") == "token_count" else None
        total = _int(_object(_object(info).get("total_token_usage")).get("total_tokens")) if info else None
        if total is None:
            self._inheriting.append((number, raw, obj))
            return
        if self._inherited_total is not None and total < self._inherited_total:
            yield from self._end_inheritance()
            yield from self._line(number, raw, obj)
            return
        # Everything up to a replayed token row of the parent is the parent's history.
        self._inherited_total = total
        held, self._inheriting = self._inheriting, []
        for held_number, _, held_obj in [*held, (number, raw, obj)]:
            yield from self._emit(
                self._inherited_record(held_number, _str_or_none(held_obj.get("timestamp")), "inherited")
            )
        self._last_total = total

    def _end_inheritance(self) -> Iterator[Record]:
        """The lines held since the parent's last replayed token row are the fork's own."""
        held, self._inheriting = self._inheriting or [], None
        for item in held:
            yield from self._line(*item)

    # ----------------------------------------------------------------- response items

    def _response_item(self, number: int, timestamp: str | None, item: dict[str, Any]) -> Iterator[Record]:
        item_type = str(item.get("type") or "")
        raw_type = f"{RESPONSE_ITEM}/{item_type}"
        if item_type not in RESPONSE_ITEM_TYPES:
            # An item type newer than this reader (ResponseItem::Other): kept verbatim, never counted.
            yield from self._unknown(number, timestamp, orjson.dumps(item), raw_type)
            return
        if item_type in MODEL_OUTPUT_TYPES or (item_type == "message" and item.get("role") == "assistant"):
            message = self._model_output(number, timestamp, item_type, raw_type, item)
            message.data.update(item_size(item))
            if self._open_call is not None:
                key, usage = self._open_call
                message.call_key, message.usage = key, usage
                self._give_reasoning(message)
                yield from self._emit(message)
            else:
                self._held.append(message)
                self._held_outputs.append(message)
            return
        yield from self._close_response()
        if item_type == "message":
            message = self._input_message(number, timestamp, raw_type, item)
            message.data.update(item_size(item))
            yield message
        elif item_type in TOOL_OUTPUT_TYPES:
            call_id = _str_or_none(item.get("call_id"))
            block = Block(
                "tool_result",
                text=output_text(item.get("output")),
                tool_id=call_id,
                tool_name=self._tool_names.get(call_id or "") or _str_or_none(item.get("name")),
            )
            yield self._message(number, timestamp, "user", "tool_result", raw_type, [block], item_size(item))
        elif item_type in COMPACTION_ITEM_TYPES:
            data: dict[str, Any] = {"opaque": True}
            blocks = [encrypted_block(str(item.get("encrypted_content") or ""), data)]
            yield self._message(number, timestamp, "user", "compact_summary", raw_type, blocks, data)
        else:  # ghost_snapshot: an undo point, never sent to the model
            yield self._message(number, timestamp, "meta", "bookkeeping", raw_type, data={"item": item})

    def _model_output(
        self, number: int, timestamp: str | None, item_type: str, raw_type: str, item: dict[str, Any]
    ) -> Message:
        blocks: list[Block] = []
        data: dict[str, Any] = {}
        if item_type == "message":
            blocks, _ = content_text(item.get("content"))
            if item.get("phase"):
                data["phase"] = item.get("phase")
        elif item_type == "reasoning":
            for part in item.get("summary") or []:
                if isinstance(part, dict) and part.get("text"):
                    blocks.append(Block("thinking", text=str(part["text"])))
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("text"):
                    blocks.append(Block("thinking", text=str(part["text"])))
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str) and encrypted:
                blocks.append(encrypted_block(encrypted, data))
        else:
            call_id = _str_or_none(item.get("call_id")) or _str_or_none(item.get("id"))
            name, tool_input, text = self._tool_call(item_type, item)
            if call_id is not None:
                self._tool_names[call_id] = name
            blocks.append(Block("tool_use", text=text, tool_id=call_id, tool_name=name, tool_input=tool_input))
        return self._message(number, timestamp, "assistant", "assistant", raw_type, blocks, data, model=self._model)

    @staticmethod
    def _tool_call(item_type: str, item: dict[str, Any]) -> tuple[str, Any, str]:
        """(tool name, parsed input, input text as sent) of a call item."""
        if item_type == "function_call":
            arguments = str(item.get("arguments") or "")
            namespace = _str_or_none(item.get("namespace"))
            name = str(item.get("name") or "function")
            return (f"{namespace}.{name}" if namespace else name), _json_or_text(arguments), arguments
        if item_type == "custom_tool_call":
            text = str(item.get("input") or "")
            return str(item.get("name") or "custom_tool"), text, text
        action = item.get("action")
        if item_type == "local_shell_call":
            name = "local_shell"
        elif item_type == "web_search_call":
            name = "web_search"
        elif item_type == "tool_search_call":
            name = "tool_search"
            action = item.get("arguments", action)
        else:
            name = item_type.removesuffix("_call")
        return name, action, orjson.dumps(action).decode() if action is not None else ""

    def _input_message(self, number: int, timestamp: str | None, raw_type: str, item: dict[str, Any]) -> Message:
        role = item.get("role")
        blocks, images = content_text(item.get("content"))
        text = "\n".join(b.text for b in blocks if b.text)
        data: dict[str, Any] = {"images": images} if images else {}
        if role in ("developer", "system"):
            data["role"] = role
            return self._message(number, timestamp, "system", "injected", raw_type, blocks, data)
        if is_summary_text(text):
            return self._message(number, timestamp, "user", "compact_summary", raw_type, blocks, data)
        kind: Kind = "injected" if is_contextual_user_text(text) else "prompt"
        if kind == "prompt" and self.agent == MAIN:
            note_prompt_title(self.info, text)
        return self._message(number, timestamp, "user", kind, raw_type, blocks, data)

    # ----------------------------------------------------------------- compactions

    def _compacted(self, number: int, timestamp: str | None, payload: dict[str, Any]) -> Iterator[Record]:
        yield from self._close_response()
        summary = str(payload.get("message") or "")
        replacement = payload.get("replacement_history")
        kept = replacement if isinstance(replacement, list) else None
        # Remote compaction (compact_remote.rs) stores an empty message and keeps the server's output, whose
        # summary is an encrypted `compaction` item; a local one keeps only messages (compact.rs L250-283).
        opaque = [i for i in kept or [] if isinstance(i, dict) and i.get("type") in COMPACTION_ITEM_TYPES]
        remote = bool(opaque)
        data: dict[str, Any] = {
            "mode": "remote" if remote else "local",
            "trigger": "remote" if remote else "local",  # as the session's event says it
            "replacement_items": len(kept) if kept is not None else None,
        }
        blocks = [Block("text", text=summary)] if summary else []
        for item in opaque:
            blocks.append(encrypted_block(str(item.get("encrypted_content") or ""), data))
        if kept is not None:
            data["replacement_history"] = kept
        self._compaction_since_call = True
        self.info.data.setdefault("compactions", []).append(
            {
                "line": number,
                "after_call": self._calls,
                "mode": data["mode"],
                "before_input": self._last_input,
                "prefix_input": self._first_input,
                "after_input": None,
                "retained_messages": [self._retained_size(i) for i in kept or [] if self._is_retained(i)],
            }
        )
        yield self._message(number, timestamp, "user", "compact_summary", COMPACTED_RECORD, blocks, data)
        last = self._last_input
        yield ContextEvent(
            kind="compaction",
            line=number,
            agent=self.agent,
            timestamp=timestamp,
            trigger=data["mode"],
            message=summary[:_EXCERPT_CHARS]
            if summary
            else f"remote compaction: {len(kept or [])} items kept, the summary is encrypted",
            data={**{k: v for k, v in data.items() if k != "replacement_history"}, "last_input_tokens": last},
        )

    # ----------------------------------------------------------------- events

    def _event(self, number: int, raw: bytes, timestamp: str | None, payload: dict[str, Any]) -> Iterator[Record]:
        event_type = str(payload.get("type") or "")
        raw_type = f"{EVENT_MSG}/{event_type}"
        if event_type == "token_count":
            yield from self._token_count(number, timestamp, payload)
            return
        if event_type == "task_started":
            window = _int(payload.get("model_context_window"))
            if window:
                self.info.context_window = window
        if event_type == "context_compacted":
            if self._compaction_since_call:
                # The `compacted` line before it already drew this compaction: a mirror, not a second one.
                mirror = f"{raw_type}/mirror"
                yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", mirror))
                return
            self._compaction_since_call = True
            yield from self._close_response()
            yield self._message(number, timestamp, "system", "system", raw_type)
            yield ContextEvent(kind="compaction", line=number, agent=self.agent, timestamp=timestamp)
            return
        data: dict[str, Any] = {}
        if event_type not in MIRROR_EVENTS:
            data = {k: v for k, v in payload.items() if k != "type"}
        if event_type == "thread_rolled_back":
            self.info.data["rollbacks"] = self.info.data.get("rollbacks", 0) + 1
        yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", raw_type, data=data))

    def _token_count(self, number: int, timestamp: str | None, payload: dict[str, Any]) -> Iterator[Record]:
        info = payload.get("info")
        if not isinstance(info, dict):
            yield from self._emit(self._message(number, timestamp, "meta", "bookkeeping", TOKEN_COUNT_RECORD))
            return
        self.info.data["token_counts"] = True
        total = _object(info.get("total_token_usage"))
        last = _object(info.get("last_token_usage"))
        window = _int(info.get("model_context_window"))
        if window:
            self.info.context_window = window
        total_tokens = _int(total.get("total_tokens"))
        input_tokens = _int(last.get("input_tokens"))
        changed = total_tokens != self._last_total
        self._last_total = total_tokens
        data = {"total_tokens": total_tokens, "last_total_tokens": _int(last.get("total_tokens"))}
        if input_tokens <= 0:
            # recompute_token_usage after a compaction: a bytes/4 estimate, not a call (doc §4 pitfall 2).
            self.info.data["estimate_rows"] += 1
            data["estimate"] = True
            yield from self._emit(
                self._message(number, timestamp, "meta", "bookkeeping", TOKEN_COUNT_RECORD, data=data)
            )
            return
        if not changed:
            yield from self._emit(
                self._message(number, timestamp, "meta", "bookkeeping", TOKEN_COUNT_RECORD, data=data)
            )
            return
        cached = min(_int(last.get("cached_input_tokens")), input_tokens)
        usage = Usage(
            input_tokens=input_tokens - cached,
            cache_read_input_tokens=cached,
            output_tokens=_int(last.get("output_tokens")),
        )
        data["reasoning_output_tokens"] = _int(last.get("reasoning_output_tokens"))
        if window:
            # The window of this call's model (a model switch changes it): the strategy's model-downshift check.
            data["context_window"] = window
        key = f"tc:{number}"
        self._calls += 1
        self._compaction_since_call = False
        self._last_input = input_tokens
        record = self._message(
            number,
            timestamp,
            "assistant",
            "assistant",
            TOKEN_COUNT_RECORD,
            data=data,
            model=self._model,
            call_key=key,
            usage=usage,
        )
        self._note_call(input_tokens)
        self._reasoning_to_give = data["reasoning_output_tokens"]
        if self._held_outputs:
            # 0.92 on: the response came first; its items are this call's.
            for message in self._held_outputs:
                message.call_key, message.usage = key, usage
                self._give_reasoning(message)
            yield from self._release()
            yield record
            self._open_call = None
        else:
            # 0.34-0.57: the token count comes first; the items that follow are its response.
            yield from self._emit(record)
            self._open_call = (key, usage)

    @staticmethod
    def _is_retained(item: Any) -> bool:
        """A message the compaction kept from the conversation (not re-injected context, not the summary item)."""
        if not isinstance(item, dict) or item.get("type") != "message":
            return False
        if item.get("role") == "assistant":
            return True
        blocks, _ = content_text(item.get("content"))
        text = "\n".join(b.text for b in blocks if b.text)
        return item.get("role") == "user" and not is_contextual_user_text(text) and not is_summary_text(text)

    @staticmethod
    def _retained_size(item: dict[str, Any]) -> dict[str, int]:
        """What Codex's estimate needs of a kept message: its text bytes, its images and its serialized size."""
        blocks, images = content_text(item.get("content"))
        return {"text_bytes": sum(len(b.text.encode()) for b in blocks), "images": images, **item_size(item)}

    def _give_reasoning(self, message: Message) -> None:
        """The call's recorded reasoning tokens go to its first reasoning item: what its encrypted content holds."""
        if message.raw_type == f"{RESPONSE_ITEM}/reasoning" and self._reasoning_to_give is not None:
            message.data["call_reasoning_tokens"] = self._reasoning_to_give
            self._reasoning_to_give = None

    def _note_call(self, input_tokens: int) -> None:
        """Remember the first call's prompt and the first call after each compaction: the drop it caused."""
        compactions = self.info.data.setdefault("compactions", [])
        if self._first_input is None:
            self._first_input = input_tokens
        if compactions and compactions[-1].get("after_input") is None:
            compactions[-1]["after_input"] = input_tokens

    # ----------------------------------------------------------------- session info

    def _note_time(self, timestamp: str | None) -> None:
        if readable_time(timestamp) is None:  # an unreadable time is no start or end of the session
            return
        if self.info.started_at is None:
            self.info.started_at = timestamp
        self.info.ended_at = timestamp

    def _note_meta(self, meta: dict[str, Any]) -> None:
        info = self.info
        info.session_id = _str_or_none(meta.get("id")) or info.session_id
        info.cwd = _str_or_none(meta.get("cwd")) or info.cwd
        info.agent_version = _str_or_none(meta.get("cli_version")) or info.agent_version
        info.started_at = readable_time(_str_or_none(meta.get("timestamp"))) or info.started_at
        for key in ("originator", "model_provider", "forked_from_id", "agent_nickname", "agent_role"):
            if meta.get(key) is not None:
                info.data[key] = meta[key]
        source = meta.get("source")
        if source is not None:
            info.data["source"] = source
            spawn = source.get("subagent", {}) if isinstance(source, dict) else {}
            thread = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
            if isinstance(thread, dict) and isinstance(thread.get("parent_thread_id"), str):
                info.data["parent_thread_id"] = thread["parent_thread_id"]
        git = meta.get("git")
        if isinstance(git, dict):
            info.data["git"] = git


def make_parser(*, agent: str, path: Path) -> CodexParser:
    return CodexParser(agent=agent)


def parent_link(head: list[bytes], path: Path) -> ParentLink | None:
    """A subagent or forked rollout joins its parent's session once the parent is imported; until then it is a
    session of its own (its inherited prefix is bookkeeping either way)."""
    identity = parent_identity(head)
    if identity is None:
        return None
    own, parent = identity
    return ParentLink(agent=own, parent_id=parent, alone_without_parent=True)


def vote(obj: dict[str, Any]) -> bool:
    """A Codex rollout line, for format detection: an envelope (0.34 on), or a line of the older flat layout
    (codex.md §2)."""
    record_type = obj.get("type")
    if record_type is not None and not isinstance(record_type, str):
        return False  # any JSON value can stand here; only a string names a record (an object is unhashable)
    if record_type in ENVELOPE_TYPES and isinstance(obj.get("payload"), dict) and "seq" not in obj:
        return True
    if "payload" in obj or "sessionId" in obj or "data" in obj:
        return False
    if isinstance(obj.get("record_type"), str) and len(obj) <= 2:
        return True
    if record_type is None and isinstance(obj.get("id"), str) and "timestamp" in obj:
        return "instructions" in obj or "git" in obj
    return record_type in RESPONSE_ITEM_TYPES and ("role" in obj or "call_id" in obj or "summary" in obj)
