"""Claim by claim: is each statement of a summary backed by the records it summarised (issue 38)?

A summary is split into claims (a line, or each sentence of a long line; headings, code and the agent's own
wrapper sentences are not claims). Each claim's anchors are what can be looked up: file paths, identifiers and
``code``, error names, numbers, quoted text. A claim is

* **supported** when most of its anchors are in the records of the summarised range (or, with no anchor, when one
  record holds most of its words), with the records that hold them;
* **contradicted** when the records say otherwise: it reports a success where the last run of that command or test
  failed, a file written that the records only read, or a count the records give as another number;
* **unsupported** when its anchors are nowhere in the range;
* **undecided** when it has no anchor and no record holds most of its words: prose only a reader (or a model) can
  judge.

Offline and deterministic: the same summary and records give the same marks. No model is asked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compaction.agents import ToolRoles
from compaction.coverage import ERROR_NAME, ITEM_TEXT_CHARS, keywords, stem, tool_command, tool_path
from compaction.formats.registry import all_tool_roles
from compaction.transcript import Message

ClaimStatus = Literal["supported", "unsupported", "contradicted", "undecided"]
CLAIM_STATUSES: tuple[ClaimStatus, ...] = ("supported", "unsupported", "contradicted", "undecided")

# Anchors: what a claim names that a record either holds or does not.
_BACKTICK = re.compile(r"`([^`\n]{2,120})`")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{8,160})[\"”]")
_PATH = re.compile(
    r"(?<![\w@])(?:[\w.-]+/)+[\w.-]+|\b[\w-]+\.(?:py|ts|tsx|js|jsx|go|rs|md|json|jsonl|ya?ml|toml|"
    r"sql|sh|txt|html|css|rb|java|kt|swift|c|h|cpp|cfg|ini|lock|env)\b"
)
_IDENTIFIER = re.compile(
    r"\b(?:[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*|[a-z0-9]+_[a-z0-9_]+)\b"
)
_NUMBER = re.compile(r"(?<![\w.,/-])((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?![\w/-])")
# "3 failed", "12 tests": a count of a thing, checked against the records' counts of the same thing.
# Only outcomes a test or build run counts (pytest, go test, jest write "3 failed, 12 passed"): a file's numbers
# beside words are line numbers and sizes, not counts.
_COUNT = re.compile(
    r"(?<![\w.,/-])(\d[\d,]*)\s+(tests?|passed|failed|failures?|errors?|warnings?|skipped)\b", re.IGNORECASE
)
# A claim of success, and the words that say a run failed.
_SUCCESS = re.compile(
    r"\b(pass(?:es|ed|ing)?|succeed(?:s|ed)?|successful(?:ly)?|green|all tests|works|working|clean|fixed|resolved)\b",
    re.IGNORECASE,
)
_WRITE = re.compile(
    r"\b(created?|add(?:ed|s)?|wrote|written|writes|edit(?:ed|s)?|modif(?:ied|ies|y)|updat(?:ed|es)|chang(?:ed|es)|"
    r"rewr(?:ote|itten)|renamed|deleted|removed)\b",
    re.IGNORECASE,
)
_FAILURE = re.compile(r"\b(fail(?:s|ed|ing)?|errors?|broke|broken|crash(?:ed|es)?)\b", re.IGNORECASE)
_NOT_WRITTEN = re.compile(r"\b(not|never|no|without|didn't|did not|unchanged|untouched)\b", re.IGNORECASE)
_FAILED_OUTPUT = re.compile(r"\b(FAILED|FAIL|failed|Traceback|error:|Error:|exit code [1-9])", re.MULTILINE)
# Lines that are structure, not statements: headings, fences, the agent's own wrapper.
_HEADING = re.compile(r"^\s*(#{1,6}\s|\*\*[^*]+\*\*:?\s*$|\d+\.\s+[A-Z][\w ]+:\s*$|[A-Za-z_ ]{2,40}:\s*$|</?\w+>\s*$)")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_YAML_KEY = re.compile(r"^\s*-?\s*([a-z_]{2,30}):\s+")
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"])")
_WRAPPER = re.compile(
    r"^(This session is being continued|Please continue the conversation|Summary:|Analysis:|"
    r"Let me chronologically|The conversation is summarized|If you need specific details)",
    re.IGNORECASE,
)
# A claim shorter than this says too little to check ("Done.").
MIN_CLAIM_WORDS = 3
# Prose with no anchor is supported when one record holds this share of its significant words.
WORDS_SHARE = 0.7
# Anchored claims are supported when this share of anchors is found.
ANCHOR_SHARE = 0.5
MAX_SUPPORT = 3
MAX_PHRASE_CHARS = (
    80  # a claim this short found as written in a record is supported (a command, a name)  # records listed per claim
)
MIN_NUMBER_CHARS = 4  # a shorter integer is in any record (line numbers, sizes): it says nothing alone


@dataclass(slots=True)
class Claim:
    """One statement of a summary, marked against the records."""

    line: int  # 1-based line of the summary
    text: str
    anchors: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)  # the anchors some record holds
    status: ClaimStatus = "undecided"
    why: str = ""  # "anchors 3/4", "words 5/6", "the last `pytest` failed (record 120)"
    support: list[int] = field(default_factory=list)  # positions of records that back it (or contradict it)


@dataclass(slots=True)
class ClaimCheck:
    """Every claim of one summary against the range it summarised."""

    start: int
    end: int
    claims: list[Claim] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        result: dict[str, int] = {status: 0 for status in CLAIM_STATUSES}
        for claim in self.claims:
            result[claim.status] += 1
        return result

    @property
    def decided(self) -> int:
        return sum(1 for c in self.claims if c.status != "undecided")

    @property
    def score(self) -> float | None:
        """The share of decided claims the records support, 0-1 (None: nothing to decide)."""
        decided = self.decided
        return self.counts()["supported"] / decided if decided else None

    @property
    def score_percent(self) -> int | None:
        """``score`` as a whole percentage: what every page, twin and command shows."""
        score = self.score
        return None if score is None else int(score * 100 + 0.5)

    @property
    def contradicted(self) -> list[Claim]:
        return [c for c in self.claims if c.status == "contradicted"]

    @property
    def line(self) -> str:
        """One line for a page: "claims 14/18 supported (78%), 1 contradicted, 3 unsupported, 2 undecided"."""
        if not self.claims:
            return "no claims to check"
        c = self.counts()
        percent = self.score_percent
        head = f"claims {c['supported']}/{self.decided} supported" + (f" ({percent}%)" if percent is not None else "")
        return f"{head}, {c['contradicted']} contradicted, {c['unsupported']} unsupported, {c['undecided']} undecided"

    def as_json(self) -> dict[str, Any]:
        return {
            "range": {"from": self.start, "to": self.end},
            "counts": self.counts(),
            "score": round(self.score, 4) if self.score is not None else None,
            "score_percent": self.score_percent,
            "line": self.line,
            "claims": [
                {
                    "line": c.line,
                    "text": c.text,
                    "status": c.status,
                    "why": c.why,
                    "anchors": c.anchors,
                    "found": c.found,
                    "support": c.support,
                }
                for c in self.claims
            ],
        }


# ----------------------------------------------------------------------------- splitting


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= ITEM_TEXT_CHARS else flat[: ITEM_TEXT_CHARS - 1] + "…"


def split_claims(summary: str) -> list[tuple[int, str]]:
    """(summary line, statement) for each claim: lines outside code fences that state something."""
    claims: list[tuple[int, str]] = []
    fenced = False
    for number, raw in enumerate(summary.split("\n"), start=1):
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or not raw.strip() or _HEADING.match(raw):
            continue
        text = _YAML_KEY.sub("", _BULLET.sub("", raw), count=1).strip()
        text = re.sub(r"^\d+\.\s+\*\*[^*]+\*\*:?\s*", "", text).strip()  # "1. **Initial Problem**: …"
        if not text or _WRAPPER.match(text) or text in ("[]", "null"):
            continue
        for sentence in _SENTENCES.split(text):
            sentence = sentence.strip()
            if len(sentence.split()) >= MIN_CLAIM_WORDS or _anchors(sentence):
                claims.append((number, sentence))
    return claims


def _anchors(text: str) -> list[str]:
    found: list[str] = []
    for pattern in (_BACKTICK, _QUOTED):
        found += [m.group(1).strip() for m in pattern.finditer(text)]
    rest = _BACKTICK.sub(" ", text)
    # "models_0.py..models_3.py" names two files
    found += [part for m in _PATH.finditer(rest) for part in m.group(0).rstrip(".").split("..") if part]
    found += [m.group(1) for m in ERROR_NAME.finditer(rest) if not m.group(1).startswith("exit code")]
    found += _IDENTIFIER.findall(rest)
    found += [n for n in _NUMBER.findall(rest) if len(n) >= MIN_NUMBER_CHARS or not n.isdigit()]
    return list(dict.fromkeys(a for a in found if a))


# ----------------------------------------------------------------------------- the records


@dataclass(slots=True)
class _Range:
    """The summarised records as text to search, with what tools did to which file and how commands ended."""

    texts: list[tuple[int, str]]  # (position, text with tool inputs)
    written: set[str]
    read: set[str]
    runs: list[tuple[int, str, bool]]  # (position of the result, command, failed)
    _words: list[tuple[int, set[str]]] | None = None

    def words(self) -> list[tuple[int, set[str]]]:
        """Each record's significant word stems, computed once for all the claims."""
        if self._words is None:
            self._words = [(p, {stem(w) for w in keywords(t)}) for p, t in self.texts]
        return self._words


