"""The base of the commands that read and write sessions."""

from __future__ import annotations

from django.core.management.base import BaseCommand


class SessionCommand(BaseCommand):
    # Django's system checks validate the web application's configuration (URLs, templates, admin, security) and
    # cost every command about 0.05 s. `serve` and the task worker run them, as do `manage.py check` and CI; a command
    # that imports or reads sessions does not depend on them, as Django's own `shell` and `dbshell` do not.
    requires_system_checks: list[str] = []
