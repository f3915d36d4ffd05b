"""Tasks queued before they moved next to the work they run (``sessions_app.tasks`` is gone) keep running.

Each write module now declares the tasks that continue its own work, so it enqueues them without importing a module
above it. A task still waiting in the queue names its old path, so every row is renamed here: the waiting ones to
run, the failed ones so that the sweep still counts them (it retries a failing estimate only a few times).
"""

from django.db import migrations

MOVED = {
    "sessions_app.tasks.estimate_tokens": "sessions_app.services.estimate_tokens_task",
    "sessions_app.tasks.index_search": "sessions_app.services.index_search_task",
    "sessions_app.tasks.analyse_session": "sessions_app.services.analyse_session_task",
    "sessions_app.tasks.run_compaction": "sessions_app.run_services.run_compaction_task",
    "sessions_app.tasks.import_upload": "sessions_app.uploads.import_upload_task",
}


def rename_waiting_tasks(apps, schema_editor):
    results = apps.get_model("django_tasks_database", "DBTaskResult")
    for old, new in MOVED.items():
        results.objects.filter(task_path=old).update(task_path=new)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0022_calls_numbered_from_one"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [migrations.RunPython(rename_waiting_tasks, migrations.RunPython.noop)]
