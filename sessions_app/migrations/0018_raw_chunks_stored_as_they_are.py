"""PostgreSQL: the stored original bytes (``RawChunk.data``) are zstd frames the import compressed itself; the
server's own compression of them (pglz, tried on every value over 2 kB) found nothing to gain and cost about a
fifth of the server's time in the 53 MB import. EXTERNAL keeps them out of line, as they are. SQLite has no
such setting.
"""

from typing import Any

from django.db import migrations

TABLE = "sessions_app_rawchunk"


def _forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN data SET STORAGE EXTERNAL")


def _backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN data SET STORAGE EXTENDED")


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0017_search_index_by_worker_on_sqlite"),
    ]

    operations = [migrations.RunPython(_forward, _backward)]
