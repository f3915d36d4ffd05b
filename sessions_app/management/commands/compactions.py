from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import compactions as compaction_selectors
from sessions_app.selectors.sessions import SessionFilters


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.2f}"


class Command(SessionCommand):
    help = (
        "Every recorded compaction across sessions (the Findings page's compactions): context before and after, what "
        "the summariser cost and what the compaction bought, grouped by project, agent or agent version."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--by", choices=compaction_selectors.GROUPINGS, default="project")
        parser.add_argument("--agent", default="", help="one agent's sessions (its format name, e.g. claude-code)")
        parser.add_argument("--project", default="", help="one project's sessions (its working directory)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = compaction_selectors.compactions_report(
                filters=SessionFilters(format=options["agent"], project=options["project"]), by=options["by"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        for group in [*report.groups, report.total]:
            self.stdout.write(
                f"{group.group or '–'}: {group.compactions:,} compactions in {len(group.sessions):,} sessions, "
                f"{group.freed:,} tokens freed, bought {_usd(group.bought_usd)}, summarisers {_usd(group.cost_usd)}, "
                f"{group.freed_little:,} freed little"
            )
        for row in report.listed:
            self.stdout.write(
                f"  session {row.session_id} after call {row.after_call} ({row.trigger or '–'}): "
                f"{row.context_before or 0:,} -> {row.context_after or 0:,}, "
                f"{row.calls_until_next:,} calls to the next, "
                f"cost {_usd(row.cost_usd)}, bought {_usd(row.bought_usd)}"
            )
        for session in report.thrashing:
            self.stdout.write(
                f"  session {session['session']}: {session['freed_little']} of {session['compactions']} compactions "
                "freed little"
            )
