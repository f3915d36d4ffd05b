from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.transcript import MAIN
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import runs as run_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import summary_checks as check_selectors


class Command(SessionCommand):
    help = (
        "Check a summary claim by claim and rule by rule, offline: a run's (RUN) or an agent's own recorded one "
        "(--session S --compaction N, N from 1)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", nargs="?", type=int, help="a compaction run id")
        parser.add_argument("--session", help="a session id, source file path or the agent's own session id")
        parser.add_argument("--compaction", type=int, help="the session's N-th recorded compaction (from 1)")
        parser.add_argument("--json", action="store_true")

    def handle(
        self, *args: Any, run: int | None, session: str | None, compaction: int | None, json: bool, **options: Any
    ) -> None:
        if (run is None) == (session is None):
            raise CommandError("Give a run id, or --session S --compaction N.")
        if run is not None:
            try:
                found_run = run_selectors.get_run(run_id=run)
            except run_selectors.RunNotFound as exc:
                raise CommandError(str(exc)) from None
            found = found_run.session
            messages = conversation_selectors.conversation(session=found, agent=MAIN)
            checks = check_selectors.run_checks(run=found_run, messages=messages)
            if checks is None:
                raise CommandError(f"Run {run} has no summary to check, or its session changed since it ran.")
            what: dict[str, Any] = {"run": run}
        else:
            if compaction is None:
                raise CommandError("--session needs --compaction N (the session's N-th recorded compaction).")
            try:
                found = session_selectors.resolve_session(ref=session or "")
            except session_selectors.SessionNotFound as exc:
                raise CommandError(str(exc)) from None
            messages = conversation_selectors.conversation(session=found, agent=MAIN)
            try:
                position = check_selectors.recorded_position(messages=messages, number=compaction)
            except check_selectors.SummaryNotFound as exc:
                raise CommandError(f"session {found.pk}: {exc}") from None
            checks = check_selectors.recorded_checks(session=found, messages=messages, position=position)
            what = {"session": found.pk, "compaction": compaction}
        data = what | checks.as_json(session_id=found.pk, messages=messages)
        if json:
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(checks.claims.line)
        for claim in checks.claims.claims:
            if claim.status != "supported":
                self.stdout.write(f"  line {claim.line}: {claim.status}: {claim.text} ({claim.why})")
        self.stdout.write(checks.rules.line)
        for mark in checks.rules.marks:
            where = f"summary line {mark.summary_line}" if mark.summary_line else mark.match
            restored = ", the agent puts it back" if mark.restored else ""
            self.stdout.write(
                f"  {mark.status}: {mark.rule.label} “{mark.rule.text}” (after call {mark.rule.after_call}, "
                f"line {mark.rule.line}; {where}{restored})"
            )
        for line in checks.to_confirm:
            self.stdout.write(f"to confirm before accepting: {line}")
