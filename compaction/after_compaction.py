"""What the agent did after each real compaction: files read again, errors repeated, questions asked again.

For every compaction the session recorded (its parser's ``compaction`` events, "after call K" by the one call
numbering), the records of the next ``calls`` main-chain calls (K+1 .. K+calls: the tool calls their responses made
and the results that answered them) are held against everything the session recorded before the compaction:

* **files read again**: a call of a tool of the ``read`` role (the agent's profile) on a path that a read-role call
  had read before the compaction (a read that came back as an error counts on neither side). Reads the agent itself
  re-attaches after a compaction (Claude Code's file attachments) are no call of the model and are not counted.
* **errors repeated**: a ``shell``-role command that failed before the compaction failing again (the same command
  line), or a call of another tool failing again with the same error line (the tool's name and its error's first
  non-empty line, digits and whitespace folded).
* **questions asked again**: a question to the user (a call of an ``ask``-role tool, each of its ``question``
  texts; or the last sentence of a reply that ends the agent's turn with a question mark) close to one asked before
  (the same words once folded, or a ``difflib`` ratio of at least ``SAME_QUESTION``).
* **rules broken**: given by a hook (``RuleHook``) that reads the rules in force (``compaction.rules.rule_hook``,
  which ``compaction.rules.measure_after`` passes); without one they are not checked and ``rules_broken`` is None,
  never 0.

Each measure counts distinct subjects (paths, error lines, questions); each row gives how many times it recurred.
Our choices, not an agent's: ``DEFAULT_CALLS``, ``SAME_QUESTION``, the error-line folding (docs/compaction/after.md).
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.agents import ToolRoles
from compaction.chain import Chain, session_chain
from compaction.coverage import tool_command, tool_path
from compaction.transcript import Block, ContextEvent, Message, SessionInfo

DEFAULT_CALLS = 20  # the calls after a compaction looked at: about a turn or two of tool work (our choice)
SAME_QUESTION = 0.8  # difflib ratio from which two folded questions are the same question (our choice)
ERROR_LINE_CHARS = 160  # an error line is compared on its first characters (paths and ids make tails differ)

RepeatKind = Literal["read", "error", "question"]


@dataclass(frozen=True, slots=True)
class Repeat:
    """One subject seen before a compaction and again in the calls after it."""

    kind: RepeatKind
    subject: str  # the path, the error line, the question
    call: int  # the first call after the compaction that made it again
    line: int  # its record's source line
    times: int  # how many times it recurred in the window
    before_call: int  # the call that made it first, before the compaction
    before_line: int
    # Each recurrence's result: (its position in the laid-out chain, its tokens as the chain estimates them); reads
    # only (the tokens at stake of the Usage findings' "files read again after compactions").
    results: tuple[tuple[int, int], ...] = ()

    @property
    def tokens(self) -> int:
        return sum(tokens for _, tokens in self.results)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "call": self.call,
            "line": self.line,
            "times": self.times,
            "before_call": self.before_call,
            "before_line": self.before_line,
            **({"tokens": self.tokens} if self.kind == "read" else {}),
        }


@dataclass(frozen=True, slots=True)
class RuleBreak:
    """A rule in force that a call after the compaction broke (from a ``RuleHook``)."""

    rule: str
    what: str  # what the call did: "edited migrations/0003.py"
    call: int
    line: int

    def as_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "what": self.what, "call": self.call, "line": self.line}


# (messages, the compaction's position, the end of the window, the call of a position) -> the rules broken in
# messages[position:end] (``compaction.rules.rule_hook``).
RuleHook = Callable[[Sequence[Message], int, int, Callable[[int], int]], Sequence[RuleBreak]]


@dataclass(slots=True)
class Aftermath:
    """What followed one compaction."""

    after_call: int
    line: int
    trigger: str | None
    calls: int  # calls in the window: ``DEFAULT_CALLS`` or fewer when the session ends before
    reads_again: list[Repeat] = field(default_factory=list)
    errors_again: list[Repeat] = field(default_factory=list)
    questions_again: list[Repeat] = field(default_factory=list)
    rules_broken: list[RuleBreak] | None = None  # None: not checked

    def counts(self) -> dict[str, int | None]:
        return {
            "files_read_again": len(self.reads_again),
            "errors_repeated": len(self.errors_again),
            "questions_asked_again": len(self.questions_again),
            "rules_broken": None if self.rules_broken is None else len(self.rules_broken),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "after_call": self.after_call,
            "line": self.line,
            "trigger": self.trigger,
            "calls": self.calls,
            **self.counts(),
            "reads_again": [r.as_json() for r in self.reads_again],
            "errors_again": [r.as_json() for r in self.errors_again],
            "questions_again": [r.as_json() for r in self.questions_again],
            "rules": None if self.rules_broken is None else [r.as_json() for r in self.rules_broken],
        }


@dataclass(slots=True)
class AfterCompaction:
    """Every real compaction of a session's main chain and what the next ``calls`` calls did."""

    calls: int
    compactions: list[Aftermath]
    rules_checked: bool

    def totals(self) -> dict[str, int | None]:
        """The session's sums: one row of the archive's list (``sessions_app.selectors.after_compaction``)."""
        rows = [a.counts() for a in self.compactions]
        names = ("files_read_again", "errors_repeated", "questions_asked_again", "rules_broken")
        totals: dict[str, int | None] = {"compactions": len(rows)}
        for name in names:
            values = [row[name] for row in rows]
            totals[name] = None if any(v is None for v in values) else sum(v or 0 for v in values)
        return totals

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "rules_checked": self.rules_checked,
            "totals": self.totals(),
            "compactions": [a.as_json() for a in self.compactions],
        }


