from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model

from sessions_app.management.commands._base import SessionCommand


class Command(SessionCommand):
    help = "Create a local reviewer login when no user exists yet, and print its password once."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        if users.objects.exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser(username="reviewer", email="", password=password)
        self.stdout.write(
            "Created a local login (shown only this once):\n"
            f"  username: reviewer\n  password: {password}\n"
            "Add more reviewers with: .venv/bin/python manage.py createsuperuser"
        )
