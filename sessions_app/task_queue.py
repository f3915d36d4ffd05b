"""What the task queue (django-tasks-db's table) holds: which ids tasks are still to work on.

Read by the tasks themselves and by the sweeps, so it imports neither: a task's path is passed in.
"""

from __future__ import annotations

from datetime import datetime

from django.tasks import TaskResultStatus
from django_tasks_db.models import DBTaskResult


def pending_task_args(task_path: str) -> set[int]:
    """First arguments of the tasks of ``task_path`` still to run or running (the id they work on)."""
    pending = DBTaskResult.objects.filter(
        task_path=task_path, status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING]
    ).values_list("args_kwargs", flat=True)
    return {args["args"][0] for args in pending if args.get("args")}


def queued_after(*, task_path: str, first_arg: int, after: datetime | None) -> bool:
    """A task of ``task_path`` for ``first_arg`` waits to run, queued after ``after``."""
    if after is None:
        return False
    return DBTaskResult.objects.filter(
        task_path=task_path, status=TaskResultStatus.READY, enqueued_at__gt=after, args_kwargs__args__0=first_arg
    ).exists()
