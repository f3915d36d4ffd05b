"""What a summary lost: a checklist drawn from the summarised range, each item marked found or not found.

No model is asked. The checklist is read off the records themselves: the user's requests and corrections, the
files tool calls read and wrote (with their paths), the commands run and which of them failed, the errors tool
results reported, decisions the assistant stated, and the tasks its last todo list still had open at the cut.
Paths, commands and error names are looked for exactly (an identifier is in the summary or it is not); requests
and decisions are prose a summary rewords, so they match when most of their significant words are there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.agents import ToolRoles
from compaction.formats.context_records import is_compaction_record
from compaction.formats.registry import all_tool_roles
from compaction.transcript import Block, Message

ItemKind = Literal["request", "file_read", "file_written", "command", "error", "decision", "open_task"]
ITEM_KINDS: tuple[ItemKind, ...] = (
    "request",
    "file_read",
    "file_written",
    "command",
    "error",
    "decision",
    "open_task",
)
KIND_LABELS: dict[str, str] = {
    "request": "request",
    "file_read": "file read",
    "file_written": "file written",
    "command": "command",
    "error": "error",
    "decision": "decision",
    "open_task": "open task",
}
# How the figures are grouped on a page: "files 12/14" counts reads and writes together.
GROUPS: dict[str, tuple[ItemKind, ...]] = {
    "requests": ("request",),
    "files": ("file_read", "file_written"),
    "commands": ("command",),
    "errors": ("error",),
    "decisions": ("decision",),
    "open tasks": ("open_task",),
}

# Which tool reads, writes, searches, runs a command or keeps the task list, and the input keys that hold a path
# or a command, are each agent's (its format module's ``PROFILE.tools``); without one, every agent's together.
DONE_STATUSES = frozenset({"completed", "done", "cancelled"})

# A decision is a sentence in which the assistant commits to a course: these are the phrasings that do it.
_DECISION = re.compile(
    r"\b(I'll|I will|I'm going to|I am going to|let's|let me go with|we should|we'll|decided|decide to|"
    r"instead of|rather than|the (?:fix|plan|approach) is|going with)\b",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
ERROR_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception)|E[A-Z]{3,}|exit code \d+)\b")
_STOPWORDS = frozenset(
    re.split(
        r"\s+",
        """a about above after again all also am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    him his how i if in into is it its itself just let me more most my no nor not now of off on once only or other
    our out over own same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why will with would you
    your please want need make sure also then okay ok yes like just can't don't i'm i'll it's that's""",
    )
)
# Requests and decisions match when this share of their significant words is in the summary.
FUZZY_SHARE = 0.6
# Text longer than this is cut for the page (the full record is one link away).
ITEM_TEXT_CHARS = 200
# Sentences shorter than this say too little to check ("Done.", "Let me look.").
MIN_DECISION_WORDS = 4


@dataclass(slots=True)
class CoverageItem:
    kind: ItemKind
    text: str  # what the page shows: the path, the command, the request
    position: int  # index of its record in the conversation view
    line: int  # the record's source line
    found: bool = False
    match: str = ""  # how it was found: "exact", "file name", "words 4/5"; or why not: "words 1/5"
    key: str = ""  # what was looked for (a path, a command, an error name), when not ``text`` itself
    detail: str = ""  # e.g. "failed" for a command whose result was an error

    @property
    def label(self) -> str:
        return KIND_LABELS[self.kind]


@dataclass(slots=True)
class Coverage:
    """The checklist of one summary against the range it summarised."""

    start: int  # the summarised range, as conversation positions
    end: int
    items: list[CoverageItem] = field(default_factory=list)

    def figures(self) -> dict[str, tuple[int, int]]:
        """Found and total per group ("files": (12, 14)), only for groups with items."""
        result: dict[str, tuple[int, int]] = {}
        for name, kinds in GROUPS.items():
            group = [i for i in self.items if i.kind in kinds]
            if group:
                result[name] = (sum(i.found for i in group), len(group))
        return result

    @property
    def line(self) -> str:
        """One line for a list: "files 12/14, errors 2/3, open tasks 1/2"."""
        return ", ".join(f"{name} {found}/{total}" for name, (found, total) in self.figures().items())

    @property
    def missing(self) -> list[CoverageItem]:
        return [i for i in self.items if not i.found]

    def as_json(self) -> dict[str, Any]:
        return {
            "range": {"from": self.start, "to": self.end},
            "figures": {name: {"found": f, "total": t} for name, (f, t) in self.figures().items()},
            "line": self.line,
            "items": [
                {
                    "kind": i.kind,
                    "text": i.text,
                    "key": i.key or i.text,
                    "position": i.position,
                    "line": i.line,
                    "found": i.found,
                    "match": i.match,
                    "detail": i.detail or None,
                }
                for i in self.items
            ],
        }


# ----------------------------------------------------------------------------- the checklist


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ITEM_TEXT_CHARS else flat[: ITEM_TEXT_CHARS - 1] + "…"


def _input(block: Block) -> dict[str, Any]:
    return block.tool_input if isinstance(block.tool_input, dict) else {}


def tool_path(block: Block, *, tools: ToolRoles | None = None) -> str | None:
    """The file a tool call names, if any."""
    values = _input(block)
    for key in (tools or all_tool_roles()).path_keys:
        value = values.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


# A patch envelope names each file it touches on a header line (the apply_patch grammar the patch tools take:
# "*** Add File: p", "*** Update File: p", "*** Delete File: p", "*** Move to: p").
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$", re.MULTILINE)


def patch_paths(block: Block, *, tools: ToolRoles | None = None) -> list[str]:
    """The files a patch tool's call writes, from its patch text (the input itself, or one of its patch keys)."""
    roles = tools or all_tool_roles()
    if block.tool_name not in roles.patch:
        return []
    value = block.tool_input
    if isinstance(value, dict):
        value = next((value[key] for key in roles.patch_keys if value.get(key)), None)
    text = value if isinstance(value, str) else block.text
    return list(dict.fromkeys(_PATCH_FILE.findall(text)))


