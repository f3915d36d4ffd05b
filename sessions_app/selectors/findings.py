"""Findings across the archive: the stored findings of every analysed session (``models.SessionFinding``, written with
the analysis), grouped by kind and subject and ranked by money, within the session list's filters.

The per-session diagnosis shows the same ``compaction.diagnose.Finding`` objects; nothing here reads a file or a
report again. A fixed number of queries whatever the number of sessions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, Q, Sum, Window
from django.db.models.functions import Coalesce, RowNumber
from django.urls import reverse

from sessions_app import models
from sessions_app.selectors.diagnosis import try_url
from sessions_app.selectors.sessions import SessionFilters, session_list

TOP_SESSIONS = 5  # sessions listed under each group, the most money at stake first
TOP_COMMANDS = 5  # of the largest tool outputs and repeated reads: their commands or files, over the listed sessions

KIND_LABELS = {
    "tool_outputs": "Largest tool outputs",
    "repeated_reads": "Files read again and again",
    "reads_after_compaction": "Files read again after compactions",
    "cache_misses": "Cache misses",
    "warning_line": "Often past the warning line",
    "late_arrivals": "Bursts after the last request",
    "compaction_timing": "Compactions that leave little room",
    "subagent": "Exploration a subagent could have done",
}


@dataclass(slots=True)
class SessionShare:
    """One session's finding in a group: what it has at stake there and the calls it links to."""

    session_id: int
    title: str
    agent: str
    project: str
    tokens: int
    cost_usd: float | None
    calls: list[int]
    finding: str
    fixes: list[dict[str, Any]]
    proof: dict[str, Any] | None
    details: list[dict[str, Any]] = field(default_factory=list)  # its commands, files or calls (Finding.details)
    try_url: str | None = None  # the what-if replay that proves its saving (the diagnosis's "Try it")

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "title": self.title,
            "agent": self.agent,
            "project": self.project,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
            "finding": self.finding,
            "fixes": self.fixes,
            "proof": self.proof,
            "try_url": self.try_url,
            "url": reverse("sessions:diagnosis", args=[self.session_id]),
        }


@dataclass(slots=True)
class FindingGroup:
    kind: str
    subject: str
    sessions: int
    tokens: int
    cost_usd: float  # of the priced findings
    unpriced: int  # findings without a price (a model no price is known for)
    top: list[SessionShare] = field(default_factory=list)

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind.replace("_", " ").capitalize())

    @property
    def subject_label(self) -> str:
        """The subject in words: a tool or command as the agent names it, a cause of misses or a line spelt out."""
        return self.subject if self.kind in ("tool_outputs",) else self.subject.replace("_", " ")

    @property
    def commands(self) -> list[dict[str, Any]]:
        """For tool outputs and repeated reads: the commands or files of the listed sessions added up, most money
        first."""
        if self.kind not in ("tool_outputs", "repeated_reads", "reads_after_compaction"):
            return []
        merged: dict[str, dict[str, Any]] = {}
        for share in self.top:
            for detail in share.details:
                row = merged.setdefault(
                    detail["subject"], {"subject": detail["subject"], "tokens": 0, "count": 0, "cost_usd": 0.0}
                )
                row["tokens"] += detail.get("tokens") or 0
                row["count"] += detail.get("count") or 0
                row["cost_usd"] += detail.get("cost_usd") or 0.0
        rows = sorted(merged.values(), key=lambda r: (-r["cost_usd"], -r["tokens"]))[:TOP_COMMANDS]
        return [{**row, "cost_usd": round(row["cost_usd"], 6)} for row in rows]

    @property
    def fixes(self) -> list[dict[str, Any]]:
        """The distinct fixes its listed sessions' agents offer (one agent's per agent)."""
        seen: dict[tuple[str, str], dict[str, Any]] = {}
        for share in self.top:
            for fix in share.fixes:
                seen.setdefault((fix["where"], fix["text"]), fix)
        return list(seen.values())

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "subject": self.subject,
            "subject_label": self.subject_label,
            "sessions": self.sessions,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "unpriced": self.unpriced,
            "fixes": self.fixes,
            "commands": self.commands,
            "top": [share.as_json() for share in self.top],
        }


