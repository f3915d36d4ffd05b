from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SAMPLES = SHARED / "samples"
CLAUDE_SAMPLES = SAMPLES / "claude-code"
KLAUDE_SAMPLES = SAMPLES / "klaude-code"
KHAELOR_SAMPLES = SAMPLES / "khaelor"
CODEX_SAMPLES = SAMPLES / "codex"


@pytest.fixture
def reviewer(django_user_model):
    return django_user_model.objects.create_user(username="rev", password="pw-for-tests")


@pytest.fixture
def client_in(client, reviewer):
    client.force_login(reviewer)
    return client