def tool_command(block: Block, *, tools: ToolRoles | None = None) -> str | None:
    values = _input(block)
    for key in (tools or all_tool_roles()).command_keys:
        value = values.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def typed_text(message: Message) -> str:
    return "\n".join(b.text for b in message.blocks if b.kind == "text" and b.text).strip()


def is_request(message: Message) -> bool:
    """Text the human typed (slash-command expansions, shell-mode lines and interruption markers are the agent's)."""
    if message.kind != "prompt" or message.role != "user":
        return False
    text = typed_text(message)
    return bool(text) and not text.startswith(("<command-", "<local-command", "<bash-", "[Request interrupted"))


def checklist(
    messages: Sequence[Message], start: int, end: int, *, tools: ToolRoles | None = None
) -> list[CoverageItem]:
    """Every item a summary of ``messages[start:end]`` should keep, in the order the records show them.

    ``tools`` are the session's agent's tool roles (its profile); without them every agent's together.
    """
    roles = tools or all_tool_roles()
    items: list[CoverageItem] = []
    seen: set[tuple[str, str]] = set()
    commands: dict[str, CoverageItem] = {}  # tool id -> its command item, to mark the ones that failed
    calls: dict[str, Block] = {}

    def add(item: CoverageItem) -> CoverageItem | None:
        identity = (item.kind, item.key or item.text)
        if identity in seen:
            return None
        seen.add(identity)
        items.append(item)
        return item

    for position in range(max(start, 0), min(end, len(messages))):
        message = messages[position]
        if is_request(message):
            add(CoverageItem("request", _short(typed_text(message)), position, message.line))
        for block in message.blocks:
            if block.kind == "tool_use":
                if block.tool_id:
                    calls[block.tool_id] = block
                # Search tools take a folder to search as their path: what they matched is in their result.
                path = tool_path(block, tools=roles) if block.tool_name not in roles.search else None
                if path is not None:
                    # A tool that changes a file writes it; any other tool with a path reads it.
                    kind: ItemKind = "file_written" if block.tool_name in roles.edit else "file_read"
                    add(CoverageItem(kind, path, position, message.line, key=path))
                for written in patch_paths(block, tools=roles) if path is None else []:
                    add(CoverageItem("file_written", written, position, message.line, key=written))
                command = tool_command(block, tools=roles)
                if command is not None:
                    added = add(CoverageItem("command", _short(command), position, message.line, key=command))
                    if added is not None and block.tool_id:
                        commands[block.tool_id] = added
            elif block.kind == "tool_result" and block.is_error:
                failed = commands.get(block.tool_id or "")
                if failed is not None:
                    failed.detail = "failed"
                _add_error(add, block, calls.get(block.tool_id or ""), position, message.line, tools=roles)
            elif block.kind == "text" and message.role == "assistant" and not message.synthetic:
                for sentence in SENTENCE.split(block.text):
                    sentence = sentence.strip()
                    if _DECISION.search(sentence) and len(keywords(sentence)) >= MIN_DECISION_WORDS:
                        add(CoverageItem("decision", _short(sentence), position, message.line))
    todos = last_todo_list(messages, end, tools=roles)
    if todos is not None:
        position, entries = todos
        for entry in entries:
            content = entry.get("content") or entry.get("activeForm")
            if isinstance(content, str) and content.strip() and entry.get("status") not in DONE_STATUSES:
                status = entry.get("status")
                add(
                    CoverageItem(
                        "open_task",
                        _short(content),
                        position,
                        messages[position].line,
                        detail=status if isinstance(status, str) else "",
                    )
                )
    return items


