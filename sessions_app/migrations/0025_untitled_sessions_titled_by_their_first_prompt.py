"""A session imported without a title (an agent that writes none, such as one titled by its id before) is titled
by its first real prompt, as an import titles it now (``compaction.transcript.prompt_title``).

Only untitled sessions are read, and only their first few prompts: a prompt that opens with a tag is one the agent
wrote (a slash command, injected context), which names nothing.
"""

from __future__ import annotations

from typing import Any

import orjson
from django.db import migrations

from compaction.transcript import prompt_title

PROMPTS_READ = 20  # per untitled session: enough to pass an agent's opening records, cheap on a large database


def title_untitled_sessions(apps: Any, schema_editor: Any) -> None:
    session_model = apps.get_model("sessions_app", "Session")
    message_model = apps.get_model("sessions_app", "Message")
    for session in session_model.objects.filter(title="").only("pk", "info").iterator():
        prompts = message_model.objects.filter(session_id=session.pk, agent="main", kind="prompt").order_by("seq")
        for blocks_json in prompts.values_list("blocks_json", flat=True)[:PROMPTS_READ]:
            blocks = orjson.loads(blocks_json or "[]")
            text = next((b.get("text", "").strip() for b in blocks if b.get("kind") == "text" and b.get("text")), "")
            if text and not text.startswith("<"):
                session.title = prompt_title(text)
                session.info = {**(session.info or {}), "title_from": "prompt"}
                session.save(update_fields=["title", "info"])
                break


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0024_stored_main_chain_as_json")]

    # Backwards the titles stay: a title is harmless to the code before.
    operations = [migrations.RunPython(title_untitled_sessions, migrations.RunPython.noop)]
