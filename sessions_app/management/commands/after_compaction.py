from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.after_compaction import DEFAULT_CALLS
from sessions_app.management.commands._analysis import resolve
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import after_compaction as after_selectors


class Command(SessionCommand):
    help = (
        "What the agent did after each real compaction: files read again, errors repeated, questions asked again, "
        "rules broken "
        f"in the next N calls (default {DEFAULT_CALLS}); --all: the totals of every session with a compaction."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", nargs="?", help="session id, the agent's session id, or an imported file's path")
        parser.add_argument("--calls", type=int, default=DEFAULT_CALLS, metavar="N", help="calls after each compaction")
        parser.add_argument("--all", action="store_true", help="every session with a compaction, in totals")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["all"]:
            rows = after_selectors.archive_after_compaction()
            if options["json"]:
                data = {"calls": DEFAULT_CALLS, "sessions": rows}
                self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
                return
            for row in rows:
                totals = row["totals"]
                if totals is None:
                    self.stdout.write(f"session {row['session']}: {row['note']}")
                    continue
                self.stdout.write(f"session {row['session']}: {_counts(totals)}")
            return
        if not options["session"]:
            raise CommandError("Name a session, or --all.")
        if options["calls"] < 1:
            raise CommandError("--calls must be at least 1.")
        session = resolve(options["session"])
        report = after_selectors.after_compaction(session=session, calls=options["calls"])
        if options["json"]:
            self.stdout.write(orjson.dumps({"session": session.pk, **report}, option=orjson.OPT_INDENT_2).decode())
            return
        if not report["compactions"]:
            self.stdout.write(f"session {session.pk}: no compaction recorded")
            return
        for row in report["compactions"]:
            self.stdout.write(
                f"{row['trigger'] or 'compaction'} after call {row['after_call']}, next {row['calls']} calls: "
                + _counts(row)
            )
            for repeat in row["reads_again"] + row["errors_again"] + row["questions_again"]:
                times = f" ({repeat['times']} times)" if repeat["times"] > 1 else ""
                self.stdout.write(
                    f"  {repeat['kind']} again at call {repeat['call']}{times}: {repeat['subject'][:160]} "
                    f"(first at call {repeat['before_call']})"
                )
            for broken in row["rules"] or []:
                self.stdout.write(
                    f"  rule broken at call {broken['call']}: {broken['rule'][:160]} by {broken['what'][:160]}"
                )


def _counts(row: dict[str, Any]) -> str:
    rules = "not checked" if row["rules_broken"] is None else f"{row['rules_broken']:,}"
    return (
        f"{row['files_read_again']:,} files read again, {row['errors_repeated']:,} errors repeated, "
        f"{row['questions_asked_again']:,} questions asked again, rules broken: {rules}"
    )
