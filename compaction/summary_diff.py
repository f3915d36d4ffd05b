"""Two summaries compared like code: word-level differences, and section by section for structured formats.

Each agent asks its summarizer for a fixed structure, which its strategy declares (``summary_structure``: the
sections in order and how they are headed, ``compaction.agents.HeadingRule``). A section the summary leaves out,
or leaves empty, is flagged.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.agents import HeadingRule
from compaction.strategies.registry import summary_structure

# What a summarizer writes for "nothing here": an empty YAML list, or the prompts' own placeholders.
EMPTY_BODIES = frozenset({"", "[]", "-", "none", "(none)", "n/a", "none.", "- (none)", "[]."})

SectionState = Literal["ok", "empty", "missing"]
Tag = Literal["equal", "delete", "insert"]


@dataclass(slots=True)
class Section:
    name: str
    state: SectionState
    body: str = ""


@dataclass(slots=True)
class SectionRow:
    """One expected section in both summaries, with the word diff of its two bodies."""

    name: str
    left: Section
    right: Section
    left_words: list[tuple[str, Tag]] = field(default_factory=list)
    right_words: list[tuple[str, Tag]] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        return self.left.state != "ok" or self.right.state != "ok"

    @property
    def same(self) -> bool:
        return self.left.body.strip() == self.right.body.strip()


@dataclass(slots=True)
class SummaryDiff:
    left_words: list[tuple[str, Tag]]
    right_words: list[tuple[str, Tag]]
    sections: list[SectionRow]  # empty when the strategy has no fixed structure
    changed_words: int  # words deleted on the left plus words inserted on the right

    def as_json(self) -> dict[str, Any]:
        return {
            "changed_words": self.changed_words,
            "left": [{"text": t, "tag": tag} for t, tag in self.left_words],
            "right": [{"text": t, "tag": tag} for t, tag in self.right_words],
            "sections": [
                {
                    "name": r.name,
                    "left": r.left.state,
                    "right": r.right.state,
                    "same": r.same,
                    "flagged": r.flagged,
                }
                for r in self.sections
            ],
        }


def _heading(name: str, rule: HeadingRule) -> re.Pattern[str]:
    title = re.escape(name)
    if rule == "yaml":
        return re.compile(rf"^{title}:[ \t]*(.*)$", re.MULTILINE)
    if rule == "markdown":
        # A heading line ("## Goal", "<summary>## Goal" as klaude writes it inside its prompt's tags) or a bold line.
        return re.compile(
            rf"^[ \t]*(?:<summary>)?[ \t]*(?:#{{1,4}}[ \t]*(?:\*\*)?|\*\*){title}[ \t]*:?(?:[ \t:]|\*\*)*$",
            re.MULTILINE | re.IGNORECASE,
        )
    # numbered: "1. Primary Request and Intent:" (markdown bold or a heading mark around it is tolerated).
    return re.compile(
        rf"^[ \t]*(?:#+[ \t]*)?(?:\d+\.[ \t]*)?(?:\*\*)?{title}(?:\*\*)?:?(?:\*\*)?[ \t]*(.*)$",
        re.MULTILINE | re.IGNORECASE,
    )


def sections(text: str, *, strategy: str) -> list[Section]:
    """The strategy's expected sections found in ``text``, each ok, empty or missing (in the expected order)."""
    structure = summary_structure(strategy)
    names = structure.sections
    found: list[tuple[int, int, str, str]] = []  # (heading start, body start, name, text on the heading line)
    for name in names:
        match = _heading(name, structure.heading).search(text)
        if match is not None:
            found.append((match.start(), match.end(), name, match.group(1) if match.groups() else ""))
    found.sort()
    bodies: dict[str, str] = {}
    for index, (_, body_start, name, inline) in enumerate(found):
        stop = found[index + 1][0] if index + 1 < len(found) else len(text)
        if structure.heading == "yaml":
            # Any top-level key ends a field, also the ones the model does not write (running_processes).
            following = _TOP_LEVEL_KEY.search(text, body_start)
            stop = min(stop, following.start()) if following else stop
        body = (inline + "\n" + text[body_start:stop]).strip()
        # What follows </summary> is not the model's (an agent may append its own tags after it).
        body = body.split("</summary>", 1)[0].strip()
        bodies[name] = body
    result = []
    for name in names:
        if name not in bodies:
            result.append(Section(name, "missing"))
        else:
            body = bodies[name]
            result.append(Section(name, "empty" if body.strip().lower() in EMPTY_BODIES else "ok", body))
    return result


_TOP_LEVEL_KEY = re.compile(r"^[a-z_]+:", re.MULTILINE)
# A word (a path or identifier stays whole: "app.py", "src/x-y.py"), a run of whitespace, or one punctuation mark,
# so "tests." and "tests" differ only by the full stop.
_TOKEN = re.compile(r"\s+|\w[\w./-]*\w|\w|[^\w\s]")


def word_diff(left: str, right: str) -> tuple[list[tuple[str, Tag]], list[tuple[str, Tag]]]:
    """Both texts as runs of words tagged equal, delete (only on the left) or insert (only on the right).

    Whitespace stays in the runs so the texts read as written; it never counts as a difference.
    """
    a, b = _TOKEN.findall(left), _TOKEN.findall(right)
    a_words = [t if t.strip() else " " for t in a]
    b_words = [t if t.strip() else " " for t in b]
    matcher = difflib.SequenceMatcher(a=a_words, b=b_words, autojunk=False)
    out_left: list[tuple[str, Tag]] = []
    out_right: list[tuple[str, Tag]] = []

    def push(out: list[tuple[str, Tag]], tokens: list[str], tag: Tag) -> None:
        text = "".join(tokens)
        if not text:
            return
        if tag != "equal" and not text.strip():
            tag = "equal"
        if out and out[-1][1] == tag:
            out[-1] = (out[-1][0] + text, tag)
        else:
            out.append((text, tag))

    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            push(out_left, a[i1:i2], "equal")
            push(out_right, b[j1:j2], "equal")
        else:
            push(out_left, a[i1:i2], "delete")
            push(out_right, b[j1:j2], "insert")
    return out_left, out_right


def _changed(runs: list[tuple[str, Tag]]) -> int:
    return sum(len(text.split()) for text, tag in runs if tag != "equal")


def compare(left: str, right: str, *, strategy: str) -> SummaryDiff:
    """Word diff of the whole texts, and of each expected section of ``strategy``'s structure."""
    left_words, right_words = word_diff(left, right)
    rows = []
    for a, b in zip(sections(left, strategy=strategy), sections(right, strategy=strategy), strict=True):
        la, rb = word_diff(a.body, b.body)
        rows.append(SectionRow(a.name, a, b, la, rb))
    return SummaryDiff(left_words, right_words, rows, _changed(left_words) + _changed(right_words))
