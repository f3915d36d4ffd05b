"""Issue 34, item 7: an upload of too many files is refused with its limit named, not Django's bare 400 page;
pages that need a login are never kept by a shared cache or the browser's history."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db


def test_the_files_per_request_limit_is_the_sessions_per_upload_setting():
    # Django's default (1,000) refused a 1,001-file upload that UPLOAD_MAX_SESSION_FILES (5,000) allowed.
    assert django_settings.DATA_UPLOAD_MAX_NUMBER_FILES == django_settings.UPLOAD_MAX_SESSION_FILES


@pytest.mark.parametrize("json", [False, True])
def test_too_many_files_are_refused_with_the_limit_named(client_in, settings, json):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = settings.UPLOAD_MAX_SESSION_FILES = 3
    files = [SimpleUploadedFile(f"s{i}.jsonl", b"{}\n") for i in range(4)]
    response = client_in.post("/import/" + ("?format=json" if json else ""), {"files": files})
    assert response.status_code == 400
    if json:
        assert response.json() == {"error": response.json()["error"], "status": 400}
        assert "more than 3 files" in response.json()["error"]
    else:
        page = response.content.decode()
        assert "more than 3 files" in page and "UPLOAD_MAX_SESSION_FILES" in page and "Bad Request (400)" not in page


def test_pages_that_need_a_login_are_private_and_not_stored(client_in):
    for url in ("/", "/sessions.json", "/import/", "/reviews/"):
        assert client_in.get(url)["Cache-Control"] == "private, no-store", url
