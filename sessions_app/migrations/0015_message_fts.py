"""SQLite: an FTS5 index over ``Message.search_text``. The import adds every record it stored in one
statement at its end (services ``_index_text``; a trigger per row doubled the import's time); triggers
follow updates and deletes. PostgreSQL has its GIN index (0010) and gets nothing.

The table is an external-content FTS5 table: it stores only the index, the text stays in the message row.
Tokenizer ``unicode61`` (words, case- and diacritic-insensitive), as PostgreSQL's 'simple' configuration
reads words. A later migration that makes Django rebuild the message table on SQLite (some AlterField) drops
these triggers: recreate them there (tests/sessions_app/test_search.py checks the index against the rows).
"""

from typing import Any

from django.db import migrations

FTS = "sessions_app_message_fts"
MESSAGE = "sessions_app_message"

CREATE = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(search_text, content='{MESSAGE}', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {MESSAGE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF search_text ON {MESSAGE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, search_text) VALUES ('delete', old.id, old.search_text); "
    f"INSERT INTO {FTS}(rowid, search_text) VALUES (new.id, new.search_text); END",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",  # the records already stored
]
DROP = [f"DROP TRIGGER IF EXISTS {FTS}_{name}" for name in ("delete", "update")] + [f"DROP TABLE IF EXISTS {FTS}"]


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in CREATE:
            schema_editor.execute(sql)


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for sql in DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0014_session_list_index_stored_diagnosis"),
    ]

    operations = [migrations.RunPython(_create, _drop)]
