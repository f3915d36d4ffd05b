"""Less work per imported record and call, the same answers.

- The database no longer checks a record's or a call's key to its file, only the one to its session (see
  ``Message.file``): on PostgreSQL the second check per row cost the 53 MB import 0.05 s.
- Indexes that others already cover are gone: the session key's own (``message_unique_seq``,
  ``message_agent_seq`` and ``apicall_unique_index`` start with it), and PostgreSQL's LIKE-capable copy of the
  uuid index (only equality is asked). On PostgreSQL they cost the server 11 % of the records' COPY.

SQLite cannot drop a foreign key in place: Django rebuilds the tables, which drops the triggers that keep the
FTS5 index in step with the records (0017); they are made again after the rebuilds, either way.
"""

import importlib
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

FTS_TRIGGERS = importlib.import_module("sessions_app.migrations.0017_search_index_by_worker_on_sqlite")


def _fts_triggers(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in FTS_TRIGGERS.DROP + FTS_TRIGGERS.CREATE:
            schema_editor.execute(sql)


def _file_key(*, checked: bool) -> models.ForeignKey:
    return models.ForeignKey(
        db_constraint=checked,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to="sessions_app.sourcefile",
    )


def _session_key(*, related_name: str) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="sessions_app.session",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0018_raw_chunks_stored_as_they_are"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, _fts_triggers),  # going back: after the rebuild below
        migrations.AlterField(model_name="apicall", name="file", field=_file_key(checked=False)),
        migrations.AlterField(model_name="message", name="file", field=_file_key(checked=False)),
        migrations.AlterField(model_name="apicall", name="session", field=_session_key(related_name="calls")),
        migrations.AlterField(model_name="message", name="session", field=_session_key(related_name="messages")),
        migrations.AlterField(model_name="message", name="uuid", field=models.CharField(blank=True, max_length=100)),
        migrations.AddIndex(model_name="message", index=models.Index(fields=["uuid"], name="message_uuid")),
        migrations.RunPython(_fts_triggers, migrations.RunPython.noop),
    ]
