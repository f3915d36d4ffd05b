"""The HTML export of a shared sample opens in Chromium with the network off and shows no planted secret (issue 37)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions_app import models, services
from tests.conftest import CLAUDE_SAMPLES

pytestmark = pytest.mark.browser

# Planted in a prompt of a copy of a shared sample: one of each kind the export must mask. Built from parts so that
# no scanner takes this file itself for a leak.
AWS_KEY = "AKIA" + "Q7RZ3X5T2W9Y4U6V"
GITHUB_TOKEN = "ghp_" + "x7Kq2Lm9Np4Rs8Tv1Wy5Za3Bc6De0Fg2Hj4K"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtz" + "c2gtZWQyNTUxOQAAACBplanted"
PRIVATE_KEY = "-----BEGIN OPENSSH " + f"PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH " + "PRIVATE KEY-----"
URL_PASSWORD = "Xq9-planted" + "Pass"
DATABASE_URL = f"postgres://deploy:{URL_PASSWORD}@db.internal:5432/app"
PLANTED = [AWS_KEY, GITHUB_TOKEN, KEY_BODY, URL_PASSWORD]


def _sample_with_secrets(folder: Path) -> Path:
    sample = CLAUDE_SAMPLES / "spotter_short.jsonl"
    lines = sample.read_text().splitlines()
    last = json.loads(lines[-1])
    prompt = (
        f"Deploy with AWS_ACCESS_KEY_ID={AWS_KEY} and GITHUB_TOKEN={GITHUB_TOKEN}, connect to {DATABASE_URL}, "
        f"and use this key:\n{PRIVATE_KEY}\nthe planted prompt ends here"
    )
    planted = {
        "parentUuid": last["uuid"],
        "isSidechain": False,
        "userType": "external",
        "cwd": last["cwd"],
        "sessionId": last["sessionId"],
        "version": last["version"],
        "type": "user",
        "message": {"role": "user", "content": prompt},
        "uuid": "11111111-2222-4333-8444-555555555555",
        "timestamp": last["timestamp"],
    }
    path = folder / sample.name
    path.write_text("\n".join([*lines, json.dumps(planted)]) + "\n")
    return path


def test_the_export_opens_offline_with_the_transcript_and_no_planted_secret(page, live_server, browser, tmp_path):
    outcome = services.import_file(path=_sample_with_secrets(tmp_path))
    assert isinstance(outcome, services.FileImport)
    session = models.Session.objects.get(pk=outcome.session)
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    assert "the planted prompt ends here" in page.content()  # the page itself shows the session as it is
    with page.expect_download() as download:
        page.get_by_role("link", name="Download as HTML").click()
    saved = tmp_path / "export.html"
    download.value.save_as(saved)
    text = saved.read_text()
    assert not [secret for secret in PLANTED if secret in text]

    offline = browser.new_context()
    tried: list[str] = []

    def only_the_file(route) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            tried.append(route.request.url)
            route.abort()

    offline.route("**", only_the_file)
    opened = offline.new_page()
    try:
        opened.goto(saved.as_uri())
        body = opened.locator("body").inner_text()
        assert "the planted prompt ends here" in body and "Token timeline" in body and "Diagnosis" in body
        assert opened.locator("svg.export-timeline polyline").count() == 1
        assert not [secret for secret in PLANTED if secret in body]
        for kind in ("AWS Access Key", "GitHub Token", "Private Key", "Basic Auth Credentials"):
            assert f"[masked {kind}]" in body
        masked = opened.locator("#masked table.masked-list tbody tr").all_inner_texts()
        kinds = {row.split("\t")[0].strip() for row in masked}
        assert {"AWS Access Key", "GitHub Token", "Private Key", "Basic Auth Credentials"} <= kinds
        assert all("record #" in row for row in masked)
        # The stylesheet is inline: the page is laid out, not bare HTML.
        assert opened.locator("main").evaluate("e => getComputedStyle(e).maxWidth") != "none"
        assert tried == []  # nothing in the file asked for anything over the network
    finally:
        offline.close()
