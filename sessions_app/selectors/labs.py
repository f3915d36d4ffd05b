"""Reads for the compaction-instructions lab: a lab's runs as a grid of points × instruction variants, each cell's
size, cost, checklist score, claims score and rules kept or lost (the run page's summary checks), and each variant's
totals side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.urls import reverse

from compaction.claims import ClaimCheck
from compaction.rules import RuleCheck
from compaction.transcript import MAIN
from sessions_app import models
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors.reviews import run_coverage
from sessions_app.selectors.summary_checks import SummaryChecks, run_checks

Run = models.CompactionRun


class LabNotFound(LookupError):
    pass


def claims_json(claims: ClaimCheck | None) -> dict[str, Any] | None:
    """A claims score as the lab shows it: supported of decided, the score (``ClaimCheck.score_percent``)."""
    if claims is None:
        return None
    counts = claims.counts()
    return {
        "supported": counts["supported"],
        "decided": claims.decided,
        "contradicted": counts["contradicted"],
        "score_percent": claims.score_percent,
    }


def rules_json(rules: RuleCheck | None) -> dict[str, int] | None:
    """Rules kept, changed and lost (``RuleCheck.counts``) and those lost that the agent does not put back."""
    return None if rules is None else rules.counts() | {"lost_unrestored": len(rules.lost)}


@dataclass(slots=True)
class Cell:
    run: Run
    found: int | None = None  # checklist items the summary keeps (None: no summary yet)
    total: int | None = None
    checks: SummaryChecks | None = None  # its claims and rules, as on the run page (None: no summary yet)

    def as_json(self) -> dict[str, Any]:
        run = self.run
        return {
            "run": run.pk,
            "url": reverse("sessions:run", args=[run.pk]),
            "status": run.status,
            "finished": run.finished,
            "summary_tokens": run.summary_tokens,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "cost_usd": float(run.cost_usd) if run.cost_usd is not None else None,
            "checklist": None if self.total is None else {"found": self.found, "total": self.total},
            "claims": claims_json(self.checks.claims if self.checks else None),
            "rules": rules_json(self.checks.rules if self.checks else None),
            "review": run.review,
        }


@dataclass(slots=True)
class Variant:
    """One instruction text across the lab's points, with its totals over the finished runs."""

    number: int  # 1-based, in the order the lab was given them
    instructions: str  # "" : the agent's own prompt alone
    cells: list[Cell] = field(default_factory=list)  # one per point, in the lab's point order

    @property
    def finished(self) -> int:
        return sum(1 for c in self.cells if c.run.status == Run.Status.SUCCEEDED)

    @property
    def summary_tokens(self) -> int:
        return sum(c.run.summary_tokens or 0 for c in self.cells)

    @property
    def cost_usd(self) -> float | None:
        costs = [c.run.cost_usd for c in self.cells if c.run.status == Run.Status.SUCCEEDED]
        return None if any(c is None for c in costs) else round(float(sum(c or 0 for c in costs)), 6)

    @property
    def found(self) -> int:
        return sum(c.found or 0 for c in self.cells)

    @property
    def total(self) -> int:
        return sum(c.total or 0 for c in self.cells)

    @property
    def score(self) -> float | None:
        """The share of checklist items kept over every finished run (None before one has)."""
        return round(self.found / self.total, 4) if self.total else None

    @property
    def claims(self) -> ClaimCheck | None:
        """Every claim of its checked summaries as one check: its score is supported of decided over them all."""
        checked = [c.checks for c in self.cells if c.checks is not None]
        if not checked:
            return None
        return ClaimCheck(start=0, end=0, claims=[claim for c in checked for claim in c.claims.claims])

    @property
    def rules(self) -> RuleCheck | None:
        """Every rule mark of its checked summaries (a rule in force at two points counts at each)."""
        checked = [c.checks for c in self.cells if c.checks is not None]
        return RuleCheck(marks=[m for c in checked for m in c.rules.marks]) if checked else None

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.number,
            "instructions": self.instructions,
            "finished": self.finished,
            "summary_tokens": self.summary_tokens,
            "cost_usd": self.cost_usd,
            "checklist": {"found": self.found, "total": self.total, "score": self.score},
            "claims": claims_json(self.claims),
            "rules": rules_json(self.rules),
            "runs": [c.as_json() for c in self.cells],
        }


@dataclass(slots=True)
class Lab:
    key: str
    session: models.Session
    strategy: str
    points: list[int]  # "after call N", in order
    variants: list[Variant]
    created_at: datetime  # when its first run was queued

    @property
    def finished(self) -> bool:
        return all(c.run.finished for v in self.variants for c in v.cells)

    @property
    def rows(self) -> list[tuple[int, list[Cell | None]]]:
        """Per point, each variant's cell there (None: no run of it at that point)."""
        cells = {(c.run.after_call or 0, v.number): c for v in self.variants for c in v.cells}
        return [(point, [cells.get((point, v.number)) for v in self.variants]) for point in self.points]

    def as_json(self) -> dict[str, Any]:
        return {
            "lab": self.key,
            "url": reverse("sessions:lab", args=[self.key]),
            "session": self.session.pk,
            "strategy": self.strategy,
            "created_at": self.created_at.isoformat(),
            "points": self.points,
            "finished": self.finished,
            "variants": [v.as_json() for v in self.variants],
        }


def lab(*, key: str) -> Lab:
    """A lab's runs laid out by variant and point; each finished run's checklist scored against the range it
    summarised (the run page's checklist: ``reviews.run_coverage``) and its claims and rules checked (the run page's:
    ``summary_checks.run_checks``), the session read once."""
    runs = list(Run.objects.filter(lab=key).select_related("session").order_by("after_call", "pk"))
    if not key or not runs:
        raise LabNotFound(f"No lab {key!r}.")
    session = runs[0].session
    messages = (
        conversation_selectors.conversation(session=session, agent=MAIN)
        if any(r.status == Run.Status.SUCCEEDED for r in runs)
        else []
    )
    points = list(dict.fromkeys(r.after_call or 0 for r in runs))
    texts = list(dict.fromkeys(r.instructions for r in sorted(runs, key=lambda r: r.pk)))
    by_cell = {(r.after_call or 0, r.instructions): r for r in runs}  # the latest run of a cell (a retry) wins
    variants: list[Variant] = []
    for number, text in enumerate(texts, start=1):
        variant = Variant(number=number, instructions=text)
        for point in points:
            run = by_cell.get((point, text))
            if run is None:
                continue
            cell = Cell(run=run)
            if run.status == Run.Status.SUCCEEDED:
                checked = run_coverage(run=run, messages=messages)
                if checked is not None:
                    cell.found = sum(1 for i in checked.items if i.found)
                    cell.total = len(checked.items)
                cell.checks = run_checks(run=run, messages=messages)  # kept per run and session version
            variant.cells.append(cell)
        variants.append(variant)
    return Lab(
        key=key,
        session=session,
        strategy=runs[0].strategy,
        points=points,
        variants=variants,
        created_at=min(r.created_at for r in runs),
    )


def session_labs(*, session: models.Session) -> list[tuple[str, datetime]]:
    """A session's labs, newest first: each key with when its first run was created."""
    rows = Run.objects.filter(session=session).exclude(lab="").order_by("pk").values_list("lab", "created_at")
    first: dict[str, datetime] = {}
    for key, created in rows:
        first.setdefault(key, created)
    return sorted(first.items(), key=lambda item: item[1], reverse=True)
