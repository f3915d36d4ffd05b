"""Reads for checking a summary claim by claim and rule by rule (issue 38): a run's summary over the range it
replaced, an agent's own recorded summary over the range its compaction summarised. The marks come from
``compaction/claims.py`` and ``compaction/rules.py``; this module places them in a session (record links) and says
what accepting a summary must confirm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.urls import reverse

from compaction.claims import Claim, ClaimCheck, check_claims
from compaction.coverage import recorded_range
from compaction.formats.registry import agent_profile
from compaction.judge import JudgeEstimate, estimate, judge_request, records_text
from compaction.rules import RuleCheck, RuleMark, check_rules, rules_in_force
from compaction.summarize import SummaryRequest
from compaction.transcript import MAIN, Message
from sessions_app import models
from sessions_app.process_cache import ProcessCache
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors.reviews import row_seq
from sessions_app.selectors.runs import record_json


class SummaryNotFound(Exception):
    """No such recorded summary in the session."""


@dataclass(slots=True)
class SummaryChecks:
    """One summary's claims and the rules in force over what it replaced, each marked."""

    claims: ClaimCheck
    rules: RuleCheck
    seqs: dict[int, int] = field(default_factory=dict)  # conversation position -> stored seq, for the links

    @property
    def claim_rows(self) -> list[tuple[Claim, list[int]]]:
        """Each claim with the stored seqs of the records that back (or contradict) it: the page's links."""
        return [(c, [self.seqs.get(p, p) for p in c.support]) for c in self.claims.claims]

    @property
    def rule_rows(self) -> list[tuple[RuleMark, int]]:
        """Each rule's mark with the stored seq of the record it comes from."""
        return [(m, self.seqs.get(m.rule.position, m.rule.position)) for m in self.rules.marks]

    @property
    def score(self) -> float | None:
        """The summary's score: the share of its decided claims the records support (``ClaimCheck.score``)."""
        return self.claims.score

    @property
    def to_confirm(self) -> list[str]:
        """What accepting the summary must confirm: each rule it loses, each claim the records contradict."""
        lost = [f"loses the {m.rule.label} “{m.rule.text}” (record line {m.rule.line})" for m in self.rules.lost]
        wrong = [f"line {c.line} says “{c.text}”, but {c.why}" for c in self.claims.contradicted]
        return lost + wrong

    def as_json(self, *, session_id: int, messages: Sequence[Message]) -> dict[str, Any]:
        claims = self.claims.as_json()
        for claim in claims["claims"]:
            claim["support"] = [_link(session_id, messages, p) for p in claim["support"]]
        rules = self.rules.as_json()
        for rule in rules["rules"]:
            rule |= _link(session_id, messages, rule["position"])
        return {
            "score": claims["score"],
            "score_percent": claims["score_percent"],
            "claims": claims,
            "rules": rules,
            "to_confirm": self.to_confirm,
        }


def _link(session_id: int, messages: Sequence[Message], position: int) -> dict[str, Any]:
    seq = row_seq(messages, position)
    return {"position": position, "seq": seq, "url": reverse("sessions:message", args=[session_id, seq])}


def checks(
    *, session: models.Session, messages: Sequence[Message], start: int, end: int, summary: str, seen_until: int
) -> SummaryChecks:
    """``summary`` (of ``messages[start:end]``) checked: claims against the records before ``seen_until``, rules
    brought in the range it replaces."""
    profile = agent_profile(session.format)
    points = conversation_selectors.after_calls_of(messages) if isinstance(messages, list) else None
    rules = rules_in_force(messages, end, sources=profile.instructions, start=start, points=points)
    claims = check_claims(messages, start=start, end=end, summary=summary, tools=profile.tools, seen_until=seen_until)
    positions = {p for c in claims.claims for p in c.support} | {r.position for r in rules}
    return SummaryChecks(
        claims=claims,
        rules=check_rules(rules, summary, sources=profile.instructions),
        seqs={p: row_seq(messages, p) for p in positions},
    )


# Each finished run's checks (0.1-0.8 s on the samples' summaries), kept while neither the run nor its session
# changes: the run page, the compare page and the lab page (which polls every second) read them on every view.
_RUN_CHECKS: ProcessCache[tuple[int, Any, Any, int], SummaryChecks | None] = ProcessCache(max_entries=64)


