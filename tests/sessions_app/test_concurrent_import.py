"""Imports racing each other: the database, not a check before the insert, keeps one copy.

Threads each hold their own database connection and start together at a barrier, so on PostgreSQL the
transactions really overlap (SQLite serialises writers, which must give the same answer).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction

from sessions_app import models, services
from tests.helpers.claude_code_lines import small_session

pytestmark = pytest.mark.django_db(transaction=True)


def race(imports: list[tuple[Path, str | None]]) -> list[services.FileImport | services.Rejected]:
    barrier = threading.Barrier(len(imports))
    outcomes: list[services.FileImport | services.Rejected | BaseException] = [None] * len(imports)  # type: ignore[list-item]

    def one(index: int, path: Path, name: str | None) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes[index] = services.import_file(path=path, name=name)
        except BaseException as exc:  # reported below, in the test's thread
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i, path, name)) for i, (path, name) in enumerate(imports)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    assert not failures, failures
    return outcomes  # type: ignore[return-value]


def test_ten_concurrent_imports_of_one_file_give_one_session(tmp_path):
    path = small_session(tmp_path)
    outcomes = race([(path, None)] * 10)
    assert all(isinstance(o, services.FileImport) for o in outcomes), outcomes
    assert models.Session.objects.count() == 1
    assert models.SourceFile.objects.count() == 1
    assert models.Message.objects.count() == 4 and models.ApiCall.objects.count() == 2
    session_id = models.Session.objects.get().pk
    assert {o.session for o in outcomes if isinstance(o, services.FileImport)} == {session_id}
    assert sum(o.created for o in outcomes if isinstance(o, services.FileImport)) == 1


def test_ten_concurrent_uploads_of_the_same_content_give_one_session(tmp_path):
    original = small_session(tmp_path)
    copies = []
    for n in range(10):
        (tmp_path / f"c{n}").mkdir()
        copies.append((Path(shutil.copy(original, tmp_path / f"c{n}" / "s.jsonl")), f"upload:s-{n}.jsonl"))
    outcomes = race(copies)
    assert all(isinstance(o, services.FileImport) for o in outcomes), outcomes
    assert models.Session.objects.count() == 1 and models.SourceFile.objects.count() == 1


def test_the_database_refuses_a_second_copy_of_the_same_content(tmp_path):
    services.import_file(path=small_session(tmp_path))
    stored = models.SourceFile.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        models.SourceFile.objects.create(
            session=stored.session, agent="main", path="x", sha256=stored.sha256, size=stored.size
        )
    # Files still being imported have no hash yet: any number of them may exist at once.
    for n in range(2):
        models.SourceFile.objects.create(session=stored.session, agent="main", path=f"in-progress-{n}", sha256="")


def test_the_migration_keeps_one_copy_of_content_stored_twice_before():
    from django.db.migrations.executor import MigrationExecutor

    before = [("sessions_app", "0007_usage_cache_lifetimes")]
    after = [("sessions_app", "0009_sourcefile_unique_content")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    session = old.get_model("sessions_app", "Session").objects.create(format="claude-code")
    SourceFile = old.get_model("sessions_app", "SourceFile")
    first, second = (
        SourceFile.objects.create(session=session, agent="main", path=p, sha256="ab", size=9) for p in "xy"
    )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    assert list(models.SourceFile.objects.values_list("pk", flat=True)) == [first.pk]
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("sessions_app"))