def _range(messages: Sequence[Message], start: int, end: int, tools: ToolRoles) -> _Range:
    texts: list[tuple[int, str]] = []
    written: set[str] = set()
    read: set[str] = set()
    calls: dict[str, str] = {}
    runs: list[tuple[int, str, bool]] = []
    for position in range(max(start, 0), min(end, len(messages))):
        message = messages[position]
        if message.kind in ("bookkeeping", "unknown"):
            continue
        parts: list[str] = []
        for block in message.blocks:
            parts.append(block.text)
            if block.kind == "tool_use":
                path = tool_path(block, tools=tools)
                if path is not None and block.tool_name not in tools.search:
                    (written if block.tool_name in tools.edit else read).add(path)
                command = tool_command(block, tools=tools)
                if command is not None and block.tool_id:
                    calls[block.tool_id] = command
            elif block.kind == "tool_result" and block.tool_id in calls:
                failed = block.is_error or bool(_FAILED_OUTPUT.search(block.text[-2000:]))
                runs.append((position, calls[block.tool_id], failed))
        if not any(parts):
            parts = _data_strings(message.data)  # an event whose words are in its payload (a process's command)
        texts.append((position, "\n".join(p for p in parts if p)))
    return _Range(texts=texts, written=written, read=read, runs=runs)


