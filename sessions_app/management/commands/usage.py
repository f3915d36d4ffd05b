from __future__ import annotations

import csv
from datetime import date
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import usage as usage_selectors
from sessions_app.selectors.sessions import SessionFilters


def _day(value: str) -> date:
    """YYYY-MM-DD, or YYYYMMDD as ccusage takes it."""
    text = value.strip()
    if len(text) == 8 and text.isdigit():
        text = f"{text[:4]}-{text[4:6]}-{text[6:]}"
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise CommandError(f"{value!r} is not a date: give YYYY-MM-DD.") from None


class Command(SessionCommand):
    help = (
        "Tokens and cost across sessions per day, week, month, project, model, agent or session (the Usage page's "
        "numbers); subagents and inline subagents are included and also given apart."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--by", choices=usage_selectors.GROUPINGS, default="day")
        parser.add_argument("--since", type=_day, help="first day included (YYYY-MM-DD, in the report's time zone)")
        parser.add_argument("--until", type=_day, help="last day included (YYYY-MM-DD)")
        parser.add_argument("--agent", default="", help="one agent's sessions (its format name, e.g. claude-code)")
        parser.add_argument("--project", default="", help="one project's sessions (its working directory)")
        parser.add_argument("--model", default="", help="calls of this model only")
        parser.add_argument("--timezone", default="", help="IANA zone the days are counted in (USAGE_TIME_ZONE)")
        output = parser.add_mutually_exclusive_group()
        output.add_argument("--json", action="store_true")
        output.add_argument("--csv", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        query = usage_selectors.UsageQuery(
            by=options["by"],
            since=options["since"],
            until=options["until"],
            time_zone=options["timezone"],
            model=options["model"],
            sessions=SessionFilters(format=options["agent"], project=options["project"]),
        )
        try:
            report = usage_selectors.usage_report(query=query)
        except usage_selectors.UsageError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        if options["csv"]:
            writer = csv.writer(self.stdout, lineterminator="\n")
            writer.writerows(usage_selectors.csv_rows(report=report))
            return
        self._table(report)

    def _table(self, report: usage_selectors.UsageReport) -> None:
        head = ("group", "input", "output", "cache write 5m", "cache write 1h", "cache read", "cost", "subagents")
        lines = [head]
        for row in [*report.rows, report.totals]:
            n = row.numbers
            lines.append(
                (
                    row.label if report.query.by == "session" or row is report.totals else row.group,
                    f"{n.input_tokens:,}",
                    f"{n.output_tokens:,}",
                    f"{n.cache_creation_5m_tokens:,}",
                    f"{n.cache_creation_1h_tokens:,}",
                    f"{n.cache_read_tokens:,}",
                    _usd(n.cost_usd),
                    _usd(_cost_sum(row.subagents.cost_usd, row.inline_subagents.cost_usd)),
                )
            )
        widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
        self.stdout.write(f"Usage by {report.query.by}, days in {report.query.zone.key}")
        for line in lines:
            cells = [str(line[0])[:60].ljust(min(widths[0], 60))]
            cells += [str(c).rjust(w) for c, w in zip(line[1:], widths[1:], strict=True)]
            self.stdout.write("  ".join(cells))


def _cost_sum(*amounts: float | None) -> float | None:
    return None if any(a is None for a in amounts) else round(sum(a for a in amounts if a is not None), 6)


def _usd(amount: float | None) -> str:
    return "no price" if amount is None else f"${amount:,.2f}"
