from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app import run_services
from sessions_app.management.commands._analysis import add_point_arguments, add_strategy_arguments, resolve
from sessions_app.management.commands._base import SessionCommand
from sessions_app.management.commands.preview import build_from_options, write_preview
from sessions_app.selectors import previews as preview_selectors
from sessions_app.selectors import runs as run_selectors


class Command(SessionCommand):
    help = (
        "Preview (--dry-run) or run a compaction of one session's main chain with a strategy. "
        "A real run calls the Anthropic API when ANTHROPIC_API_KEY is set, else the offline summarizer."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or a source file path")
        add_strategy_arguments(parser, required=False)
        add_point_arguments(parser)
        parser.add_argument("--dry-run", action="store_true", help="show the preview only; call no summarizer")
        parser.add_argument(
            "--model",
            dest="summary_model",
            default=None,
            help="summarise with this model instead of the agent's own (SUMMARY_MODEL when the agent's is unknown)",
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        session = resolve(options["session"])
        preview = build_from_options(session, options)
        if options["dry_run"]:
            if options["json"]:
                data = preview_selectors.preview_json(preview)
                self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
            else:
                write_preview(self.stdout.write, preview)
                choice = preview_selectors.summary_model_for(preview=preview, override=options["summary_model"])
                self.stdout.write(f"summary model: {choice.model} ({choice.note})")
                for request in preview.requests:
                    self.stdout.write(f"--- {request.kind} (max_tokens {request.max_tokens}) ---")
                    self.stdout.write(request.user_content)
            return
        try:
            run = run_services.run_now(preview=preview, user=None, model=options["summary_model"])
        except run_services.RunRefused as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(orjson.dumps(run_selectors.run_json(run), option=orjson.OPT_INDENT_2).decode())
        else:
            label = " (offline summarizer)" if run.offline else ""
            self.stdout.write(f"run {run.pk}: {run.status}{label}, model {run.model} ({run.model_note})")
            if run.error:
                self.stdout.write(f"error: {run.error}")
            if run.summary:
                self.stdout.write(run.summary)
        if run.status != run.Status.SUCCEEDED:
            raise CommandError(f"run {run.pk} failed: {run.error}")
