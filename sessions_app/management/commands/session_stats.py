from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import glance
from sessions_app.selectors import sessions as session_selectors


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
        # What the parser learned about the file as a whole (e.g. Codex's estimate rows), for --json readers.
        stats["info"] = found.info
        # What each subagent cost, as the session page's panel and its JSON twin (``overview.subagent_costs``) say.
        stats["subagent_costs"] = glance.subagent_costs(session=found)
        if json:
            self.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(f"session {stats['id']} ({stats['format']})")
        self.stdout.write(f"API calls: {stats['api_calls']['main']} main, {stats['api_calls']['side']} subagent")
        self.stdout.write(
            f"max context: {stats['max_context']['main']:,} main, {stats['max_context']['side']:,} subagent"
        )
        costs = stats["subagent_costs"]
        for row in costs["rows"]:
            cost = "unknown" if row["cost_usd"] is None else f"${row['cost_usd']:,.2f}"
            name = (row["agent"] or "(unnamed)") + (" (inline)" if row["inline"] else "")
            self.stdout.write(f"subagent {name}: {row['calls']:,} calls, {row['tokens']:,} tokens, {cost}")
        if costs["rows"] and costs["subagents_cost_usd"] is not None and costs["session_cost_usd"] is not None:
            self.stdout.write(
                f"subagents: ${costs['subagents_cost_usd']:,.2f} of the session's ${costs['session_cost_usd']:,.2f}"
            )
        for e in stats["events"]:
            self.stdout.write(
                f"  after call {e['after_call']}: {e['kind']} {e['trigger'] or ''} "
                f"pre={e['pre_tokens']} saved={e['tokens_saved']}"
            )
