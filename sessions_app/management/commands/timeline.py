from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from compaction.strategies.registry import STRATEGY_NAMES
from sessions_app import selectors


class Command(BaseCommand):
    help = "The token timeline of one session: per-agent series, markers and thresholds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, source file path, or the agent's session id")
        parser.add_argument("--strategy", choices=STRATEGY_NAMES, help="thresholds of another strategy")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, session: str, strategy: str | None, json: bool, **options: Any) -> None:
        try:
            found = selectors.resolve_session(ref=session)
        except selectors.SessionNotFound as exc:
            raise CommandError(str(exc)) from None
        data = selectors.timeline(session=found, strategy=strategy)
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
                "markers": data["markers"],
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
        for m in data["markers"]:
            self.stdout.write(f"  after call {m['after_call']:>4} [{m['agent']}] {m['kind']} {m.get('trigger') or ''}")
