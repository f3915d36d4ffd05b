from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from compaction.layers import NoLayers, layers_at
from compaction.strategies.registry import strategy_for_format
from sessions_app.management.commands._analysis import add_strategy_arguments, load_session, strategy_from_options
from sessions_app.management.commands._base import SessionCommand


class Command(SessionCommand):
    help = "What each context-management layer would do before the request after main-chain call CALL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or an imported file's path")
        parser.add_argument("--at", type=int, required=True, metavar="CALL", help="after main-chain API call CALL")
        add_strategy_arguments(parser, required=False)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        session, info, messages = load_session(options["session"])
        name = options["strategy"] or strategy_for_format(session.format)
        strategy = strategy_from_options(
            name, info=info, context_limit=options["context_limit"], params=options["param"]
        )
        try:
            report = layers_at(messages, strategy=strategy, call=options["at"], info=info)
        except (NoLayers, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            data = {"session": session.pk, **report.as_json()}
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(
            f"session {session.pk}, {report.strategy} {report.version or ''}: after call {report.after_call}, "
            f"before call {report.next_call if report.next_call is not None else '(none)'}; "
            f"counted {report.tokens_before:,}"
        )
        for layer in report.layers:
            state = "acts" if layer.acts else ("on" if layer.enabled else "off")
            change = f" −{layer.removes:,}" if layer.removes else ""
            change += f" +{layer.adds:,}" if layer.adds else ""
            self.stdout.write(f"  {layer.number}. {layer.name} [{state}]{change} → {layer.tokens_after:,}")
            self.stdout.write(f"     why: {layer.why}")
            self.stdout.write(f"     {layer.detail}")
            if layer.tool_ids:
                self.stdout.write(f"     {len(layer.tool_ids)} tool results: {', '.join(layer.tool_ids)}")
        if report.recorded_next is not None:
            self.stdout.write(f"recorded context of call {report.next_call}: {report.recorded_next:,}")
        for event in report.real_events:
            ids = f", {len(event['tool_ids'])} tool results" if event["tool_ids"] else ""
            self.stdout.write(f"real {event['record']} (line {event['line']}){ids}")
        for note in report.notes:
            self.stdout.write(f"note: {note}")
