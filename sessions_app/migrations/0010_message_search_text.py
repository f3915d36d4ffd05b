from typing import Any

import orjson
from django.db import migrations, models

from sessions_app.search_text import search_text

# The index the search uses on PostgreSQL ("simple": no stemming, so a phrase matches as written,
# in any language); SQLite scans the plain column.
_PG_INDEX = (
    "CREATE INDEX sessions_app_message_search_gin ON sessions_app_message "
    "USING gin (to_tsvector('simple', search_text))"
)


def _gin_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_PG_INDEX)


def _drop_gin_index(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS sessions_app_message_search_gin")


def _fill(apps: Any, schema_editor: Any) -> None:
    message = apps.get_model("sessions_app", "Message")
    batch = []
    for row in message.objects.exclude(kind="bookkeeping").only("id", "blocks_json").iterator(chunk_size=500):
        row.search_text = search_text(orjson.loads(row.blocks_json))
        batch.append(row)
        if len(batch) >= 500:
            message.objects.bulk_update(batch, ["search_text"])
            batch = []
    message.objects.bulk_update(batch, ["search_text"])


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0009_sourcefile_unique_content"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop),
        migrations.RunPython(_gin_index, _drop_gin_index),
    ]