def _data_strings(data: dict[str, Any]) -> list[str]:
    """The string values of a record's structured fields, one level down."""
    found: list[str] = []
    for value in data.values():
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(v for v in value.values() if isinstance(v, str))
    return found


def _holds(text: str, anchor: str) -> bool:
    if "/" in anchor:
        # A path is found by its trailing parts as the summary wrote it ("cli/hooks.go" in "/repo/cli/hooks.go").
        return anchor in text or anchor.lstrip("./") in text
    if anchor.isdigit() or "," in anchor:
        return re.search(rf"(?<![\d.,]){re.escape(anchor)}(?![\d,])", text) is not None
    return anchor in text


def _same_file(a: str, b: str) -> bool:
    a, b = a.lstrip("./"), b.lstrip("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


# ----------------------------------------------------------------------------- marking


def _contradiction(claim: Claim, records: _Range) -> str:
    """Why the records say otherwise, or ""."""
    text = claim.text
    for clause in re.split(r"[;,]|\band\b", text):
        if not _WRITE.search(clause) or _NOT_WRITTEN.search(clause):
            continue
        for path in [a for a in claim.anchors if ("/" in a or _PATH.fullmatch(a)) and a in clause]:
            read_only = any(_same_file(r, path) for r in records.read) and not any(
                _same_file(w, path) for w in records.written
            )
            if read_only:
                return f"{path} was only read in this range, never written"
    success, failure = bool(_SUCCESS.search(text)), bool(_FAILURE.search(text))
    if success != failure and not _NOT_WRITTEN.search(text):
        for anchor in claim.anchors:
            runs = [r for r in records.runs if anchor in r[1]]
            if runs and runs[-1][2] == success:
                how = "failed" if success else "succeeded"
                return f"the last run of `{_short(runs[-1][1])}` {how} (record {runs[-1][0]})"
    for count, noun in _COUNT.findall(text):
        if len(count) < MIN_NUMBER_CHARS and count in "012":
            continue
        pattern = re.compile(rf"(?<![\w.,])(\d[\d,]*)\s+{re.escape(noun)}\b", re.IGNORECASE)
        seen = {m.group(1) for _, t in records.texts for m in pattern.finditer(t)}
        if seen and count not in seen:
            return f"the records count {noun}: {', '.join(sorted(seen)[:3])}, never {count}"
    return ""


def mark_claim(claim: Claim, records: _Range) -> None:
    """Mark ``claim`` against the records (in place)."""
    support: list[int] = []
    for anchor in claim.anchors:
        holders = [p for p, t in records.texts if _holds(t, anchor)]
        if holders:
            claim.found.append(anchor)
            support.extend(holders[:1])
    why = _contradiction(claim, records)
    if why:
        claim.status, claim.why, claim.support = "contradicted", why, support[:MAX_SUPPORT]
        return
    if len(claim.text) <= MAX_PHRASE_CHARS and any(claim.text in t for _, t in records.texts):
        claim.status, claim.why = "supported", "as written"
        claim.support = [p for p, t in records.texts if claim.text in t][:MAX_SUPPORT]
        return
    if claim.anchors:
        wanted = max(1, math.ceil(ANCHOR_SHARE * len(claim.anchors)))
        # A file the claim names must be in the records: a path is a fact, not a word to match most of.
        missing_path = any(a not in claim.found for a in claim.anchors if "/" in a.strip("/") and " " not in a)
        claim.status = "supported" if len(claim.found) >= wanted and not missing_path else "unsupported"
        claim.why = f"anchors {len(claim.found)}/{len(claim.anchors)}"
        claim.support = list(dict.fromkeys(support))[:MAX_SUPPORT]
        return
    wanted_words = {stem(w) for w in keywords(claim.text)}
    if len(wanted_words) < MIN_CLAIM_WORDS:
        claim.status, claim.why = "undecided", "too few words to check"
        return
    best, best_position = 0, -1
    for position, words in records.words():
        present = len(wanted_words & words)
        if present > best:
            best, best_position = present, position
    claim.why = f"words {best}/{len(wanted_words)}"
    if best >= math.ceil(WORDS_SHARE * len(wanted_words)):
        claim.status, claim.support = "supported", [best_position]
    else:
        claim.status = "undecided"


def check_claims(
    messages: Sequence[Message],
    *,
    start: int,
    end: int,
    summary: str,
    tools: ToolRoles | None = None,
    seen_until: int | None = None,
) -> ClaimCheck:
    """Every claim of ``summary`` (of ``messages[start:end]``) marked against the records the summariser could know:
    everything before ``seen_until`` (default ``end``: a run sees up to its cut; an agent's own summary, up to its
    own record), so a claim restating the kept head or an earlier summary is backed by it. ``tools``: the agent's
    tool roles."""
    records = _range(messages, 0, max(end, seen_until or 0), tools or all_tool_roles())
    result = ClaimCheck(start=start, end=end)
    for number, text in split_claims(summary):
        claim = Claim(line=number, text=_short(text), anchors=_anchors(text))
        mark_claim(claim, records)
        result.claims.append(claim)
    return result
