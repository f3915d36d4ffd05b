"""The main chain a stored analysis keeps (``SessionAnalysis.conversation``) is JSON now, no longer a pickle.

Every blob stored before is cleared, so that nothing pickled stays in the database; the page that needs the chain
reads it from the records meanwhile (``selectors.conversation.stored_conversation``), and the task worker's sweep
analyses such a session again, which stores the chain as JSON (``sweeps.enqueue_missing_analyses``).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def clear_pickled_main_chains(apps: Any, schema_editor: Any) -> None:
    analysis = apps.get_model("sessions_app", "SessionAnalysis")
    analysis.objects.filter(conversation__isnull=False).update(conversation=None)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0023_tasks_beside_their_work")]

    # Backwards there is nothing to restore: the code before reads an analysis without its chain from the records.
    operations = [migrations.RunPython(clear_pickled_main_chains, migrations.RunPython.noop)]