def last_todo_list(
    messages: Sequence[Message], end: int, *, tools: ToolRoles | None = None
) -> tuple[int, list[dict[str, Any]]] | None:
    """The agent's task list as it stood at the cut: its last todo call before ``end``, wherever it was made
    (a list written before an earlier compaction is still the agent's list until it writes another)."""
    for position in range(min(end, len(messages)) - 1, -1, -1):
        for block in reversed(messages[position].blocks):
            if block.kind == "tool_use" and block.tool_name in (tools or all_tool_roles()).todo:
                todos = _input(block).get("todos")
                if isinstance(todos, list):
                    return position, [t for t in todos if isinstance(t, dict)]
    return None


def _add_error(
    add: Callable[[CoverageItem], CoverageItem | None],
    block: Block,
    call: Block | None,
    position: int,
    line: int,
    *,
    tools: ToolRoles,
) -> None:
    """An error result: looked for by its error name when it has one, else by the words of its first line."""
    first = next((row.strip() for row in block.text.splitlines() if row.strip()), "")
    name = ERROR_NAME.search(block.text)
    target = (tool_path(call, tools=tools) or tool_command(call, tools=tools)) if call is not None else None
    label = f"{block.tool_name or 'tool'}{f' {target}' if target else ''}: {first}" if first else "tool error"
    add(CoverageItem("error", _short(label), position, line, key=name.group(1) if name else _short(first)))


# ----------------------------------------------------------------------------- matching


def keywords(text: str) -> set[str]:
    return {w for w in (m.group(0).lower().strip("./-") for m in _WORD.finditer(text)) if len(w) > 2} - _STOPWORDS


def stem(word: str) -> str:
    """Enough stemming for "tests"/"testing"/"tested" to meet: the first six letters."""
    return word[:6]


def contains_token(haystack: str, needle: str) -> bool:
    """``needle`` in ``haystack`` bounded by characters that cannot continue a path or identifier."""
    if not needle:
        return False
    pattern = r"(?<![A-Za-z0-9_/.-])" + re.escape(needle) + r"(?![A-Za-z0-9_-])"
    return re.search(pattern, haystack) is not None


