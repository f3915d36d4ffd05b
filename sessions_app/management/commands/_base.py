"""The base of the commands that read and write sessions."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError


class SessionCommand(BaseCommand):
    # Django's system checks validate the web application's configuration (URLs, templates, admin, security) and
    # cost every command about 0.05 s. `serve` and the task worker run them, as do `manage.py check` and CI; a command
    # that imports or reads sessions does not depend on them, as Django's own `shell` and `dbshell` do not.
    requires_system_checks: list[str] = []

    def execute(self, *args: Any, **options: Any) -> str | None:
        """A session larger than the memory budget is refused as the pages refuse it: its sentence, exit status 1
        (``CommandError``), not a traceback."""
        from sessions_app.memory_budget import SessionTooLarge

        try:
            return super().execute(*args, **options)
        except SessionTooLarge as exc:
            raise CommandError(exc.message) from None
