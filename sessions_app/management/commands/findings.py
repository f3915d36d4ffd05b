from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import findings as finding_selectors
from sessions_app.selectors.sessions import SessionFilters


class Command(SessionCommand):
    help = (
        "What costs tokens and money across the analysed sessions (the Findings page's numbers): findings grouped by "
        "kind and subject, most dollars at stake first, with the sessions and calls they link to and the fix to paste."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", default="", help="one agent's sessions (its format name, e.g. claude-code)")
        parser.add_argument("--project", default="", help="one project's sessions (its working directory)")
        parser.add_argument("--kind", default="", help="one kind: " + ", ".join(finding_selectors.KIND_LABELS))
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["kind"] and options["kind"] not in finding_selectors.KIND_LABELS:
            raise CommandError(
                f"Unknown finding kind {options['kind']!r}: choose from {', '.join(finding_selectors.KIND_LABELS)}."
            )
        report = finding_selectors.findings_report(
            filters=SessionFilters(format=options["agent"], project=options["project"]), kind=options["kind"]
        )
        if options["json"]:
            self.stdout.write(orjson.dumps(report.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(
            f"{report.analysed:,} of {report.sessions:,} sessions analysed; ${report.cost_usd:,.2f} and "
            f"{report.tokens:,} tokens at stake."
        )
        for group in report.groups:
            subject = f" · {group.subject}" if group.subject else ""
            self.stdout.write(
                f"\n{group.label}{subject}: ${group.cost_usd:,.2f}, {group.tokens:,} tokens, "
                f"{group.sessions:,} session{'s' if group.sessions != 1 else ''}"
            )
            for share in group.top:
                cost = f"${share.cost_usd:,.2f}" if share.cost_usd is not None else "no price"
                calls = ", ".join(f"call {c}" for c in share.calls)
                self.stdout.write(
                    f"  session {share.session_id} ({share.agent}) {cost}, {share.tokens:,} tokens; {calls}"
                )
            for fix in group.fixes:
                self.stdout.write(f"  paste into {fix['where']}: {fix['text']}")