def path_match(summary: str, path: str) -> str:
    """ "exact" for the path or a trailing part of it, "file name" for its last part alone, "" when absent."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if not parts:
        return ""
    if path in summary:
        return "exact"
    for size in range(len(parts) - 1, 1, -1):
        if contains_token(summary, "/".join(parts[-size:])):
            return "exact"
    return "file name" if contains_token(summary, parts[-1]) else ""


def _fuzzy(summary_words: set[str], text: str) -> tuple[bool, str]:
    wanted = {stem(w) for w in keywords(text)}
    if not wanted:
        return False, "no words to match"
    present = len(wanted & summary_words)
    return present >= max(1, math.ceil(FUZZY_SHARE * len(wanted))), f"words {present}/{len(wanted)}"


def mark(items: Iterable[CoverageItem], summary: str) -> None:
    """Mark each item found or not found in ``summary`` (in place)."""
    words = {stem(w) for w in keywords(summary)}
    lowered = summary.lower()
    for item in items:
        key = item.key or item.text
        if item.kind in ("file_read", "file_written"):
            item.match = path_match(summary, key)
            item.found = bool(item.match)
        elif item.kind == "command":
            if key.lower() in lowered:
                item.found, item.match = True, "exact"
            else:
                # A summary names a command by its program and first argument ("ran pytest -q"), not verbatim.
                head = " ".join(key.split()[:2])
                item.found = bool(head) and head.lower() in lowered
                item.match = "program and first argument" if item.found else ""
        elif item.kind == "error" and ERROR_NAME.fullmatch(key):
            item.found = contains_token(summary, key)
            item.match = "exact" if item.found else ""
        else:
            item.found, item.match = _fuzzy(words, key)


def coverage(
    messages: Sequence[Message], *, start: int, end: int, summary: str, tools: ToolRoles | None = None
) -> Coverage:
    """The checklist of ``messages[start:end]``, each item marked against ``summary`` (``tools``: ``checklist``)."""
    items = checklist(messages, start, end, tools=tools)
    mark(items, summary)
    return Coverage(start=start, end=end, items=items)


# ----------------------------------------------------------------------------- an agent's own summary


def recorded_range(messages: Sequence[Message], position: int) -> tuple[int, int]:
    """The range an agent's own recorded summary at ``position`` summarised, as conversation positions.

    klaude-code: from the previous compaction's first kept index (0 for the first) up to this entry's
    first_kept_index (formats/klaude-code.md §3.5). KHAELOR: the events of its cut, fromSeq to toSeq
    (formats/khaelor.md). Claude Code: everything since the previous compaction record up to the boundary that
    precedes this summary (a full compaction summarises the whole conversation it had).
    """
    record = messages[position]
    first_kept = record.data.get("first_kept_index")
    if isinstance(first_kept, int):
        base = 0
        for earlier in range(position - 1, -1, -1):
            previous = messages[earlier].data.get("first_kept_index")
            if messages[earlier].kind == "compact_summary" and isinstance(previous, int):
                base = previous
                break
        return base, min(first_kept, position)
    payload = record.data.get("payload")
    cut = payload.get("cut") if isinstance(payload, dict) else None
    if isinstance(cut, dict) and isinstance(cut.get("fromSeq"), int) and isinstance(cut.get("toSeq"), int):
        inside = [
            i
            for i in range(position)
            if isinstance(seq := messages[i].data.get("seq"), int) and cut["fromSeq"] <= seq <= cut["toSeq"]
        ]
        return (inside[0], inside[-1] + 1) if inside else (position, position)
    end = position
    for earlier in range(position - 1, -1, -1):
        if is_compaction_record(messages[earlier]) and messages[earlier].kind != "compact_summary":
            end = earlier  # the boundary that opens this summary: the summarised conversation ends before it
            break
    start = 0
    for earlier in range(end - 1, -1, -1):
        if messages[earlier].kind == "compact_summary":
            start = earlier + 1
            break
    return start, end
