"""Imported through the database, klaude-code sessions still decide as klaude-code 2.8.1 does (the goldens).

The pages, JSON twins and the worker read a session from its stored rows (``selectors.conversation.conversation``)
and the session's stored facts (``selectors.conversation.session_info``), not from the parser: one session per golden
scenario goes through the import and is checked against what klaude itself decided.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compaction.strategies.klaude_code import KlaudeCodeStrategy, KlaudeParams
from compaction.strategies.registry import build_strategy
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from tests.compaction.goldens.klaude import sessions
from tests.compaction.goldens.klaude.checks import assert_decides_as_klaude, goldens

pytestmark = pytest.mark.django_db

# The first session of every scenario (seeds cycle through them).
SEEDS = list(range(len(sessions.SCENARIOS)))


@pytest.mark.parametrize("seed", SEEDS, ids=[sessions.SCENARIOS[s] for s in SEEDS])
def test_an_imported_session_decides_as_klaude(seed: int, tmp_path: Path) -> None:
    golden = goldens()[seed]
    session = sessions.generate(seed)
    folder = tmp_path / f"s{seed:04d}"
    folder.mkdir()
    (folder / "events.jsonl").write_bytes(session.events)
    if session.meta is not None:
        (folder / "meta.json").write_text(json.dumps(session.meta))
    outcome = services.import_file(path=folder / "events.jsonl")
    assert isinstance(outcome, services.FileImport), outcome
    # Every line klaude's reload drops for a break only str.splitlines() sees is reported with its number.
    physical = session.events.split(b"\n")
    dropped = {
        number
        for number, items in enumerate(golden["items_per_line"], start=1)
        if items == 0 and any(sep.encode() in physical[number - 1] for sep in ("\u2028", "\u2029", "\u0085", "\r"))
    }
    assert {e["line"] for e in outcome.errors if "splitlines" in e["message"]} == dropped
    assert bool(dropped) is (golden["scenario"] in ("unicode-line-breaks", "file-quirks"))

    assert outcome.session is not None
    stored = models.Session.objects.get(pk=outcome.session)
    strategy = build_strategy("klaude-code", info=conversation_selectors.session_info(session=stored), overrides={})
    assert isinstance(strategy, KlaudeCodeStrategy)
    strategy.params = KlaudeParams.for_limit(session.config_limit)  # the model config's limit: klaude's input
    assert_decides_as_klaude(strategy, conversation_selectors.conversation(session=stored), golden)
