"""preview / replay / diagnose management commands on imported real samples, and their error messages."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command

from compaction.replay import api_steps
from compaction.transcript import MAIN
from sessions_app import services
from sessions_app.selectors import conversation as conversation_selectors
from sessions_app.selectors import sessions as session_selectors
from tests.conftest import SHARED

CLAUDE_SAMPLES = SHARED / "samples" / "claude-code"
KLAUDE_SESSIONS = (
    SHARED / "samples" / "klaude-code" / "dot-klaude" / "projects" / "home-dev-projects-webapp" / "sessions"
)
KLAUDE_COMPACTED = KLAUDE_SESSIONS / "bd8ec9a1f80345edbd7c9ec7081ab44d" / "events.jsonl"

pytestmark = pytest.mark.django_db


def imported(path: Path) -> int:
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport), outcome
    assert outcome.session is not None
    return outcome.session


def run_json(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


def test_klaude_preview_before_the_recorded_compaction_gives_its_first_kept() -> None:
    session_id = imported(KLAUDE_COMPACTED)
    messages = conversation_selectors.conversation(
        session=session_selectors.get_session(session_id=session_id), agent=MAIN
    )
    entry_position = next(i for i, m in enumerate(messages) if m.raw_type == "CompactionEntry")
    expected = messages[entry_position].data["item"]["first_kept_index"]  # 40 in samples/klaude-code/README.md
    last_call = [s for s in api_steps(messages) if s.end <= entry_position][-1].number
    data = run_json("preview", str(session_id), "--strategy", "klaude-code", "--at", str(last_call))
    assert data["cut"]["first_kept"] == expected == 40
    assert data["at"] == entry_position
    assert data["should_compact"] is True
    assert data["strategy"] == "klaude-code"
    assert data["after_call"] == last_call
    assert data["requests"] and all(r["user_chars"] > 0 for r in data["requests"])
    assert set(data) >= {"prune", "tokens_before", "tokens_after_estimate"}


def test_preview_text_form_and_parameters() -> None:
    session_id = imported(KLAUDE_COMPACTED)
    out = StringIO()
    call_command(
        "preview", str(session_id), "--strategy", "klaude-code", "--param", "keep_recent_tokens=4096", stdout=out
    )
    text = out.getvalue()
    assert "cut: summarise messages" in text
    assert "summarizer request update_history" in text
    # A smaller context limit moves klaude's threshold to limit − reserve (klaude-code doc §3.2-3.3): pick a
    # call whose recorded context lies between 100,000 − 16,384 and the default 200,000 − 16,384.
    messages = conversation_selectors.conversation(
        session=session_selectors.get_session(session_id=session_id), agent=MAIN
    )
    call = next(s.number for s in api_steps(messages) if 100_000 - 16_384 < s.context < 200_000 - 16_384)
    after_call = ("--at", str(call))
    default = run_json("preview", str(session_id), "--strategy", "klaude-code", *after_call)
    smaller = run_json(
        "preview", str(session_id), "--strategy", "klaude-code", "--context-limit", "100000", *after_call
    )
    assert (default["should_compact"], smaller["should_compact"]) == (False, True)


def test_replay_and_diagnose_on_a_claude_code_session() -> None:
    session_id = imported(CLAUDE_SAMPLES / "entirecli_f9f6f611b469-0_full.jsonl")
    replayed = run_json("replay", str(session_id), "--strategy", "claude-code")
    assert replayed["strategy"] == "claude-code"
    compactions = [e for e in replayed["events"] if e["kind"] == "compaction"]
    assert compactions and compactions[0]["tokens_before"] >= replayed["thresholds"]["autocompact"]
    assert len(replayed["series"]) == len(replayed["recorded"]) > 0
    diagnosed = run_json("diagnose", str(session_id))
    [compaction] = diagnosed["compactions"]
    assert (compaction["pre_tokens"], compaction["last_context"]) == (176_700, 150_210)  # claude-code.md §7
    assert diagnosed["verdict"].startswith("Context crossed")
    out = StringIO()
    call_command("diagnose", str(session_id), stdout=out)
    assert "176,700" in out.getvalue()


def test_replay_other_strategies_on_the_same_session() -> None:
    session_id = imported(CLAUDE_SAMPLES / "entirecli_a5d8ec9bae67-0_full.jsonl")
    for name in ("klaude-code", "khaelor"):
        data = run_json("replay", str(session_id), "--strategy", name)
        over = {e["after_call"] for e in data["events"] if e["kind"] == "overflow"}
        # A call over the window overflowed: the overflow is after the call before it.
        assert all(call - 1 in over for call, value in data["series"] if value > data["window"])
        assert data["compactions"] >= 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["preview", "999999", "--strategy", "claude-code"], "No session"),
        (["preview", "{session}", "--strategy", "gemini"], "Unknown strategy 'gemini'"),
        (["preview", "{session}", "--strategy", "klaude-code", "--param", "colour=blue"], "Unknown parameter"),
        (["preview", "{session}", "--strategy", "klaude-code", "--param", "reserve_tokens=lots"], "reserve_tokens"),
        (["preview", "{session}", "--strategy", "klaude-code", "--param", "reserve_tokens"], "NAME=VALUE"),
        (["preview", "{session}", "--strategy", "klaude-code", "--at", "5000"], "call 5000 does not exist"),
        (["preview", "{session}", "--strategy", "klaude-code", "--context-limit", "-5"], "positive"),
        (["replay", "{session}", "--strategy", "nope"], "Unknown strategy"),
        (["diagnose", "no-such-session"], "No session"),
    ],
)
def test_bad_input_is_a_clear_command_error(args: list[str], message: str) -> None:
    session_id = imported(KLAUDE_COMPACTED)
    with pytest.raises(CommandError, match=message):
        call_command(*[a.replace("{session}", str(session_id)) for a in args], stdout=StringIO())
