"""Migration 0025: a session imported untitled is titled by its first real prompt, cut at a word."""

from __future__ import annotations

import orjson
import pytest

BEFORE = "0024_stored_main_chain_as_json"
AFTER = "0025_untitled_sessions_titled_by_their_first_prompt"


@pytest.mark.django_db(transaction=True)
def test_an_untitled_session_is_titled_by_its_first_real_prompt(migrate_to) -> None:
    old = migrate_to(BEFORE)
    session_model = old.get_model("sessions_app", "Session")
    untitled = session_model.objects.create(format="codex", external_id="019a7ae6-uuid")
    titled = session_model.objects.create(format="codex", title="Mine")
    message = old.get_model("sessions_app", "Message")
    for session in (untitled, titled):
        file = old.get_model("sessions_app", "SourceFile").objects.create(
            session=session, path=f"{session.pk}.jsonl", size=session.pk, sha256="0" * 64
        )
        for seq, text in enumerate(["<command-name>/clear</command-name>", "Why do " + "the jobs wait " * 12]):
            blocks = orjson.dumps([{"kind": "text", "text": text}]).decode()
            message.objects.create(session=session, file=file, seq=seq, line=seq + 1, role="user", kind="prompt",
                                   blocks_json=blocks)  # fmt: skip

    new = migrate_to(AFTER).get_model("sessions_app", "Session")
    title = new.objects.get(pk=untitled.pk).title
    assert title.startswith("Why do the jobs wait") and title.endswith("wait\u2026") and len(title) <= 120
    assert new.objects.get(pk=titled.pk).title == "Mine"
