from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.strategies.registry import STRATEGY_NAMES
from compaction.transcript import MAIN
from sessions_app import models
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import composition as composition_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import timeline as timeline_selectors


class Command(SessionCommand):
    help = (
        "The token timeline of one session: per-agent series, events and thresholds; "
        "with --call N, that call and what filled its context (the timeline page's call panel)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, source file path, or the agent's session id")
        parser.add_argument("--strategy", choices=STRATEGY_NAMES, help="thresholds of another strategy")
        parser.add_argument("--call", type=int, help="one API call: its numbers and what filled its context")
        parser.add_argument("--agent", default=MAIN, help="the agent of --call (default: the main chain)")
        parser.add_argument("--json", action="store_true")

    def handle(
        self,
        *args: Any,
        session: str,
        strategy: str | None,
        call: int | None,
        agent: str,
        json: bool,
        **options: Any,
    ) -> None:
        try:
            found = session_selectors.resolve_session(ref=session)
        except session_selectors.SessionNotFound as exc:
            raise CommandError(str(exc)) from None
        if call is not None:
            self._call(found, agent=agent, call=call, json=json)
            return
        data = timeline_selectors.timeline(session=found, strategy=strategy)
        if json:
            out = {
                "series": {
                    agent: [
                        {"call": p["call"], "context": p["context"], "output": p["output"], "timestamp": p["timestamp"]}
                        for p in points
                    ]
                    for agent, points in data["series"].items()
                },
                "estimates": data["estimates"],
                "peak": data["peak"],
                "events": data["events"],
                "thresholds": data["thresholds"],
            }
            self.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
            return
        t = data["thresholds"]
        self.stdout.write(
            f"thresholds ({t['strategy']}): window {t['window']:,}, compaction {t['autocompact']}, "
            f"warning {t['warning']}, blocking {t['blocking']}"
        )
        for agent, points in data["series"].items():
            peak = max((p["context"] for p in points), default=0)
            self.stdout.write(f"{agent}: {len(points)} calls, peak context {peak:,}")
        for m in data["events"]:
            where = f"after call {m['after_call']:>4}" if "after_call" in m else f"at call {m['call']:>4}"
            self.stdout.write(f"  {where} [{m['agent']}] {m['kind']} {m.get('trigger') or ''}")

    def _call(self, session: models.Session, *, agent: str, call: int, json: bool) -> None:
        try:
            detail = composition_selectors.turn_detail(session=session, agent=agent, call=call)
        except models.ApiCall.DoesNotExist as exc:
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(orjson.dumps(detail, option=orjson.OPT_INDENT_2).decode())
            return
        kind = "estimated" if detail["estimated"] else "recorded"
        self.stdout.write(f"{agent} call {call}: context {detail['context']:,} ({kind})")
        width = max((len(p["part"]) for p in detail["composition"]), default=0)
        for part in detail["composition"]:
            self.stdout.write(f"  {part['part']:<{width}}  {part['tokens']:>9,}")
        for note in detail["notes"]:
            self.stdout.write(f"  note: {note}")
