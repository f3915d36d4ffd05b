"""The rules an agent works under at a point, and whether a summary keeps each one (issue 38).

A rule is an instruction in force: a project instruction file (AGENTS.md, CLAUDE.md), a skill the agent loaded, a
reminder it injected, or a constraint sentence the user typed ("don't touch the migrations", "use pnpm"). Which
records carry the first three is each agent's knowledge, declared in its format module (``PROFILE.instructions``,
an ``InstructionSources``) and read here through the registry; the user's constraints are read off their prompts.

Against a summary each rule is marked **kept** (a summary line says it: a file or skill by its name, a constraint by
most of its words, with the same polarity), **changed** (a line says part of it, or says the opposite), or **lost**;
a rule the agent itself puts back after a compaction (``InstructionSources.reinjected``) is marked ``restored``
beside its status, so losing it from the summary costs nothing. No model is asked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.after_compaction import DEFAULT_CALLS, AfterCompaction, RuleBreak, RuleHook, after_compaction
from compaction.agents import InstructionSources, RuleKind, ToolRoles
from compaction.coverage import (
    ITEM_TEXT_CHARS,
    is_request,
    keywords,
    patch_paths,
    path_match,
    stem,
    tool_command,
    tool_path,
    typed_text,
)
from compaction.formats.registry import agent_profile
from compaction.preview import call_before
from compaction.replay import AfterCall, after_calls
from compaction.transcript import ContextEvent, Message, SessionInfo

RuleStatus = Literal["kept", "changed", "lost"]
RULE_KINDS: tuple[RuleKind, ...] = ("instruction_file", "skill", "reminder", "constraint")
KIND_LABELS: dict[str, str] = {
    "instruction_file": "instruction file",
    "skill": "skill",
    "reminder": "reminder",
    "constraint": "user constraint",
}

# A sentence the user typed is a constraint when it tells the agent how to work: these phrasings do it.
_CONSTRAINT = re.compile(
    r"\b(don't|dont|do not|never|always|must|mustn't|must not|should ?n[o']t|should|only|avoid|make sure|"
    r"stick to|keep|no need to|stop|instead of|rather than|use \S+ (?:instead|not|for)|"
    r"please use|use only)\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(
    r"^(why|what|how|where|when|who|which|is|are|was|were|does|do|did|can|could|would|will|have|has)\b", re.I
)
_NEGATION = re.compile(r"\b(don't|dont|do not|never|not|no|avoid|without|mustn't|shouldn't|stop|instead of)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+|\s+\(|\)\s*")
# A summary line names a constraint when this share of its significant words is on the line: kept at FULL, a part
# of it (changed) at PARTIAL, with at least MIN_PARTIAL_WORDS words in common.
FULL_SHARE = 0.6
PARTIAL_SHARE = 0.4
MIN_PARTIAL_WORDS = 2
# A constraint needs this many significant words to be checked ("stop" alone says nothing to look for).
MIN_CONSTRAINT_WORDS = 2
# Longer prompts are pasted material (logs, files), not instructions: their sentences are not read as constraints.
MAX_PROMPT_CHARS = 4000


@dataclass(slots=True)
class Rule:
    """One instruction in force, with the record it comes from."""

    kind: RuleKind
    text: str  # what the page shows: the sentence, the file, the skill, the reminder's first words
    key: str  # what is looked for in a summary: the path, the skill name, the sentence
    position: int  # its record in the conversation view
    line: int  # the record's source line
    after_call: int  # it came after this main-chain call, before the next (0: before the first)
    reinjected: bool = False  # the agent puts it back after a compaction itself

    @property
    def label(self) -> str:
        return KIND_LABELS[self.kind]

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "text": self.text,
            "key": self.key,
            "position": self.position,
            "line": self.line,
            "after_call": self.after_call,
            "reinjected_by_agent": self.reinjected,
        }


@dataclass(slots=True)
class RuleMark:
    """A rule against one summary."""

    rule: Rule
    status: RuleStatus
    summary_line: int | None = None  # 1-based line of the summary that keeps (or changes) it
    summary_text: str = ""
    match: str = ""  # "file name", "words 4/5", "opposite polarity", "words 1/5"

    @property
    def restored(self) -> bool:
        """Lost or changed here, but the agent itself puts the rule back after a compaction."""
        return self.status != "kept" and self.rule.reinjected

    @property
    def counts_as_lost(self) -> bool:
        """A loss a reviewer must confirm: lost from the summary and not put back by the agent."""
        return self.status == "lost" and not self.rule.reinjected


@dataclass(slots=True)
class RuleCheck:
    """The rules in force over a summarised range, each marked against the summary."""

    marks: list[RuleMark] = field(default_factory=list)
    unrecorded: str = ""  # what the agent follows but never writes down (its ``InstructionSources.unrecorded``)

    def counts(self) -> dict[str, int]:
        result = {status: 0 for status in ("kept", "changed", "lost")}
        for m in self.marks:
            result[m.status] += 1
        return result

    @property
    def lost(self) -> list[RuleMark]:
        """Rules the summary loses that the agent does not put back: what accepting it asks to confirm."""
        return [m for m in self.marks if m.counts_as_lost]

    @property
    def line(self) -> str:
        """One line for a page: "rules 5/7 kept, 1 changed, 1 lost"."""
        if not self.marks:
            return "no rules in force"
        c = self.counts()
        return f"rules {c['kept']}/{len(self.marks)} kept, {c['changed']} changed, {c['lost']} lost"

    def as_json(self) -> dict[str, Any]:
        return {
            "counts": self.counts(),
            "line": self.line,
            "unrecorded": self.unrecorded or None,
            "rules": [
                m.rule.as_json()
                | {
                    "status": m.status,
                    "restored_by_agent": m.restored,
                    "summary_line": m.summary_line,
                    "summary_text": m.summary_text or None,
                    "match": m.match,
                }
                for m in self.marks
            ],
        }


# ----------------------------------------------------------------------------- extraction


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ITEM_TEXT_CHARS else flat[: ITEM_TEXT_CHARS - 1] + "…"


def _dig(data: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _names(value: Any) -> list[str]:
    """The file paths or skill names an item value holds (a string, a list of them, a list of {path})."""
    if isinstance(value, str) and value.strip():
        return [value.strip()]
    if isinstance(value, list):
        return [n for v in value for n in _names(v.get("path") if isinstance(v, dict) else v)]
    return []


def _last_part(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def _agent_rules(message: Message, sources: InstructionSources) -> list[tuple[RuleKind, str, str]]:
    """(kind, text, key) of each instruction an injected record carries, as its agent declares them."""
    found: list[tuple[RuleKind, str, str]] = []
    text = message.text
    for pattern in sources.file_patterns:
        hit = re.search(pattern, text, re.MULTILINE)
        if hit:
            folder = hit.groupdict().get("path") or ""
            path = f"{folder.rstrip('/')}/AGENTS.md" if folder and not folder.endswith(".md") else folder
            found.append(("instruction_file", path or "AGENTS.md", path or "AGENTS.md"))
            return found  # the record is the file: its body is not a reminder besides
    for pattern in sources.skill_patterns:
        hit = re.search(pattern, text, re.MULTILINE)
        if hit:
            name = _last_part(hit.group("name"))
            found.append(("skill", f"skill {name}", name))
            return found
    items = _dig(message.data, sources.item_list_path) if sources.item_list_path else None
    kinds = dict(sources.item_kinds)
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("type") not in kinds:
            continue
        kind = kinds[item["type"]]
        for key in sources.item_name_keys:
            for name in _names(item.get(key)):
                found.append((kind, name if kind == "instruction_file" else f"skill {name}", name))
    if found:
        return found
    for tag in sources.reminder_tags:
        for body in re.findall(rf"<{re.escape(tag)}>\s*([\s\S]*?)\s*(?:</{re.escape(tag)}>|$)", text):
            first = _short(body.split("\n", 1)[0])
            if first:
                found.append(("reminder", first, first))
    return found


def constraint_sentences(text: str) -> list[str]:
    """The sentences of a prompt that tell the agent how to work (each stripped, in order)."""
    if len(text) > MAX_PROMPT_CHARS:
        return []
    found: list[str] = []
    for sentence in _SENTENCE.split(text):
        sentence = sentence.strip(" \t-*>\"'")
        if sentence.endswith("?") and _QUESTION.match(sentence):
            continue  # a question asks; it does not bind ("…, we should bail out, or?" does)
        if _CONSTRAINT.search(sentence) and len(keywords(sentence)) >= MIN_CONSTRAINT_WORDS:
            found.append(_short(sentence))
    return found


def rules_in_force(
    messages: Sequence[Message],
    end: int,
    *,
    sources: InstructionSources,
    start: int = 0,
    points: Sequence[AfterCall] | None = None,
) -> list[Rule]:
    """Every rule whose record lies in ``messages[start:end]``, in record order, each once (the first record that
    brings it). ``sources``: the session's agent's ``PROFILE.instructions``; ``points``: ``replay.after_calls``."""
    marks = list(points) if points is not None else after_calls(messages)
    rules: list[Rule] = []
    seen: set[tuple[str, str]] = set()

    def add(kind: RuleKind, text: str, key: str, position: int) -> None:
        identity = (kind, key.lower().rstrip(".!;: "))
        if identity in seen:
            return
        seen.add(identity)
        message = messages[position]
        rules.append(
            Rule(
                kind=kind,
                text=text,
                key=key,
                position=position,
                line=message.line,
                after_call=call_before(marks, position) or 0,
                reinjected=kind in sources.reinjected,
            )
        )

    for position in range(max(start, 0), min(end, len(messages))):
        message = messages[position]
        if is_request(message):
            for sentence in constraint_sentences(typed_text(message)):
                add("constraint", sentence, sentence, position)
        elif message.raw_type in sources.user_record_types:
            for sentence in constraint_sentences(message.text):
                add("constraint", sentence, sentence, position)
        elif message.kind in ("injected", "system"):
            for kind, text, key in _agent_rules(message, sources):
                add(kind, text, key, position)
    return rules


def rules_at_call(messages: Sequence[Message], call: int, *, sources: InstructionSources) -> list[Rule]:
    """The rules in force at the point "after call ``call``" (``replay.after_calls``, where a preview stands): every
    rule brought before that point's position. A rule that came after the call but after a context record that
    closes the point (a prune) is in force from the next call."""
    points = after_calls(messages)
    end = next((p.position for p in points if p.call == call), len(messages))
    return rules_in_force(messages, end, sources=sources, points=points)


# ----------------------------------------------------------------------------- marking


def summary_lines(summary: str) -> list[str]:
    return summary.split("\n")


def _words(text: str) -> set[str]:
    return {stem(w) for w in keywords(text)}


def _negative(text: str) -> bool:
    return bool(_NEGATION.search(text))


def mark_rule(rule: Rule, lines: Sequence[str]) -> RuleMark:
    """Where ``lines`` (a summary's) keep ``rule``, change it, or lose it."""
    if rule.kind in ("instruction_file", "skill"):
        for number, line in enumerate(lines, start=1):
            how = path_match(line, rule.key) if "/" in rule.key else ("name" if rule.key in line else "")
            if how:
                return RuleMark(rule, "kept", number, _short(line), how)
        return RuleMark(rule, "lost", match="not named")
    wanted = _words(rule.key)
    if not wanted:
        return RuleMark(rule, "lost", match="no words to match")
    best, best_line = 0, 0
    for number, line in enumerate(lines, start=1):
        present = len(wanted & _words(line))
        if present > best:
            best, best_line = present, number
    share = f"words {best}/{len(wanted)}"
    if best_line and best >= max(1, math.ceil(FULL_SHARE * len(wanted))):
        line = lines[best_line - 1]
        if _negative(line) != _negative(rule.key):
            return RuleMark(rule, "changed", best_line, _short(line), f"{share}, opposite polarity")
        return RuleMark(rule, "kept", best_line, _short(line), share)
    if best_line and best >= MIN_PARTIAL_WORDS and best >= math.ceil(PARTIAL_SHARE * len(wanted)):
        return RuleMark(rule, "changed", best_line, _short(lines[best_line - 1]), f"{share}, in part")
    return RuleMark(rule, "lost", match=share)


def check_rules(rules: Iterable[Rule], summary: str, *, sources: InstructionSources | None = None) -> RuleCheck:
    """Each rule marked against ``summary``."""
    lines = summary_lines(summary)
    return RuleCheck(marks=[mark_rule(rule, lines) for rule in rules], unrecorded=sources.unrecorded if sources else "")


def rule_check(
    messages: Sequence[Message], *, start: int, end: int, summary: str, sources: InstructionSources
) -> RuleCheck:
    """The rules brought in ``messages[start:end]`` (what the summary replaces), marked against ``summary``."""
    return check_rules(rules_in_force(messages, end, sources=sources, start=start), summary, sources=sources)


# ----------------------------------------------------------------------------- rules broken after a compaction
#
# Of the rules in force before a compaction, the user's constraint sentences of two forms are held against what the
# agent did in the calls after it (docs/compaction/after.md, "Rules broken"); instruction files, skills and
# reminders are not read for what they forbid.
#
# * **a path not to change**: a negative sentence ("don't", "never", "do not", "avoid", ...) with a verb of change
#   (``_CHANGE_VERBS``) and what follows it: each path-like word (with a "/" or a file extension), else the first
#   significant word after the verb ("the migrations" -> "migrations"). Broken by a call of an ``edit``-role tool on
#   a path, or a ``patch``-role call writing one, where the target is a trailing part of the path ("migrations/",
#   "settings.py", "app/models.py") or, for a bare word, one of its folders or its file name without extension.
# * **a command not to run**: "use Y" (or "stick to", "only use", ...) where Y is one of a family of interchangeable
#   tools (``TOOL_FAMILIES``: npm/pnpm/yarn/bun, pip/uv/poetry/pipenv): broken by a ``shell``-role command whose
#   segment (split on ``&&``, ``||``, ``;``, ``|``, new lines) starts with another member of Y's family; and a
#   negative sentence with "run"/"use"/"call" followed by a command word X ("don't run npm", "never use git push"):
#   broken by a segment that starts with X's words (not when X is named for a purpose or in a list: "never use
#   Python, Bash, or any script to read .pen files" forbids a use, not the command).

_CHANGE_VERBS = r"touch|edit|modify|change|write|rewrite|delete|remove|rename|update|alter|overwrite"
_DONT = r"\b(?:don't|dont|do not|never|avoid|stop|mustn't|must not|shouldn't|should not)\s+(?:ever\s+|\w+ly\s+)?"
_PATH_RULE = re.compile(rf"{_DONT}(?:{_CHANGE_VERBS})\w*\s+(?P<rest>.+)", re.IGNORECASE)
_RUN_RULE = re.compile(
    rf"{_DONT}(?:run|use|call|invoke|execute)\w*\s+(?:the\s+|any\s+)?[`'\"]?(?P<what>[\w./:-]+(?:\s+[\w-]+)?)", re.I
)
# Where a constraint's clause ends: what comes after says something else ("don't touch the tests, fix app.py").
_CLAUSE_END = re.compile(r"[,;:]|\s(?:but|instead|just|unless|except|and then|so|because)\s", re.IGNORECASE)
# A command named for a purpose ("never use Python, Bash, or any script to read .pen files") forbids only that use.
_PURPOSE = re.compile(r"[^.;!]*?(?:,|\bto\b)", re.IGNORECASE)
# Words that end a command's name in a sentence ("don't run pytest with -x": pytest).
_NOT_COMMAND = {"with", "on", "in", "for", "unless", "until", "yet", "again", "before", "after", "without", "here"}
_USE_RULE = re.compile(r"\b(?:use|using|stick to|switch to)\s+(?:only\s+)?(?P<tool>[\w.-]+)", re.IGNORECASE)
_PATH_WORD = re.compile(r"[\w.-]*(?:/[\w.-]*)+|[\w-]+\.[A-Za-z][\w]{0,7}\b")
_ARTICLES = {"the", "any", "a", "an", "our", "my", "your", "this", "that", "these", "those", "anything", "in", "of"}
# Tools that do one job each way (our choice, not an agent's): "use one" forbids the others. npx runs npm's packages.
TOOL_FAMILIES: tuple[frozenset[str], ...] = (
    frozenset({"npm", "npx", "pnpm", "yarn", "bun"}),
    frozenset({"pip", "pip3", "uv", "poetry", "pipenv"}),
)
_SEGMENT = re.compile(r"&&|\|\||[;|\n]")
_ENV_ASSIGN = re.compile(r"^\w+=\S*$")
_SHELLS = {"bash", "sh", "zsh"}


@dataclass(frozen=True, slots=True)
class Check:
    """What one constraint forbids: editing paths matching ``paths``, or commands starting with ``commands``."""

    rule: Rule
    paths: tuple[str, ...] = ()
    commands: tuple[tuple[str, ...], ...] = ()  # each the words a command segment must start with


def _targets(rest: str) -> tuple[str, ...]:
    rest = _CLAUSE_END.split(rest, maxsplit=1)[0]
    found = [p.strip(",;:'\"`").rstrip(".") for p in _PATH_WORD.findall(rest)]
    found = [p for p in found if p and p not in (".", "/")]
    if found:
        return tuple(dict.fromkeys(found))
    words = [w.strip(".,;:'\"`()").lower() for w in rest.split()]
    first = next((w for w in words if w and w not in _ARTICLES), "")
    return (first,) if len(first) > 2 and first in keywords(first) else ()


def rule_checks(rules: Iterable[Rule]) -> list[Check]:
    """The user's constraints that say a path not to change or a command not to run, each with what it forbids."""
    checks: list[Check] = []
    for rule in rules:
        if rule.kind != "constraint":
            continue
        text = rule.key
        paths: tuple[str, ...] = ()
        commands: list[tuple[str, ...]] = []
        if hit := _PATH_RULE.search(text):
            paths = _targets(hit.group("rest"))
        run = _RUN_RULE.search(text)
        if run and not _PURPOSE.match(text[run.end() :]):  # "never use Python to read .pen files": not Python at all
            said = (w.strip(".,;:!?`'\"") for w in run.group("what").lower().split())
            words = tuple(w for w in said if w and w not in _NOT_COMMAND)
            family = next((f for f in TOOL_FAMILIES if words and words[0] in f), None)
            if words:
                commands.append(words[:1] if family else words)
        for use in _USE_RULE.finditer(text):
            if re.search(rf"{_DONT}{re.escape(use.group(0))}", text, re.IGNORECASE):
                continue  # "don't use npm": a command not to run
            tool = use.group("tool").lower().rstrip(".-")
            family = next((f for f in TOOL_FAMILIES if tool in f), None)
            if family:
                commands += [(other,) for other in sorted(family - {tool})]
                break
        if paths or commands:
            checks.append(Check(rule=rule, paths=paths, commands=tuple(dict.fromkeys(commands))))
    return checks


def path_breaks(path: str, target: str) -> bool:
    """Whether changing ``path`` changes what ``target`` (a constraint's path or word) names."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    if not parts:
        return False
    if "/" in target or "." in target:
        wanted = [p for p in target.replace("\\", "/").split("/") if p]
        if not wanted:
            return False
        if target.endswith("/"):  # a folder: the path lies under it
            return any(parts[i : i + len(wanted)] == wanted for i in range(len(parts) - len(wanted)))
        return parts[-len(wanted) :] == wanted
    folders, name = parts[:-1], parts[-1]
    return target in (p.lower() for p in folders) or name.lower().rsplit(".", 1)[0] == target.lower()


def command_segments(command: str) -> list[list[str]]:
    """Each simple command of a command line as its words, leading ``VAR=value`` and ``sudo`` dropped."""
    segments: list[list[str]] = []
    for part in _SEGMENT.split(command):
        words = part.replace("(", " ").replace(")", " ").split()
        while words and (_ENV_ASSIGN.match(words[0]) or words[0] in ("sudo", "{", "}")):
            words = words[1:]
        if len(words) > 2 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-c", "-lc"):
            words = [w.strip("'\"") for w in words[2:]]  # an argv run through a shell: the command it runs
        if words:
            segments.append([w.lower() for w in words])
    return segments


def rule_hook(*, sources: InstructionSources, tools: ToolRoles) -> RuleHook:
    """The ``after_compaction`` hook for a session of the agent with these ``sources`` and ``tools``: the checkable
    rules in force before the compaction, each broken once at most (its first break in the window)."""

    every: dict[int, list[Check]] = {}  # id(messages) -> the checks of every rule the session brings, read once

    def broken(messages: Sequence[Message], position: int, end: int, call_of: Callable[[int], int]) -> list[RuleBreak]:
        if id(messages) not in every:
            every.clear()
            every[id(messages)] = rule_checks(rules_in_force(messages, len(messages), sources=sources))
        # Each rule is kept at its first record: those before the compaction are the rules in force there.
        checks = [c for c in every[id(messages)] if c.rule.position < position]
        breaks: dict[int, RuleBreak] = {}
        for at in range(position, min(end, len(messages))):
            message = messages[at]
            for block in message.blocks:
                if block.kind != "tool_use" or len(breaks) == len(checks):
                    continue
                name = block.tool_name
                edited = [p for p in [tool_path(block, tools=tools)] if p] if name in tools.edit else []
                edited += patch_paths(block, tools=tools)
                command = tool_command(block, tools=tools) if name in tools.shell else None
                segments = command_segments(command) if command else []
                for index, check in enumerate(checks):
                    if index in breaks:
                        continue
                    what = next((f"{name} {p}" for p in edited for t in check.paths if path_breaks(p, t)), "")
                    if not what and segments:
                        hit = any(s[: len(c)] == list(c) for s in segments for c in check.commands)
                        what = f"$ {_short(command or '')}" if hit else ""
                    if what:
                        breaks[index] = RuleBreak(rule=check.rule.text, what=what, call=call_of(at), line=message.line)
        return [breaks[i] for i in sorted(breaks)]

    return broken


def measure_after(
    messages: Sequence[Message], events: Sequence[ContextEvent], *, info: SessionInfo, calls: int = DEFAULT_CALLS
) -> AfterCompaction:
    """``after_compaction`` with the rules broken checked by ``rule_hook`` for the session's agent: what every path
    (the diagnosis, its JSON twin, the command, the archive) measures."""
    profile = agent_profile(info.format)
    hook = rule_hook(sources=profile.instructions, tools=profile.tools)
    return after_compaction(messages, events, info=info, calls=calls, rules=hook)
