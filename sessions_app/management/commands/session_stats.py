from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import subagents as subagent_selectors
from sessions_app.selectors import transcript as transcript_selectors

TEXT_ISSUES_LISTED = 20  # bad lines the text output names; the rest counted (--json lists as many as the page)


class Command(SessionCommand):
    help = "API calls, peak context and context events of one session (by id or source file path)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, session: str, json: bool, **options: Any) -> None:
        try:
            found = session_selectors.resolve_session(ref=session)
        except session_selectors.SessionNotFound as exc:
            raise CommandError(str(exc)) from None
        stats = {"id": found.pk, "format": found.format, **call_selectors.session_stats(session=found).as_json()}
        # The headline peak, as every page gives it (``session_peak``): a log without recorded usage has its estimated
        # peak, labelled so, where the recorded statistics alone know none.
        stats["peak"] = call_selectors.session_peak(session=found).as_json()
        stats["peak_is_estimate"] = found.peak_is_estimate
        # What the parser learned about the file as a whole (e.g. Codex's estimate rows), for --json readers.
        stats["info"] = found.info
        # Every subagent, inline or from its own file, with its calls, tokens and cost (the session page's numbers).
        subagents = subagent_selectors.subagents(session=found)
        stats["subagents"] = subagents.as_json()
        # The lines the import could not read, by file and line, as the session page lists them.
        issues = transcript_selectors.line_issues(session=found)
        stats["line_issues"] = issues.as_json()
        if json:
            self.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(f"session {stats['id']} ({stats['format']})")
        self.stdout.write(f"API calls: {stats['api_calls']['main']} main, {stats['api_calls']['side']} subagent")
        if stats["peak_is_estimate"]:
            # A log that records no usage has no recorded context: a 0 here would read as an empty window.
            self.stdout.write("max context: none recorded (this log records no usage; the peak below is estimated)")
        else:
            self.stdout.write(
                f"max context: {stats['max_context']['main']:,} main, {stats['max_context']['side']:,} subagent"
            )
        peak = stats["peak"]
        if peak["call"] is not None:
            about, estimate = ("≈", " (estimate)") if stats["peak_is_estimate"] else ("", "")
            self.stdout.write(f"peak: {about}{peak['tokens']:,} at call {peak['call']}{estimate}")
        if subagents.rows:
            cost = "no price" if subagents.cost_usd is None else f"${subagents.cost_usd:,.2f}"
            self.stdout.write(
                f"subagents: {len(subagents.rows)} ({subagents.inline_count} inline, "
                f"{subagents.sidechain_count} sidechain, "
                f"{subagents.file_count} from files), {subagents.calls:,} calls, {subagents.tokens:,} tokens, {cost}"
            )
            for row in subagents.rows:
                row_cost = "no price" if row.cost_usd is None else f"${row.cost_usd:,.2f}"
                self.stdout.write(f"  {row.agent} ({row.kind}): {row.calls:,} calls, {row.tokens:,} tokens, {row_cost}")
        if issues:
            self.stdout.write(f"lines that could not be read: {issues.total:,}")
            for issue in issues.listed[:TEXT_ISSUES_LISTED]:
                self.stdout.write(f"  {issue.path}:{issue.line} {issue.message}")
            if issues.total > TEXT_ISSUES_LISTED:
                self.stdout.write(f"  {issues.total - TEXT_ISSUES_LISTED:,} more not listed (--json lists more)")
        for e in stats["events"]:
            # What the agent's record says, and only that: a size it did not record is left out, never "None".
            known = [
                f"{name} {e[key]:,} tokens"
                for name, key in (("before", "pre_tokens"), ("saved", "tokens_saved"))
                if e[key] is not None
            ]
            trigger = f" ({e['trigger']})" if e["trigger"] else ""
            self.stdout.write(
                f"  after call {e['after_call']}: {e['kind']}{trigger}{': ' if known else ''}{', '.join(known)}"
            )
