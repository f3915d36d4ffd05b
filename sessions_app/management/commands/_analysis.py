"""Shared plumbing of the preview / replay / diagnose commands: find the session, build the strategy.

Thin on purpose: the work is done by the pure code in ``compaction.replay`` and ``compaction.diagnose``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from compaction.strategies.base import Strategy
from compaction.strategies.registry import EDITABLE, STRATEGY_NAMES, build_strategy
from compaction.transcript import MAIN, Message, SessionInfo
from sessions_app import models, selectors

# The parameter each strategy calls its context window (compaction.strategies.registry.EDITABLE).
WINDOW_PARAMETER = {
    "claude-code": "auto_compact_window",
    "klaude-code": "context_limit",
    "khaelor": "context_window",
}


def add_strategy_arguments(parser: CommandParser) -> None:
    parser.add_argument("--strategy", required=True, help=f"one of {', '.join(STRATEGY_NAMES)}")
    parser.add_argument("--context-limit", type=int, default=None, help="the strategy's context window, in tokens")
    parser.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a strategy parameter (repeatable)"
    )


def load_session(ref: str) -> tuple[models.Session, SessionInfo, list[Message]]:
    try:
        session = selectors.resolve_session(ref=ref)
    except selectors.SessionNotFound as exc:
        raise CommandError(str(exc)) from None
    return session, selectors.session_info(session=session), selectors.conversation(session=session, agent=MAIN)


def strategy_from_options(name: str, *, info: SessionInfo, context_limit: int | None, params: list[str]) -> Strategy:
    if name not in STRATEGY_NAMES:
        raise CommandError(f"Unknown strategy {name!r}: choose one of {', '.join(STRATEGY_NAMES)}.")
    overrides: dict[str, Any] = {}
    for item in params:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CommandError(f"--param {item!r} must look like key=value.")
        if key not in EDITABLE[name]:
            raise CommandError(f"Unknown parameter {key!r} for {name}: choose from {', '.join(EDITABLE[name])}.")
        overrides[key] = value.strip()
    if context_limit is not None:
        if context_limit <= 0:
            raise CommandError("--context-limit must be a positive number of tokens.")
        overrides[WINDOW_PARAMETER[name]] = context_limit
    try:
        return build_strategy(name, info=info, overrides=overrides)
    except (TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None
