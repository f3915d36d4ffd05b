from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app.management.commands._analysis import (
    add_point_arguments,
    add_strategy_arguments,
    overrides_from_options,
    resolve,
)
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import previews as preview_selectors


class Command(SessionCommand):
    help = "Where a strategy would cut, prune and compact a stored session, at its end or after a given API call."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or an imported file's path")
        add_strategy_arguments(parser)
        add_point_arguments(parser)
        parser.add_argument("--json", action="store_true", help="the same JSON object as the page's JSON twin")

    def handle(self, *args: Any, **options: Any) -> None:
        session = resolve(options["session"])
        preview = build_from_options(session, options)
        if options["json"]:
            self.stdout.write(
                orjson.dumps(preview_selectors.preview_json(preview), option=orjson.OPT_INDENT_2).decode()
            )
            return
        write_preview(self.stdout.write, preview)


def build_from_options(session: Any, options: dict[str, Any]) -> preview_selectors.Preview:
    """The preview the options ask for; a CommandError with the reason for bad input (shared with ``compact``)."""
    strategy = options["strategy"] or preview_selectors.default_strategy(session)
    overrides = overrides_from_options(strategy, context_limit=options["context_limit"], params=options["param"])
    preview = preview_selectors.build_preview(
        session=session,
        strategy=strategy,
        overrides=overrides,
        after_call=options["at"],
        cut_start=options["cut_start"],
        cut_end=options["cut_end"],
    )
    if preview.error:
        raise CommandError(preview.error)
    return preview


def write_preview(write: Any, preview: preview_selectors.Preview) -> None:
    data = preview_selectors.preview_json(preview)
    where = f"after call {data['after_call']}" if data["after_call"] is not None else "at the end"
    write(f"session {preview.session.pk}, {preview.label} {where} (message {data['at']} of {data['messages']})")
    write(f"compact now: {'yes' if data['should_compact'] else 'no'} ({data['reason']})")
    cut = data["cut"]
    if cut is None:
        write("cut: none (nothing to compact)")
    else:
        calls = f"after call {cut['from_after_call']}" if cut["from_after_call"] is not None else "the start"
        write(
            f"cut: summarise messages [{cut['from']}, {cut['to']}) "
            f"(from {calls} to after call {cut['to_after_call']}), "
            f"first kept {cut['first_kept']}"
            + (" (by hand)" if cut["by_hand"] else "")
            + (f" ({cut['reason']})" if cut["reason"] else "")
        )
        if cut["refused"]:
            write(f"cut refused, not applied: {cut['refused']}")
    write(f"prune: {len(data['prune'])} tool results" + (f" {data['prune']}" if data["prune"] else ""))
    write(f"tokens: {data['tokens_before']:,} before, ~{data['tokens_after_estimate']:,} after (estimate)")
    if data["context_after_estimate"] is not None:
        write(f"context after: ~{data['context_after_estimate']:,} (modelled as the what-if replay models it)")
    real = data["real"]
    if real is not None:
        after = (
            f"{real['context_after']:,} sent with call {real['context_after_call']}"
            if real["context_after"]
            else "not recorded"
        )
        size = real["summary_tokens"]
        summary = f"~{size:,} tokens (estimated)" if size is not None else "not readable"
        write(f"really compacted here ({real['trigger'] or 'recorded'}): summary {summary}, context after {after}")
    for segment in preview.segments:
        span = f"[{segment.start}, {segment.end})"
        write(f"  {segment.name}: {segment.count} messages {span} ≈{segment.tokens:,} tokens")
    for request in data["requests"]:
        write(f"summarizer request {request['kind']}: {request['user_chars']:,} characters, sha256 {request['sha256']}")
