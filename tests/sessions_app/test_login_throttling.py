"""Login throttling (django-axes): repeated failed logins lock the username out from that address."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    """Many logins per test: a fast hasher keeps them quick; throttling does not depend on the hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def login(client, password: str):
    return client.post("/login/", {"username": "rev", "password": password})


def test_five_failed_logins_lock_the_account_out_even_with_the_right_password(client, reviewer, settings):
    assert settings.AXES_FAILURE_LIMIT == 5
    for _ in range(4):
        assert login(client, "wrong").status_code == 200  # the form again, with its error
    locked = login(client, "wrong")
    assert locked.status_code == 429 and "Too many failed logins" in locked.content.decode()
    again = login(client, "pw-for-tests")
    assert again.status_code == 429
    assert client.get("/").status_code == 302  # still logged out


def test_a_successful_login_resets_the_count(client, reviewer):
    for _ in range(4):
        login(client, "wrong")
    assert login(client, "pw-for-tests").status_code == 302
    client.logout()
    for _ in range(4):
        assert login(client, "wrong").status_code == 200
    assert login(client, "pw-for-tests").status_code == 302
