from __future__ import annotations

from typing import Any

import orjson
from django.core.management.base import CommandError, CommandParser

from sessions_app import models, run_services
from sessions_app.management.commands._analysis import resolve
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import labs as lab_selectors
from sessions_app.selectors import previews as preview_selectors


class Command(SessionCommand):
    help = (
        "The compaction-instructions lab: run instruction variants at chosen points (queued for the worker, or now "
        "with --now) and compare them on size, cost, the checklist score, the claims score and the rules kept or "
        "lost; --show KEY prints a lab."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", nargs="?", help="session id, the agent's session id, or an imported file's path")
        parser.add_argument("--strategy", default=None, help="default: the session's own agent")
        parser.add_argument("--at", type=int, action="append", default=[], metavar="CALL", help="a point (repeatable)")
        parser.add_argument("--variant", action="append", default=[], metavar="TEXT", help="instructions (repeatable)")
        parser.add_argument("--baseline", action="store_true", help="also the agent's own prompt alone")
        parser.add_argument("--now", action="store_true", help="run the summaries in this process, not the worker")
        parser.add_argument("--show", metavar="KEY", help="print the lab KEY")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["show"]
        if not key:
            if not options["session"]:
                raise CommandError("Name a session (or --show KEY).")
            session = resolve(options["session"])
            variants = list(options["variant"]) + ([""] if options["baseline"] else [])
            try:
                key = run_services.start_lab(
                    session=session,
                    strategy=options["strategy"] or preview_selectors.default_strategy(session),
                    points=list(options["at"]),
                    variants=variants,
                    user=None,
                )
            except run_services.RunRefused as exc:
                raise CommandError(str(exc)) from None
            if options["now"]:
                for run_id in models.CompactionRun.objects.filter(lab=key).order_by("pk").values_list("pk", flat=True):
                    run_services.execute_run(run_id=run_id)
        try:
            found = lab_selectors.lab(key=key)
        except lab_selectors.LabNotFound as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(orjson.dumps(found.as_json(), option=orjson.OPT_INDENT_2).decode())
            return
        self.stdout.write(f"lab {found.key}: {found.strategy} at calls {', '.join(map(str, found.points))}")
        for variant in found.as_json()["variants"]:
            checklist = variant["checklist"]
            score = f"{checklist['found']}/{checklist['total']}" if checklist["total"] else "–"
            cost = f"${variant['cost_usd']:.4f}" if variant["cost_usd"] is not None else "–"
            text = variant["instructions"] or "(the agent's own prompt alone)"
            claims, rules = variant["claims"], variant["rules"]
            supported = f"{claims['supported']}/{claims['decided']}" if claims and claims["decided"] else "–"
            kept = f"{rules['kept']} kept, {rules['lost']} lost" if rules else "–"
            self.stdout.write(
                f"  variant {variant['variant']}: {variant['finished']}/{len(variant['runs'])} finished, "
                f"{variant['summary_tokens']:,} summary tokens, {cost}, checklist {score}, claims {supported}, "
                f"rules {kept}: {text[:80]}"
            )