def run_checks(*, run: models.CompactionRun, messages: Sequence[Message] | None = None) -> SummaryChecks | None:
    """A run's summary checked over the range it summarised (None before it has one, or once the session changed
    so that its positions no longer apply)."""
    if not run.summary:
        return None
    session = run.session
    version = (run.pk, run.finished_at, session.updated_at, session.message_count)
    return _RUN_CHECKS.get_or_compute(version, lambda: _run_checks(run=run, messages=messages))


def _run_checks(*, run: models.CompactionRun, messages: Sequence[Message] | None) -> SummaryChecks | None:
    conversation = (
        messages if messages is not None else conversation_selectors.conversation(session=run.session, agent=MAIN)
    )
    if run.cut_end > len(conversation):
        return None
    return checks(
        session=run.session,
        messages=conversation,
        start=run.cut_start,
        end=run.cut_end,
        summary=run.summary,
        seen_until=run.cut_end,
    )


def recorded_position(*, messages: Sequence[Message], number: int) -> int:
    """The conversation position of the session's ``number``-th recorded summary (from 1)."""
    positions = [i for i, m in enumerate(messages) if m.kind == "compact_summary"]
    if not 1 <= number <= len(positions):
        raise SummaryNotFound(
            f"the session has no compaction {number}: it has {len(positions)} recorded summar"
            + ("y" if len(positions) == 1 else "ies")
            + "."
        )
    return positions[number - 1]


def recorded_checks(*, session: models.Session, messages: Sequence[Message], position: int) -> SummaryChecks:
    """An agent's own summary at ``position`` checked over the range its compaction summarised, its claims against
    everything the agent had before it (``compaction.coverage.recorded_range``)."""
    start, end = recorded_range(messages, position)
    return checks(
        session=session,
        messages=messages,
        start=start,
        end=end,
        summary=messages[position].text,
        seen_until=position,
    )


# ----------------------------------------------------------------------------- the optional judge


@dataclass(slots=True)
class JudgePlan:
    """What the judge would be asked about a run's summary, by which model, and at what estimated cost."""

    claims: list[Claim]  # the claims the offline pass left undecided, in summary order
    request: SummaryRequest
    estimate: JudgeEstimate
    model_note: str

    def as_json(self) -> dict[str, Any]:
        return {
            "claims": [{"line": c.line, "text": c.text} for c in self.claims],
            "model": self.request.model,
            "model_note": self.model_note,
            "estimate": {
                "input_tokens": self.estimate.input_tokens,
                "output_tokens": self.estimate.output_tokens,
                "cost_usd": round(self.estimate.cost_usd, 6) if self.estimate.cost_usd is not None else None,
            },
        }


def judge_model(*, override: str | None = None) -> tuple[str, str]:
    """(model, why) of a judge: the reviewer's choice, else SUMMARY_MODEL (a small model, Haiku by default)."""
    if override:
        return override, "chosen for this judge"
    return settings.SUMMARY_MODEL, "SUMMARY_MODEL: the small model judges (the agents' records do not name theirs)"


def judge_plan(
    *,
    run: models.CompactionRun,
    messages: Sequence[Message] | None = None,
    checks: SummaryChecks | None = None,
    claims: Sequence[Claim] | None = None,
    model: str | None = None,
) -> JudgePlan | None:
    """The judge's request for ``run``: its undecided claims (or ``claims``), the records before its cut (None when
    the run has no summary to judge or nothing is undecided)."""
    conversation = (
        messages if messages is not None else conversation_selectors.conversation(session=run.session, agent=MAIN)
    )
    if claims is None:
        checked = checks if checks is not None else run_checks(run=run, messages=conversation)
        if checked is None:
            return None
        claims = [c for c in checked.claims.claims if c.status == "undecided"]
    if not claims:
        return None
    name, note = judge_model(override=model)
    request = judge_request(claims, records_text(conversation, run.cut_end), model=name)
    return JudgePlan(
        claims=list(claims), request=request, estimate=estimate(request, claims=len(claims)), model_note=note
    )


def latest_judge(*, run: models.CompactionRun) -> models.JudgeRun | None:
    return models.JudgeRun.objects.filter(run=run).order_by("-created_at", "-id").first()


def judge_json(judge: models.JudgeRun | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    return {
        "id": judge.pk,
        "status": judge.status,
        "model": judge.model,
        "model_note": judge.model_note or None,
        "claims": judge.claims,
        "verdicts": judge.verdicts,
        "estimate": {
            "input_tokens": judge.estimated_input_tokens,
            "output_tokens": judge.estimated_output_tokens,
            "cost_usd": float(judge.estimated_cost_usd) if judge.estimated_cost_usd is not None else None,
        },
        **record_json(judge),
    }