@dataclass(slots=True)
class FindingsReport:
    groups: list[FindingGroup]
    sessions: int  # sessions in scope
    analysed: int  # of them, those whose findings are stored (analysed by the worker)

    @property
    def cost_usd(self) -> float:
        return sum(group.cost_usd for group in self.groups)

    @property
    def tokens(self) -> int:
        return sum(group.tokens for group in self.groups)

    def as_json(self) -> dict[str, Any]:
        return {
            "groups": [group.as_json() for group in self.groups],
            "totals": {"tokens": self.tokens, "cost_usd": round(self.cost_usd, 6)},
            "sessions": self.sessions,
            "analysed": self.analysed,
        }


def findings_report(*, filters: SessionFilters, kind: str = "", top: int = TOP_SESSIONS) -> FindingsReport:
    """The findings of the sessions the filters select, grouped by kind and subject, most money at stake first."""
    scope = session_list(filters=filters).order_by().values("pk")
    rows = models.SessionFinding.objects.filter(session__in=scope)
    if kind:
        rows = rows.filter(kind=kind)
    counts = models.Session.objects.filter(pk__in=scope).aggregate(
        n=Count("pk"), analysed=Count("pk", filter=Q(analysis__isnull=False))
    )
    grouped = (
        rows.values("kind", "subject")
        .annotate(
            sessions=Count("session", distinct=True),
            tokens=Sum("tokens"),
            cost=Coalesce(Sum("cost_usd"), 0.0),
            unpriced=Count("pk", filter=Q(cost_usd__isnull=True)),
        )
        .order_by("-cost", "-tokens", "kind", "subject")
    )
    groups = {
        (g["kind"], g["subject"]): FindingGroup(
            kind=g["kind"],
            subject=g["subject"],
            sessions=g["sessions"],
            tokens=g["tokens"] or 0,
            cost_usd=float(g["cost"] or 0),
            unpriced=g["unpriced"],
        )
        for g in grouped
    }
    # Without the model's ordering (the session's date, a join and a sort of every finding: 0.45 s of 0.5 at 20,000
    # findings on SQLite), the ranking reads the index finding_rank_session alone.
    ranked = rows.order_by().annotate(
        place=Window(
            RowNumber(),
            partition_by=[F("kind"), F("subject")],
            order_by=[F("cost_usd").desc(nulls_last=True), F("tokens").desc(), F("session_id").asc()],
        )
    )
    # The ranking reads no finding's JSON (0.3 s less over 20,000 findings, bench/findings_bench.py); only the listed
    # ones are read whole.
    listed = (
        models.SessionFinding.objects.filter(pk__in=list(ranked.filter(place__lte=top).values_list("pk", flat=True)))
        .select_related("session")
        .order_by(F("cost_usd").desc(nulls_last=True), "-tokens", "session_id")
    )
    for row in listed:
        data = row.data or {}
        session = row.session
        groups[(row.kind, row.subject)].top.append(
            SessionShare(
                session_id=session.pk,
                title=session.title or session.external_id,
                agent=session.format,
                project=session.project,
                tokens=row.tokens,
                cost_usd=row.cost_usd,
                calls=list(data.get("calls") or [])[:5],
                finding=data.get("finding", ""),
                fixes=list(data.get("fixes") or []),
                proof=data.get("proof"),
                details=list(data.get("details") or []),
                try_url=try_url(session.pk, data["proof"]) if data.get("proof") else None,
            )
        )
    return FindingsReport(groups=list(groups.values()), sessions=counts["n"], analysed=counts["analysed"])


def session_findings(*, session: models.Session) -> list[dict[str, Any]]:
    """One session's stored findings as its diagnosis serves them (its rank order)."""
    return [row.data for row in models.SessionFinding.objects.filter(session=session).order_by("rank")]
