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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.agents import InstructionSources, RuleKind
from compaction.coverage import ITEM_TEXT_CHARS, is_request, keywords, path_match, stem, typed_text
from compaction.preview import call_before
from compaction.replay import AfterCall, after_calls
from compaction.transcript import Message

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
