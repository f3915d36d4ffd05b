"""Usage cells (``models.UsageCell``): the Usage report's sums, kept by the import; filled here for every session
already stored, from its calls and its ``progress`` records (``usage_cells.keep_usage_cells``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

from sessions_app.usage_cells import keep_usage_cells


def fill_usage_cells(apps: Any, schema_editor: Any) -> None:
    store = SimpleNamespace(
        ApiCall=apps.get_model("sessions_app", "ApiCall"),
        Message=apps.get_model("sessions_app", "Message"),
        UsageCell=apps.get_model("sessions_app", "UsageCell"),
    )
    session_model = apps.get_model("sessions_app", "Session")
    for session in session_model.objects.only("pk", "started_at").iterator():
        keep_usage_cells(session=session, store=store)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0027_apicall_carried")]

    operations = [
        migrations.CreateModel(
            name="UsageCell",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("quarter", models.DateTimeField(null=True)),
                ("model", models.CharField(blank=True, max_length=200)),
                ("side", models.CharField(max_length=10)),
                ("long_context", models.BooleanField(default=False)),
                ("tier_start", models.PositiveIntegerField(null=True)),
                ("calls", models.PositiveIntegerField(default=0)),
                ("input_tokens", models.PositiveBigIntegerField(default=0)),
                ("cache_creation_tokens", models.PositiveBigIntegerField(default=0)),
                ("cache_creation_1h_tokens", models.PositiveBigIntegerField(default=0)),
                ("cache_read_tokens", models.PositiveBigIntegerField(default=0)),
                ("output_tokens", models.PositiveBigIntegerField(default=0)),
                (
                    "session",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="usage_cells",
                        to="sessions_app.session",
                    ),
                ),
            ],
            options={
                "ordering": ["session", "quarter", "model", "side", "long_context"],
                "indexes": [models.Index(fields=["quarter"], name="usagecell_quarter")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "quarter", "model", "side", "long_context"), name="usagecell_unique_key"
                    )
                ],
            },
        ),
        migrations.RunPython(fill_usage_cells, migrations.RunPython.noop),
    ]
