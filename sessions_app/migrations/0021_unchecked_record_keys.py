"""Less work per imported record and call, the same answers.

- The database no longer checks a record's or a call's key to its session (see ``Message.session``): only an
  import writes them, for the session it created or read in the same transaction, and the ORM's cascade deletes
  them with it. On PostgreSQL the checks were a third of the server's work storing the 53 MB session.
- A record's file key loses its index: records are read by session, and the one delete by file names the session.

SQLite cannot drop a foreign key in place: Django rebuilds the tables, which drops the triggers that keep the
FTS5 index in step with the records (0017); they are made again after the rebuilds, either way (as in 0019).
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


def _key(*, to: str, related_name: str, checked: bool) -> models.ForeignKey:
    return models.ForeignKey(
        db_constraint=checked,
        db_index=False,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to=to,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0020_stored_main_chain"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, _fts_triggers),  # going back: after the rebuild below
        migrations.AlterField(
            model_name="apicall",
            name="session",
            field=_key(to="sessions_app.session", related_name="calls", checked=False),
        ),
        migrations.AlterField(
            model_name="message",
            name="session",
            field=_key(to="sessions_app.session", related_name="messages", checked=False),
        ),
        migrations.AlterField(
            model_name="message",
            name="file",
            field=_key(to="sessions_app.sourcefile", related_name="+", checked=False),
        ),
        migrations.RunPython(_fts_triggers, migrations.RunPython.noop),
    ]
