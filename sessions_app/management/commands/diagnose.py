from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from django.core.management.base import CommandParser

from compaction.diagnose import diagnose
from sessions_app.management.commands._analysis import load_session, resolve
from sessions_app.management.commands._base import SessionCommand
from sessions_app.selectors import calls as call_selectors
from sessions_app.selectors import diagnosis as diagnosis_selectors


class Command(SessionCommand):
    help = "Why a session's context grew: thresholds crossed, largest contributors, compactions, cache misses."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", help="session id, the agent's session id, or an imported file's path")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["json"]:
            # The report the page and its JSON twin serve, not a second computation of it: the one the worker
            # stored, read without the session's records (so a session over the memory budget has one too).
            session = resolve(options["session"])
            data = {
                "session": session.pk,
                **diagnosis_selectors.diagnosis(session=session),
                "recommendations": diagnosis_selectors.served_recommendations(session=session),
            }
            self.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2, default=str).decode())
            return
        session, info, messages = load_session(options["session"])
        result = diagnose(
            messages, diagnosis_selectors.context_events(session=session), info=info, prices=settings.MODEL_PRICES
        )
        peak = result.peak if result.has_usage else call_selectors.session_peak(session=session)
        self.stdout.write(f"session {session.pk}: {result.verdict}")
        for rec in result.recommendations:
            cost = f" (${rec.cost_usd:,.2f} at stake)" if rec.cost_usd else ""
            self.stdout.write(f"{rec.rank}. {rec.title}{cost}: {rec.finding}")
            self.stdout.write(f"   change: {rec.change}")
            for fix in rec.fixes:
                self.stdout.write(f"   paste into {fix.where}: {fix.text}")
            self.stdout.write(f"   {'replayed' if rec.proof else 'effect'}: {rec.effect}")
        for limit in result.limits:
            self.stdout.write(f"note: {limit}")
        self.stdout.write(
            f"window {result.window:,}{' (1M)' if result.is_1m_window else ''}; peak {peak.tokens:,} at call "
            f"{peak.call}; overflowed: {'yes' if result.overflowed else 'no'}"
        )
        for crossing in result.crossings:
            self.stdout.write(
                f"  crossed {crossing.line} ({crossing.threshold:,}) {'before' if crossing.before_call else 'at'} call "
                f"{crossing.call}: "
                f"{crossing.tokens:,} ({crossing.source})"
            )
        for row in result.compactions:
            gap = f", gap {row.gap:,} after call {row.last_call}" if row.gap is not None else ""
            self.stdout.write(f"  compaction ({row.trigger}) after call {row.after_call}: {row.pre_tokens}{gap}")
        for failure in result.failures:
            self.stdout.write(f"  {failure.kind} after call {failure.after_call}: followed by {failure.followed_by}")
        if result.contributors_by_tool:
            self.stdout.write(
                "largest tools: " + ", ".join(f"{r.tool} {r.chars:,} chars" for r in result.contributors_by_tool[:5])
            )
        if result.cache.misses:
            self.stdout.write(
                f"cache misses: {len(result.cache.misses)}, {result.cache.recreated_tokens:,} tokens re-created"
            )
        for note in result.notes:
            self.stdout.write(f"note: {note}")