@dataclass(frozen=True, slots=True)
class _Seen:
    key: str
    subject: str
    call: int
    line: int
    position: int
    result: tuple[int, int] = (0, 0)  # a read's result: (position, tokens)


def fold_error(text: str) -> str:
    """An error's first non-empty line, lower case, digits as ``#`` and whitespace as one space, cut short."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = re.sub(r"\d+", "#", line.lower())
    return re.sub(r"\s+", " ", line)[:ERROR_LINE_CHARS]


def fold_question(text: str) -> str:
    return re.sub(r"[^\w]+", " ", text.lower()).strip()


def _questions_in(value: Any) -> list[str]:
    """Every ``question`` text in an ask tool's input, in order."""
    if isinstance(value, dict):
        found = [value["question"]] if isinstance(value.get("question"), str) else []
        for key, inner in value.items():
            if key != "question":
                found += _questions_in(inner)
        return found
    if isinstance(value, list):
        return [q for inner in value for q in _questions_in(inner)]
    return []


def _last_question(text: str) -> str | None:
    """The closing sentence of a reply when it is a question."""
    stripped = text.rstrip()
    if not stripped.endswith("?"):
        return None
    last = stripped.splitlines()[-1]
    sentences = re.split(r"(?<=[.!?:])\s+", last.strip())
    return sentences[-1].strip(" *_>-") or None


def _reply_text(message: Message) -> str:
    return "\n".join(b.text for b in message.blocks if b.kind == "text" and b.text).strip()


@dataclass(slots=True)
class _Found:
    reads: list[_Seen] = field(default_factory=list)
    errors: list[_Seen] = field(default_factory=list)
    questions: list[_Seen] = field(default_factory=list)


def _scan(
    messages: Sequence[Message],
    *,
    tools: ToolRoles,
    call_of: Callable[[int], int],
    size: Callable[[Message, Block], int],
) -> _Found:
    """Reads, errors, failed commands and questions of ``messages``, each at the call that made it."""
    found = _Found()
    uses: dict[str, tuple[int, Any]] = {}  # tool id -> (position, block)
    last_reply: int | None = None  # the last reply with text since the last prompt

    def close_turn() -> None:
        if last_reply is None:
            return
        question = _last_question(_reply_text(messages[last_reply]))
        if question:
            message = messages[last_reply]
            found.questions.append(
                _Seen(fold_question(question), question, call_of(last_reply), message.line, last_reply)
            )

    for position, message in enumerate(messages):
        if message.kind == "prompt" and message.role == "user":
            close_turn()
            last_reply = None
        for block in message.blocks:
            if block.kind == "tool_use" and block.tool_id:
                uses[block.tool_id] = (position, block)
                if block.tool_name in tools.ask:
                    for question in _questions_in(block.tool_input):
                        found.questions.append(
                            _Seen(fold_question(question), question, call_of(position), message.line, position)
                        )
            elif block.kind == "tool_result" and block.tool_id in uses:
                at, use = uses[block.tool_id]
                line = messages[at].line
                if block.is_error and use.tool_name in tools.shell:
                    command = tool_command(use, tools=tools)
                    if command:
                        found.errors.append(_Seen(f"$ {command}", command, call_of(at), line, at))
                elif block.is_error:
                    error = fold_error(block.text)
                    if error:
                        name = use.tool_name or "tool"
                        found.errors.append(_Seen(f"{name}: {error}", f"{name}: {error}", call_of(at), line, at))
                elif use.tool_name in tools.read:
                    path = tool_path(use, tools=tools)
                    if path:
                        result = (position, size(message, block))
                        found.reads.append(_Seen(path, path, call_of(at), line, at, result))
        if message.kind == "assistant" and _reply_text(message):
            last_reply = position
    close_turn()
    return found


