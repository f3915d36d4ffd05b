"""PostgreSQL: the search index moves from an expression GIN index on the message table (0010) to a table of
its own (``sessions_app_message_tsv``: one tsvector per record, GIN-indexed), filled by the task worker after
a large import (services ``index_search``), so the import no longer pays ``to_tsvector`` over every record
(about 1.8 s of a 53 MB import, docs/performance.md). ``Session.search_ready`` says whether every record of the
session is in the index; the search names the sessions still being indexed.

Also on PostgreSQL: the record's large text columns are compressed with lz4 instead of pglz where the server
has it (new values only): reading the 53 MB session's main chain back (a process's first preview) took
67-97 ms against 99-162 ms in psql, and the import no longer (paired runs, load 4-5: 2.35-3.65 s against
2.80-3.44 s).

Triggers keep the table true to the message table: a record deleted or truncated leaves it, a record whose
search text changes is indexed again. SQLite keeps its FTS5 index (0015), filled by the import itself.
"""

from typing import Any

from django.db import migrations, models

TSV = "sessions_app_message_tsv"
MESSAGE = "sessions_app_message"

# The words of a record as SQLite's FTS5 (unicode61) reads them: punctuation separates words, so a part of a path
# or a dotted name is found on both databases (PostgreSQL's parser keeps "/a/b/c.md" as one token). 'simple':
# no stemming, a word matches as written.
WORDS = "sessions_app_search_words"
CREATE = [
    f"CREATE FUNCTION {WORDS}(text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
    "SELECT to_tsvector('simple'::regconfig, regexp_replace($1, '[[:punct:][:space:]]+', ' ', 'g')) $$",
    f"CREATE TABLE {TSV} (id bigint PRIMARY KEY, tsv tsvector NOT NULL)",
    f"INSERT INTO {TSV} (id, tsv) SELECT id, {WORDS}(search_text) FROM {MESSAGE}",
    f"CREATE INDEX {TSV}_gin ON {TSV} USING gin (tsv)",
    "DROP INDEX IF EXISTS sessions_app_message_search_gin",
    f"CREATE FUNCTION {TSV}_gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"DELETE FROM {TSV} t USING gone g WHERE t.id = g.id; RETURN NULL; END $$",
    f"CREATE TRIGGER {TSV}_delete AFTER DELETE ON {MESSAGE} REFERENCING OLD TABLE AS gone "
    f"FOR EACH STATEMENT EXECUTE FUNCTION {TSV}_gone()",
    f"CREATE FUNCTION {TSV}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"TRUNCATE {TSV}; RETURN NULL; END $$",
    f"CREATE TRIGGER {TSV}_truncate AFTER TRUNCATE ON {MESSAGE} FOR EACH STATEMENT EXECUTE FUNCTION {TSV}_truncate()",
    # Row-level: a statement trigger cannot name its column, and the token estimates update every row.
    f"CREATE FUNCTION {TSV}_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"UPDATE {TSV} SET tsv = {WORDS}(NEW.search_text) WHERE id = NEW.id; "
    "RETURN NULL; END $$",
    f"CREATE TRIGGER {TSV}_update AFTER UPDATE OF search_text ON {MESSAGE} FOR EACH ROW "
    f"WHEN (OLD.search_text IS DISTINCT FROM NEW.search_text) EXECUTE FUNCTION {TSV}_changed()",
]
DROP = [
    f"DROP TRIGGER IF EXISTS {TSV}_delete ON {MESSAGE}",
    f"DROP TRIGGER IF EXISTS {TSV}_truncate ON {MESSAGE}",
    f"DROP TRIGGER IF EXISTS {TSV}_update ON {MESSAGE}",
    f"DROP FUNCTION IF EXISTS {TSV}_gone()",
    f"DROP FUNCTION IF EXISTS {TSV}_truncate()",
    f"DROP FUNCTION IF EXISTS {TSV}_changed()",
    f"DROP TABLE IF EXISTS {TSV}",
    f"DROP FUNCTION IF EXISTS {WORDS}(text)",
    f"CREATE INDEX sessions_app_message_search_gin ON {MESSAGE} USING gin (to_tsvector('simple', search_text))",
]


LZ4_COLUMNS = ("blocks_json", "data_json", "raw", "search_text")


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for sql in CREATE:
            schema_editor.execute(sql)
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
            )
            if cursor.fetchone():  # a server built without lz4 keeps pglz
                columns = ", ".join(f"ALTER COLUMN {c} SET COMPRESSION lz4" for c in LZ4_COLUMNS)
                schema_editor.execute(f"ALTER TABLE {MESSAGE} {columns}")


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        columns = ", ".join(f"ALTER COLUMN {c} SET COMPRESSION DEFAULT" for c in LZ4_COLUMNS)
        schema_editor.execute(f"ALTER TABLE {MESSAGE} {columns}")
        for sql in DROP:
            schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0015_message_fts"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="search_ready",
            field=models.BooleanField(default=True),
        ),
        migrations.RunPython(_create, _drop),
    ]
