"""The optional judge (issue 38): a model asked about the claims the offline pass leaves undecided.

Pure: the request (``SummaryRequest``, sent by ``compaction.summarize.AnthropicSummarizer`` like a summary), its
estimated size and cost before it is sent, and the reading of the answer. The records it shows the model are the
ones the offline pass searched (``compaction.claims``), as text, cut to ``MAX_RECORD_CHARS`` keeping the most
recent; the answer is one line per claim, "<n>: supported|unsupported|contradicted: <reason>".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.claims import Claim
from compaction.summarize import SummaryRequest, estimate_cost_usd
from compaction.tokens import tiktoken_counts
from compaction.transcript import Message

JUDGE_SYSTEM = (
    "You check a summary of a coding agent's session against the session's records. For each numbered claim, say "
    "whether the records support it, say nothing about it (unsupported), or say otherwise (contradicted). Judge only "
    "from the records shown; never from what is likely."
)
INSTRUCTIONS = (
    "Answer with exactly one line per claim, in order, and nothing else:\n"
    "<number>: supported|unsupported|contradicted: <the record that decides it, in a few words>"
)
# The records shown to the judge: the most recent this many characters (a model reads about 4 per token).
MAX_RECORD_CHARS = 60_000
RECORD_CHARS = 2_000  # per record
OUTPUT_TOKENS_PER_CLAIM = 40  # one short line each: the output budget asked for, and the estimate's output
MIN_OUTPUT_TOKENS = 256
_ANSWER = re.compile(r"^\s*(\d+)\s*[:.)-]\s*(supported|unsupported|contradicted)\b\s*[:,-]?\s*(.*)$", re.I | re.M)


@dataclass(frozen=True, slots=True)
class JudgeEstimate:
    """What a judge call would cost, before it is sent."""

    claims: int
    input_tokens: int  # tiktoken cl100k estimate of the request's text
    output_tokens: int  # the output budget asked for
    cost_usd: float | None  # at the model's price (compaction.costs); None for an unknown price


def records_text(messages: Sequence[Message], end: int) -> str:
    """The records before ``end`` as the judge reads them, newest kept when over ``MAX_RECORD_CHARS``."""
    parts: list[str] = []
    size = 0
    for position in range(min(end, len(messages)) - 1, -1, -1):
        message = messages[position]
        if message.kind in ("bookkeeping", "unknown"):
            continue
        text = message.text.strip()
        if not text:
            continue
        part = f"[record {position} · {message.role} · {message.kind}]\n{text[:RECORD_CHARS]}"
        if size + len(part) > MAX_RECORD_CHARS:
            break
        parts.append(part)
        size += len(part)
    return "\n\n".join(reversed(parts))


def judge_request(claims: Sequence[Claim], records: str, *, model: str) -> SummaryRequest:
    """The request that asks ``model`` about ``claims`` (numbered from 1 in this order)."""
    listed = "\n".join(f"{n}. {claim.text}" for n, claim in enumerate(claims, start=1))
    text = f"<records>\n{records}\n</records>\n\n<claims>\n{listed}\n</claims>\n\n{INSTRUCTIONS}"
    return SummaryRequest(
        system=JUDGE_SYSTEM,
        transcript=text,
        rounds=None,
        model=model,
        max_tokens=max(MIN_OUTPUT_TOKENS, OUTPUT_TOKENS_PER_CLAIM * len(claims)),
        user_blocks=[{"type": "text", "text": text}],
    )


def estimate(request: SummaryRequest, *, claims: int) -> JudgeEstimate:
    """The request's size and cost before it is sent (input by tiktoken, output at its budget)."""
    (system_tokens, text_tokens) = tiktoken_counts([request.system, request.transcript])
    input_tokens = system_tokens + text_tokens
    cost = estimate_cost_usd(model=request.model, input_tokens=input_tokens, output_tokens=request.max_tokens)
    return JudgeEstimate(claims=claims, input_tokens=input_tokens, output_tokens=request.max_tokens, cost_usd=cost)


def read_verdicts(text: str, *, count: int) -> dict[int, tuple[str, str]]:
    """{claim number: (status, reason)} from the judge's answer; lines it could not read are left out."""
    found: dict[int, tuple[str, str]] = {}
    for match in _ANSWER.finditer(text):
        number = int(match.group(1))
        if 1 <= number <= count and number not in found:
            found[number] = (match.group(2).lower(), match.group(3).strip()[:300])
    return found