def _close(a: str, b: str) -> bool:
    return difflib.SequenceMatcher(None, a, b).ratio() >= SAME_QUESTION


def _again(kind: RepeatKind, before: Sequence[_Seen], after: Sequence[_Seen], *, close: bool = False) -> list[Repeat]:
    """The subjects of ``after`` seen in ``before`` (``close``: or near enough, for questions), first seen first."""
    first_before: dict[str, _Seen] = {}
    for seen in before:
        first_before.setdefault(seen.key, seen)
    rows: dict[str, tuple[_Seen, _Seen, int]] = {}  # key before -> (first again, before, times)
    results: dict[str, list[tuple[int, int]]] = {}
    for seen in after:
        match = first_before.get(seen.key)
        if match is None and close:
            match = next((b for b in first_before.values() if _close(b.key, seen.key)), None)
        if match is None:
            continue
        results.setdefault(match.key, []).append(seen.result)
        if match.key in rows:
            first, _, times = rows[match.key]
            rows[match.key] = (first, match, times + 1)
        else:
            rows[match.key] = (seen, match, 1)
    return [
        Repeat(
            kind,
            first.subject,
            first.call,
            first.line,
            times,
            match.call,
            match.line,
            tuple(results[match.key]) if kind == "read" else (),
        )
        for first, match, times in sorted(rows.values(), key=lambda row: row[0].position)
    ]


def after_compaction(
    messages: Sequence[Message],
    events: Sequence[ContextEvent],
    *,
    info: SessionInfo,
    calls: int = DEFAULT_CALLS,
    rules: RuleHook | None = None,
) -> AfterCompaction:
    """Each recorded compaction of the main chain and what its next ``calls`` calls did again."""
    chain = session_chain(messages, events, info=info)
    return measure_chain(chain, tools=chain.tools, calls=calls, rules=rules)


def measure_chain(
    chain: Chain, *, tools: ToolRoles, calls: int = DEFAULT_CALLS, rules: RuleHook | None = None
) -> AfterCompaction:
    """``after_compaction`` over a chain already laid out (the diagnosis's, for its findings)."""
    if calls < 1:
        raise ValueError("calls must be at least 1")
    firsts = [first for first, _ in chain.numbered]
    numbers = [number for _, number in chain.numbered]

    def call_of(position: int) -> int:
        """The call whose response or results hold ``position`` (0: before the first call)."""
        index = bisect.bisect_right(firsts, position)
        return numbers[index - 1] if index else 0

    found = _scan(chain.messages, tools=tools, call_of=call_of, size=chain.block_tokens)
    rows: list[Aftermath] = []
    for position, event in chain.events_of("compaction"):
        after_call = chain.after_call(position)
        last = after_call + calls
        window_calls = sum(1 for n in numbers if after_call < n <= last)
        end_index = bisect.bisect_right(numbers, last)
        end = firsts[end_index] if end_index < len(firsts) else len(chain.messages)

        def before(seen: Sequence[_Seen], *, at: int = position) -> list[_Seen]:
            return [s for s in seen if s.position < at]

        def inside(seen: Sequence[_Seen], *, at: int = position, until: int = end) -> list[_Seen]:
            return [s for s in seen if at <= s.position < until]

        rows.append(
            Aftermath(
                after_call=after_call,
                line=event.line,
                trigger=event.trigger,
                calls=window_calls,
                reads_again=_again("read", before(found.reads), inside(found.reads)),
                errors_again=_again("error", before(found.errors), inside(found.errors)),
                questions_again=_again("question", before(found.questions), inside(found.questions), close=True),
                rules_broken=list(rules(chain.messages, position, end, call_of)) if rules is not None else None,
            )
        )
    return AfterCompaction(calls=calls, compactions=rows, rules_checked=rules is not None)
