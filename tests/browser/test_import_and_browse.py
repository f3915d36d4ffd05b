"""Log in, upload, open the session, expand a truncated tool result; and untrusted content stays inert."""

from __future__ import annotations

import pytest

from tests.helpers.claude_code_lines import assistant, cc_line, user, write

pytestmark = pytest.mark.browser


def tool_session(tmp_path, result_text: str):
    return write(
        tmp_path,
        "browse-me.jsonl",
        user("u0", None, "please read the file"),
        cc_line(
            type="assistant",
            uuid="a0",
            parentUuid="u0",
            sessionId="s-b",
            message={
                "id": "msg_0",
                "role": "assistant",
                "model": "claude-opus-4-5-20251101",
                "content": [{"type": "tool_use", "id": "toolu_0", "name": "Read", "input": {"file_path": "/big.txt"}}],
                "usage": {
                    "input_tokens": 5,
                    "cache_creation_input_tokens": 4000,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 3,
                },
            },
        ),
        cc_line(
            type="user",
            uuid="r0",
            parentUuid="a0",
            sessionId="s-b",
            message={
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": result_text}],
            },
        ),
    )


def test_upload_open_and_show_all(page, live_server, tmp_path, import_worker):
    text = "".join(f"line {i:05d}\n" for i in range(800)) + "THE-VERY-END"
    path = tool_session(tmp_path, text)
    page.click("text=Import")
    page.set_input_files("input[name=files]", str(path))
    page.click("button:has-text('Import')")
    page.wait_for_selector("#report a:has-text('browse-me.jsonl')")
    assert "new session" in page.inner_text("#report")
    page.click("#report a:has-text('browse-me.jsonl')")
    page.wait_for_selector(".tool-use")
    assert "THE-VERY-END" not in page.inner_text("#transcript")
    # The call is folded to one line and a long result is folded in it, its size in its summary: open both.
    page.locator("details.tool-use > summary").first.click()
    fold = page.locator("details.tool-result").first
    assert fold.get_attribute("open") is None and "8,812 chars" in fold.locator("summary").inner_text()
    fold.locator("summary").click()
    show_all = page.locator("a.show-all")
    assert "show all" in show_all.inner_text()
    url_before = page.url
    show_all.click()
    page.wait_for_selector("text=THE-VERY-END")
    assert page.url == url_before  # swapped in place by htmx, no navigation
    assert page.errors == []


def test_untrusted_content_never_runs(page, live_server, tmp_path, import_worker):
    payloads = [
        "<script>window.__pwned = 1</script>",
        '<img src=x onerror="window.__pwned = 2">',
        '<a id="jslink" href="javascript:window.__pwned = 3">click me</a>',
        '<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned = 4"><script>window.__pwned = 5</script></svg>',
    ]
    text = "\n".join(payloads)
    path = write(
        tmp_path,
        "evil.jsonl",
        user("u1", None, text),
        assistant("a1", "u1", "msg_1", text, ctx=100),
        cc_line(
            type="user",
            uuid="r1",
            parentUuid="a1",
            sessionId="s-1",
            message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": text}]},
        ),
    )
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.click("text=Import")
    page.set_input_files("input[name=files]", str(path))
    page.click("button:has-text('Import')")
    page.click("#report a:has-text('evil.jsonl')")
    page.wait_for_selector("#transcript")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#transcript script, #transcript img, #transcript svg, #jslink").count() == 0
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#transcript")
    assert dialogs == []
