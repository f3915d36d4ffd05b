from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.transcript import MAIN
from sessions_app import judge_services, run_services
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
        parser.add_argument(
            "--judge",
            action="store_true",
            help="then ask a model about the run's undecided claims, now (needs ANTHROPIC_API_KEY; its estimated "
            "cost is printed first, and the judge is recorded with the run)",
        )
        parser.add_argument("--model", help="the judge's model (default: SUMMARY_MODEL)")
        parser.add_argument("--json", action="store_true")

    def handle(
        self,
        *args: Any,
        run: int | None,
        session: str | None,
        compaction: int | None,
        judge: bool,
        model: str | None,
        json: bool,
        **options: Any,
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
            if judge:
                what["judge"] = self._judge(found_run, model=model, quiet=json)
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
            if judge:
                raise CommandError("The judge asks about a run's summary: give a run id.")
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
        for verdict in (what.get("judge") or {}).get("verdicts", []):
            self.stdout.write(
                f"judge: line {verdict['line']}: {verdict['status']}: {verdict['text']} ({verdict['reason']})"
            )

    def _judge(self, run: Any, *, model: str | None, quiet: bool) -> dict[str, Any] | None:
        """Create the judge run, say its estimate, execute it now, and return it as the JSON twin gives it."""
        try:
            created = judge_services.create_judge(run=run, user=None, model=model)
        except run_services.RunRefused as exc:
            raise CommandError(str(exc)) from None
        if not quiet:
            cost = created.estimated_cost_usd
            self.stdout.write(
                f"judge {created.pk}: {len(created.claims)} claims to {created.model}, "
                f"≈{created.estimated_input_tokens:,} tokens in, at most {created.estimated_output_tokens:,} out, "
                + ("unknown price" if cost is None else f"≈${cost:.4f}")
            )
        return check_selectors.judge_json(judge_services.execute_judge(judge_id=created.pk))
