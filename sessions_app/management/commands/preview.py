from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from compaction.replay import position_after_call, preview
from compaction.strategies.base import CutRefused
from sessions_app.management.commands._analysis import add_strategy_arguments, load_session, strategy_from_options


class Command(BaseCommand):
    help = "Where a strategy would cut, prune and compact a stored session, at its end or after a given API call."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or an imported file's path")
        add_strategy_arguments(parser)
        parser.add_argument("--at", type=int, default=None, metavar="CALL", help="main-chain API call index")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        session, info, messages = load_session(options["session"])
        strategy = strategy_from_options(
            options["strategy"], info=info, context_limit=options["context_limit"], params=options["param"]
        )
        at = None
        if options["at"] is not None:
            try:
                at = position_after_call(messages, options["at"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        try:
            result = preview(messages, strategy=strategy, at=at)
        except (CutRefused, ValueError) as exc:
            raise CommandError(f"{strategy.name} cannot preview this session: {exc}") from None
        data = {"session": session.pk, "at_call": options["at"], **result.as_json()}
        if options["json"]:
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        where = f"after call {options['at']}" if options["at"] is not None else "at the end of the session"
        self.stdout.write(f"session {session.pk}, {data['strategy']} {where} (message {data['at']})")
        self.stdout.write(f"compact now: {'yes' if data['should_compact'] else 'no'} ({data['reason']})")
        cut = data["cut"]
        if cut is None:
            self.stdout.write("cut: none (nothing to compact)")
        else:
            self.stdout.write(
                f"cut: summarise messages [{cut['from']}, {cut['to']}), first kept {cut['first_kept']}"
                + (f" ({cut['reason']})" if cut["reason"] else "")
            )
        self.stdout.write(f"prune: {len(data['prune'])} tool results" + (f" {data['prune']}" if data["prune"] else ""))
        self.stdout.write(
            f"tokens: {data['tokens_before']:,} before, ~{data['tokens_after_estimate']:,} after (estimate)"
        )
        self.stdout.write(f"summarizer transcript: {data['transcript_chars']:,} characters")
