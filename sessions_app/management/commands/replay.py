from __future__ import annotations

import argparse
from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._analysis import add_strategy_arguments, overrides_from_options, resolve
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors.simulations import replay_session


class Command(SessionCommand):
    help = "What-if replay: where a strategy would have pruned, compacted or overflowed over a whole session."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or an imported file's path")
        add_strategy_arguments(parser)
        parser.add_argument(
            "--summary-tokens", type=int, default=None, help="summary size (default: the strategy's summary budget)"
        )
        parser.add_argument(
            "--follow-reality",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="take up each real compaction where it happened (default: on for the session's own agent with its "
            "own parameters); --no-follow-reality models every compaction",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        session = resolve(options["session"])
        overrides = overrides_from_options(
            options["strategy"], context_limit=options["context_limit"], params=options["param"]
        )
        try:
            # The one replay of a session with a strategy's settings, which the settings simulator sums up too.
            result, _ = replay_session(
                session=session,
                strategy=options["strategy"],
                overrides=overrides,
                summary_tokens=options["summary_tokens"],
                follow_reality=options["follow_reality"],
            )
        except (TypeError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        data = {"session": session.pk, **result.as_json()}
        if options["json"]:
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            return
        lines = result.thresholds
        self.stdout.write(
            f"session {session.pk}, {result.strategy}: window {result.window:,}, "
            + (f"compaction line {lines.autocompact:,}" if lines.autocompact is not None else "no compaction line")
        )
        self.stdout.write(
            "following what really happened at each real compaction"
            if result.follow_reality
            else "modelling every compaction (not following the real ones)"
        )
        self.stdout.write(
            f"{len(result.series)} calls; peak {result.peak.tokens:,} at call {result.peak.call}; "
            f"{result.compactions} compactions, {result.prunes} prunes, {result.overflows} overflows, "
            f"{result.blocked} blocked; "
            f"{result.tokens_summarised:,} tokens summarised"
        )
        for event in result.events:
            detail = f" ({len(event.tool_ids)} results)" if event.kind == "prune" else ""
            if event.kind == "blocked":
                detail = f" ({event.reason})"
            if event.kind == "compaction":
                detail = f" ({event.trigger}, {event.removed_messages} messages summarised)"
                if event.followed:
                    detail += " (followed: what really happened)"
            self.stdout.write(
                f"  after call {event.after_call}: {event.kind}{detail} "
                f"{event.tokens_before:,} -> {event.tokens_after:,}"
            )
        if result.comparison:
            self.stdout.write("recorded vs replayed:")
        for row in result.comparison:
            real = f"real after call {row.real_after_call}" if row.real_after_call is not None else "no real event"
            if row.real_tokens_before is not None:
                real += f" ({row.real_tokens_before:,})"
            replayed = (
                f"replayed after call {row.replayed_after_call}"
                if row.replayed_after_call is not None
                else "not replayed"
            )
            if row.replayed_tokens_before is not None:
                replayed += f" ({row.replayed_tokens_before:,})"
            parts = []
            if row.kind == "compaction" and row.real_after_call is not None:
                recorded = row.real_context_after
                parts.append(f"real {recorded:,}" if recorded is not None else "real not recorded")
            if row.replayed_context_after is not None:
                parts.append(f"replayed {row.replayed_context_after:,}")
            after = f" (context after: {', '.join(parts)})" if parts else ""
            self.stdout.write(f"  {row.kind}: {real}; {replayed}: {row.reason}{after}")
        for note in result.notes:
            self.stdout.write(f"note: {note}")
