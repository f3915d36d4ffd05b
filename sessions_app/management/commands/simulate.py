from __future__ import annotations

from datetime import date
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.costs import format_usd
from compaction.strategies.registry import STRATEGY_NAMES, parse_parameters
from sessions_app import simulations
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import simulations as selectors


class Command(SessionCommand):
    help = (
        "Settings simulator: replay every selected session with a strategy's settings (inline), beside what "
        "happened, per session and per project, with the setting to recommend per project."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--strategy", required=True, help=f"one of {', '.join(STRATEGY_NAMES)}")
        parser.add_argument(
            "--param", action="append", default=[], metavar="NAME=VALUE", help="a strategy parameter (repeatable)"
        )
        parser.add_argument(
            "--try",
            dest="try_values",
            default=None,
            metavar="NAME=V1,V2,...",
            help="one parameter's values to try in turn (each a setting; the recommendation picks among them)",
        )
        parser.add_argument("--project", default="", help="only this project (as the session list names it)")
        parser.add_argument("--agent", default="", help="only this agent's sessions (claude-code, codex, ...)")
        parser.add_argument("--model", default="", help="only sessions of this model")
        parser.add_argument("--since", default="", metavar="DATE", help="only sessions started on or after DATE")
        parser.add_argument("--until", default="", metavar="DATE", help="only sessions started on or before DATE")
        parser.add_argument("--json", action="store_true", help="the page's JSON twin")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            params = parse_parameters(options["strategy"], options["param"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        try_name, try_values = "", []
        if options["try_values"]:
            try_name, sep, values = options["try_values"].partition("=")
            if not sep:
                raise CommandError("--try must look like NAME=V1,V2,...")
            try_name, try_values = try_name.strip(), values.split(",")
        try:
            plan = selectors.plan(strategy=options["strategy"], params=params, try_name=try_name, try_values=try_values)
        except selectors.SimulationError as exc:
            raise CommandError(str(exc)) from None
        for name in ("since", "until"):
            try:
                date.fromisoformat(options[name]) if options[name] else None
            except ValueError:
                raise CommandError(f"--{name} {options[name]!r} is not a date (YYYY-MM-DD).") from None
        filters = {name: options[name] for name in ("project", "agent", "model", "since", "until")}
        run = simulations.create(plan=plan, filters=filters)
        run = simulations.simulate(run_id=run.pk)
        data = selectors.report(run=run)
        if options["json"]:
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        self._text(data)

    def _text(self, data: dict[str, Any]) -> None:
        write = self.stdout.write
        write(
            f"simulation {data['id']}: {data['strategy_label']}, {data['sessions_done']} of "
            f"{data['sessions_total']} sessions; settings: {'; '.join(data['settings'])}"
        )
        if data["error"]:
            write(f"error: {data['error']}")
        for group in [data["all"], *data["projects"]]:
            happened = group["happened"]
            write(
                f"{group['project'] or 'all projects'}: {happened['sessions']} sessions"
                + (f" ({group['skipped']} skipped)" if group["skipped"] else "")
                + f"; happened: {happened['compactions']} compactions, {happened['overflows']} overflows, "
                f"peak {happened['peak']:,}, {format_usd(happened['cost_usd'])}"
                + (
                    f" (cost of {happened['sessions_costed']} sessions: the others have no price or no usage)"
                    if happened["sessions_costed"] < happened["sessions"]
                    else ""
                )
            )
            for row in group["settings"]:
                write(
                    f"  {row['setting']}: {row['compactions']} compactions, {row['overflows']} overflows, "
                    f"peak {row['peak']:,}, {format_usd(row['cost_usd'])} (estimated)"
                )
            if group["recommended"] is not None:
                write(
                    f"  recommended: {group['recommended']}, saving {format_usd(group['expected_saving_usd'])}: "
                    f"{group['why']}"
                )
            else:
                write(f"  no recommendation: {group['why']}")
        for row in data["skipped"]:
            write(f"skipped session {row['session']} ({row['title']}): {row['skipped']}")
        write(f"note: {data['cost_note']}")
