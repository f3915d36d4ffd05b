"""What an offline summary says: facts read off the summarised records, for a strategy to lay out in its agent's format.

Without an API key a run still produces a summary a reviewer can judge against the agent's own: each strategy
writes its agent's shape (Claude Code's nine sections, Codex's handoff), and this module supplies the content.
It is the same checklist the review page checks summaries against (``compaction.coverage.checklist``: the
user's requests, the files tool calls read and wrote, the commands, the errors tool results reported, the
decisions the assistant stated, the tasks its todo list left open), plus the last steps before the cut.
Nothing comes from a summarizer prompt. Text a reviewer cannot use is left out: numbered lines of a file view
(``29→``), ``/dev/`` paths (``2>/dev/null``, ``/dev/tty``) and tags the agent wraps around its own injections.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.coverage import checklist, patch_paths, tool_command, tool_path
from compaction.transcript import Block, Message

# Lines a page prints per list; the rest are counted ("… and 4 more").
MAX_ITEMS = 15
MAX_USER_MESSAGES = 30
LAST_STEPS = 6
LINE_CHARS = 200
# How much of a long text ``clean`` reads for a line of ``limit`` characters (a heredoc of a whole file, a long
# reply): enough that dropped tags and numbered lines still leave a full line.
SCAN_FACTOR = 20

# A line of a numbered file view: Claude Code's Read ("    29→text"), `cat -n` / `nl` ("  29\ttext").
_NUMBERED_LINE = re.compile(r"^\s*\d+(?:→|\t)")
# A redirection to or from a device ("2>/dev/null", "< /dev/tty", "&>/dev/null") and any other /dev/ path.
# Only a path that starts at /dev/: /home/dev/app.py is a file like any other.
_DEV_REDIRECT = re.compile(r"\s*(?:\d|&)?(?:>>?|<)&?\s*/dev/\S+")
_DEV_PATH = re.compile(r"(?<![\w.~/-])/dev/\S*")
# A whole text the agent wrapped in one of its tags (<system-reminder>, <environment_context>, ...).
_TAGGED = re.compile(r"<([A-Za-z][\w-]*)[^>]*>[\s\S]*?</\1>")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def clean(text: str, *, limit: int = LINE_CHARS) -> str:
    """One reviewable line: agent tags, numbered file-view lines and /dev/ paths dropped, whitespace folded,
    clipped to ``limit`` characters. Only the start of a long text is read: the line keeps ``limit`` of it."""
    text = text[: SCAN_FACTOR * limit]
    if "</" in text:  # the tag pattern is slow on text full of unclosed "<": only where one closes
        text = _TAGGED.sub(" ", text)
    kept = [line for line in text.splitlines() if not _NUMBERED_LINE.match(line)]
    flat = " ".join(" ".join(kept).split())
    if "/dev/" in flat:
        flat = " ".join(_DEV_PATH.sub("", _DEV_REDIRECT.sub("", flat)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def first_sentence(text: str) -> str:
    cleaned = clean(text, limit=5 * LINE_CHARS)
    return clean(_SENTENCE_END.split(cleaned, maxsplit=1)[0])


@dataclass(slots=True)
class Facts:
    """What the summarised range holds, in the order the records show it."""

    requests: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (path, "read" | "written")
    commands: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    open_tasks: list[str] = field(default_factory=list)
    last_steps: list[str] = field(default_factory=list)
    tools: Counter[str] = field(default_factory=Counter)

    @property
    def extensions(self) -> list[str]:
        """File types the work touched, most touched first (".py", ".ts")."""
        counted = Counter("." + path.rsplit(".", 1)[1] for path, _ in self.files if "." in path.rsplit("/", 1)[-1])
        return [ext for ext, _ in counted.most_common(8)]


def _unique(items: list[str]) -> list[str]:
    return [item for item in dict.fromkeys(items) if item]


# What a tool without a path or command is about (WebSearch query, Glob pattern, WebFetch url).
_SUBJECT_KEYS = ("query", "pattern", "url", "description", "prompt")


def _subject(block: Block) -> str:
    values = block.tool_input if isinstance(block.tool_input, dict) else {}
    return next((v for k in _SUBJECT_KEYS if isinstance(v := values.get(k), str) and v.strip()), "")


def read_facts(messages: Sequence[Message], start: int, end: int) -> Facts:
    """The facts of ``messages[start:end]`` (an earlier todo list still open at the cut included)."""
    facts = Facts()
    written: set[str] = set()
    for item in checklist(messages, start, end):
        if item.kind == "request":
            facts.requests.append(clean(item.text))
        elif item.kind in ("file_read", "file_written"):
            path = item.key or item.text
            if path.startswith("/dev/"):
                continue
            verb = "written" if item.kind == "file_written" else "read"
            if verb == "written":
                written.add(path)
            facts.files.append((path, verb))
        elif item.kind == "command":
            # Codex wraps each command in a shell: "bash -lc <script>" says no more than the script.
            command = clean(re.sub(r"^(?:ba|z)?sh -lc ", "", item.key or item.text))
            facts.commands.append(f"{command} (failed)" if item.detail == "failed" and command else command)
        elif item.kind == "error":
            facts.errors.append(clean(item.text))
        elif item.kind == "decision":
            facts.decisions.append(clean(item.text).lstrip("-*• "))
        elif item.kind == "open_task":
            facts.open_tasks.append(f"{clean(item.text)} ({item.detail})" if item.detail else clean(item.text))
    # A file both read and written is listed once, as written.
    facts.files = [(p, v) for p, v in dict.fromkeys(facts.files) if v == "written" or p not in written]
    for name in ("requests", "commands", "errors", "decisions", "open_tasks"):
        setattr(facts, name, _unique(getattr(facts, name)))
    summarised = messages[max(start, 0) : min(end, len(messages))]
    facts.tools = Counter(b.tool_name or "tool" for m in summarised for b in m.blocks if b.kind == "tool_use")
    steps: list[str] = []  # newest first, read back from the end until there are enough
    for message in reversed(summarised):
        for block in reversed(message.blocks):
            if len(steps) >= LAST_STEPS:
                break
            if block.kind == "tool_use":
                name = block.tool_name or "tool"
                target = tool_path(block) or tool_command(block) or ", ".join(patch_paths(block)) or _subject(block)
                steps.append(clean(f"{name} {target}" if target else name))
            elif block.kind == "text" and message.role == "assistant" and not message.synthetic and block.text:
                steps.append(first_sentence(block.text))
            steps = [s for s in steps if s]
    facts.last_steps = steps[::-1]
    return facts


def bullets(items: Sequence[str], *, indent: str = "", limit: int = MAX_ITEMS, keep: str = "last") -> str:
    """A markdown list of at most ``limit`` items (the first or the last ones) with a count of the rest."""
    if not items:
        return f"{indent}- (none found)"
    shown = list(items[-limit:] if keep == "last" else items[:limit])
    lines = [f"{indent}- {item}" for item in shown]
    if len(items) > limit:
        note = f"{indent}- … and {len(items) - limit} {'earlier' if keep == 'last' else 'more'}"
        lines = [note, *lines] if keep == "last" else [*lines, note]
    return "\n".join(lines)
