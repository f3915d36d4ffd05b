"""Reads for what the agent did after each real compaction (``compaction.after_compaction``): one session's, at
any number of calls, and the archive's totals per session."""

from __future__ import annotations

from typing import Any

import orjson
from django.db.models import F

from compaction.after_compaction import DEFAULT_CALLS
from compaction.rules import measure_after
from compaction.transcript import MAIN
from sessions_app import memory_budget, models
from sessions_app.selectors.conversation import conversation, session_info
from sessions_app.selectors.diagnosis import context_events, diagnosis


def after_compaction(*, session: models.Session, calls: int = DEFAULT_CALLS) -> dict[str, Any]:
    """The session's compactions and what followed each, over ``calls`` calls: at the default, the report stored with
    the diagnosis (the page, its JSON twin and the command read the same one); at another, measured now."""
    if calls == DEFAULT_CALLS:
        stored = diagnosis(session=session).get("after_compaction")
        if stored is not None:
            return stored
    messages = conversation(session=session, agent=MAIN)
    events = context_events(session=session, agent=MAIN)
    return measure_after(messages, events, info=session_info(session=session), calls=calls).as_json()


def archive_after_compaction() -> list[dict[str, Any]]:
    """One row per session with a compaction: its totals over ``DEFAULT_CALLS`` calls (or why there are none).

    The analyses the worker stored are read in one query; a session not analysed yet is measured now (a session
    over the memory budget says so instead)."""
    sessions = list(
        models.Session.objects.filter(has_compaction=True)
        .order_by("pk")
        .only("pk", "title", "format", "message_count", "updated_at", "size_bytes")
    )
    stored: dict[int, dict[str, Any]] = {}
    for session_id, data in models.SessionAnalysis.objects.filter(
        session__in=sessions, message_count=F("session__message_count")
    ).values_list("session_id", "diagnosis"):
        report = orjson.loads(bytes(data)) if data is not None else {}
        if "after_compaction" in report:
            stored[session_id] = report["after_compaction"]
    rows: list[dict[str, Any]] = []
    for session in sessions:
        row: dict[str, Any] = {"session": session.pk, "title": session.title, "format": session.format}
        found = stored.get(session.pk)
        if found is None:
            try:
                found = after_compaction(session=session)
            except memory_budget.SessionTooLarge as exc:
                rows.append({**row, "totals": None, "note": exc.message})
                continue
        rows.append({**row, "calls": found["calls"], "totals": found["totals"]})
    return rows
