from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from compaction.strategies.registry import EDITABLE, STRATEGY_NAMES
from sessions_app import run_selectors, run_services, selectors


class Command(BaseCommand):
    help = (
        "Preview (--dry-run) or run a compaction of one session's main chain with a strategy. "
        "A real run calls the Anthropic API when ANTHROPIC_API_KEY is set, else the offline summarizer."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or a source file path")
        parser.add_argument("--strategy", choices=STRATEGY_NAMES, help="default: the session's own agent")
        parser.add_argument("--at", type=int, help="message position in the main chain (default: the end)")
        parser.add_argument("--call", type=int, help="instead of --at: the moment main API call N answered")
        parser.add_argument("--start", type=int, help="move the cut by hand: first summarised message")
        parser.add_argument("--end", type=int, help="move the cut by hand: first message kept after the summary")
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a strategy parameter (repeatable): " + "; ".join(f"{k}: {', '.join(v)}" for k, v in EDITABLE.items()),
        )
        parser.add_argument("--dry-run", action="store_true", help="show the preview only; call no summarizer")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            session = selectors.resolve_session(ref=options["session"])
        except selectors.SessionNotFound as exc:
            raise CommandError(str(exc)) from None
        overrides: dict[str, Any] = {}
        for item in options["param"]:
            name, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--param takes NAME=VALUE, not {item!r}")
            overrides[name.strip()] = value.strip()
        strategy = options["strategy"] or run_selectors.default_strategy(session)
        unknown = set(overrides) - set(EDITABLE[strategy])
        if unknown:
            raise CommandError(f"{strategy} has no parameter {', '.join(sorted(unknown))}")
        preview = run_selectors.build_preview(
            session=session,
            strategy=strategy,
            overrides=overrides,
            at=options["at"],
            call=options["call"],
            start=options["start"],
            end=options["end"],
        )
        if preview.error:
            raise CommandError(preview.error)
        if options["dry_run"]:
            self._show_preview(preview, as_json=options["json"])
            return
        try:
            run = run_services.run_now(preview=preview, user=None)
        except run_services.RunRefused as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(orjson.dumps(run_selectors.run_json(run), option=orjson.OPT_INDENT_2).decode())
        else:
            label = " (offline summarizer)" if run.offline else ""
            self.stdout.write(f"run {run.pk}: {run.status}{label}, model {run.model}")
            if run.error:
                self.stdout.write(f"error: {run.error}")
            if run.summary:
                self.stdout.write(run.summary)
        if run.status != run.Status.SUCCEEDED:
            raise CommandError(f"run {run.pk} failed: {run.error}")

    def _show_preview(self, preview: run_selectors.Preview, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(orjson.dumps(run_selectors.preview_json(preview), option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(f"{preview.label} at {preview.at} of {preview.total} messages")
        reason = preview.decision.reason if preview.decision else ""
        self.stdout.write(f"should compact: {'yes' if preview.should_compact else 'no'} ({reason})")
        self.stdout.write(f"tokens before {preview.tokens_before:,}, after (estimate) {preview.tokens_after:,}")
        if preview.refused:
            self.stdout.write(f"cut refused: {preview.refused}")
        for segment in preview.segments:
            span = f"[{segment.start}, {segment.end})"
            self.stdout.write(f"  {segment.name}: {segment.count} messages {span} ≈{segment.tokens:,} tokens")
        if preview.prune:
            self.stdout.write(f"  prune: {len(preview.prune)} tool results")
        for request in preview.requests:
            self.stdout.write(f"--- {request.kind} (max_tokens {request.max_tokens}) ---")
            self.stdout.write(request.user_content)
