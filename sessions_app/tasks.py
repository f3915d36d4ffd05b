"""Background work, run by ``manage.py db_worker`` (django-tasks-db). Tasks take only ids."""

from __future__ import annotations

from django.tasks import TaskContext, task

from sessions_app import services, sweeps


@task()
def estimate_tokens(session_id: int) -> int:
    """Store a tiktoken estimate for every message of a session that has none yet, then queue its analysis."""
    done = services.estimate_session_tokens(session_id=session_id)
    analyse_session.enqueue(session_id)
    return done


@task()
def index_search(session_id: int) -> int:
    """A large import's records in the search index (``services.index_search``)."""
    return services.index_search(session_id=session_id)


@task(takes_context=True)
def analyse_session(context: TaskContext, session_id: int) -> bool:
    """The composition at every call and the diagnosis verdict, stored (``services.analyse_session``); False when
    not needed. An analysis of the same session queued after this one makes it needless: a live session queues one
    per append, and each would analyse the whole session again (1.5 s on the 53 MB one) for a version the later one
    analyses anyway."""
    if sweeps.queued_after(
        task_path=analyse_session.module_path, first_arg=session_id, after=context.task_result.enqueued_at
    ):
        return False
    return services.analyse_session(session_id=session_id) is not None


@task()
def run_compaction(run_id: int) -> str:
    """Summarise one queued compaction run; returns its final status."""
    from sessions_app import run_services

    return str(run_services.execute_run(run_id=run_id).status)


@task()
def import_upload(upload_id: int) -> str:
    """Import the files of one browser upload; returns its final status."""
    from sessions_app import uploads

    return str(uploads.run_upload(upload_id=upload_id).status)
