"""SQLite: a large import's records reach the FTS5 index (0015) through the task worker, as on PostgreSQL (0016),
so the import no longer pays for it (about 0.16 s of the 53 MB import). Until then some records are not in the
index, and an external-content FTS5 table must never be told to delete a row it does not hold (its index would
no longer match): the triggers now follow only the rows it holds, found in its docsize table.
"""

from typing import Any

from django.db import migrations

FTS = "sessions_app_message_fts"
MESSAGE = "sessions_app_message"
INDEXED = f"EXISTS (SELECT 1 FROM {FTS}_docsize d WHERE d.id = old.id)"

DROP = [f"DROP TRIGGER IF EXISTS {FTS}_{name}" for name in ("delete", "update")]
CREATE = [
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGE} WHEN {INDEXED} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF search_text ON {MESSAGE} WHEN {INDEXED} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); "
    f"INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END",
]
# 0015's triggers, for going back.
CREATE_0015 = [
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF search_text ON {MESSAGE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); "
    f"INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END",
]


def _forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in DROP + CREATE:
            schema_editor.execute(sql)


def _backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in DROP + CREATE_0015:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0016_search_index_by_worker"),
    ]

    operations = [migrations.RunPython(_forward, _backward)]
