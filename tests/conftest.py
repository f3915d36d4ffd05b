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


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    """Uploads waiting for the worker go to the test's own folder (a worker subprocess gets it as UPLOAD_DIR)."""
    settings.UPLOAD_DIR = tmp_path / "uploads"
    return settings.UPLOAD_DIR


@pytest.fixture
def reviewer(django_user_model):
    return django_user_model.objects.create_user(username="rev", password="pw-for-tests")


@pytest.fixture
def client_in(client, reviewer):
    client.force_login(reviewer)
    return client
