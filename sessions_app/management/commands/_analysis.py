"""Shared plumbing of the preview / replay / diagnose / compact commands: find the session, read the strategy.

Thin on purpose: the work is done by the pure code in ``compaction`` (preview, replay, diagnose).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from compaction.strategies.base import Strategy
from compaction.strategies.registry import STRATEGY_NAMES, WINDOW_PARAMETER, build_strategy, parse_parameters
from compaction.transcript import MAIN, Message, SessionInfo
from sessions_app import models
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import sessions as session_selectors


def add_strategy_arguments(parser: CommandParser, *, required: bool = True) -> None:
    parser.add_argument(
        "--strategy",
        required=required,
        help=f"one of {', '.join(STRATEGY_NAMES)}" + ("" if required else " (default: the session's own agent)"),
    )
    parser.add_argument("--context-limit", type=int, default=None, help="the strategy's context window, in tokens")
    parser.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE", help="a strategy parameter (repeatable)"
    )


def add_point_arguments(parser: CommandParser) -> None:
    """The point and the hand cut, always as main-chain API calls ("after call N")."""
    parser.add_argument("--at", type=int, default=None, metavar="CALL", help="after main-chain API call CALL")
    parser.add_argument(
        "--cut-start", type=int, default=None, metavar="CALL", help="hand cut: summarise from after call CALL"
    )
    parser.add_argument("--cut-end", type=int, default=None, metavar="CALL", help="hand cut: keep from after call CALL")


def resolve(ref: str) -> models.Session:
    try:
        return session_selectors.resolve_session(ref=ref)
    except session_selectors.SessionNotFound as exc:
        raise CommandError(str(exc)) from None


def load_session(ref: str) -> tuple[models.Session, SessionInfo, list[Message]]:
    session = resolve(ref)
    return (
        session,
        conversation_selectors.session_info(session=session),
        conversation_selectors.conversation(session=session, agent=MAIN),
    )


def overrides_from_options(name: str, *, context_limit: int | None, params: list[str]) -> dict[str, Any]:
    """The user's strategy parameters, parsed once for every command (the web form sends the same names)."""
    try:
        overrides: dict[str, Any] = dict(parse_parameters(name, params))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if context_limit is not None:
        if context_limit <= 0:
            raise CommandError("--context-limit must be a positive number of tokens.")
        overrides[WINDOW_PARAMETER[name]] = context_limit
    return overrides


def strategy_from_options(name: str, *, info: SessionInfo, context_limit: int | None, params: list[str]) -> Strategy:
    overrides = overrides_from_options(name, context_limit=context_limit, params=params)
    try:
        return build_strategy(name, info=info, overrides=overrides)
    except (TypeError, ValueError) as exc:
        raise CommandError(str(exc)) from None
