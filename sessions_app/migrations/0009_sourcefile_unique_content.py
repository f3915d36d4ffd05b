# Its own migration, so its own transaction: on PostgreSQL an index cannot be built after rows were deleted in
# the same transaction (0005 removes duplicate copies first).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_hostile_input_and_workers"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="sourcefile",
            constraint=models.UniqueConstraint(
                condition=models.Q(("sha256", ""), _negated=True),
                fields=("sha256", "size"),
                name="sourcefile_unique_content",
            ),
        ),
    ]
