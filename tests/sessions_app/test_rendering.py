"""Markdown of untrusted transcript text: rendered, highlighted, and inert."""

from __future__ import annotations

from sessions_app.rendering import markdown_html


def test_a_reply_renders_headings_lists_and_highlighted_code() -> None:
    html = markdown_html("# Plan\n\n- first\n- second\n\n```python\nx = 1  # one\n```\n")
    assert "<h1>Plan</h1>" in html
    assert "<ul>\n<li>first</li>" in html
    assert '<code class="language-python"><span class="n">x</span>' in html  # Pygments token classes


def test_raw_html_and_script_urls_stay_inert() -> None:
    html = markdown_html(
        '<script>alert(1)</script>\n\n<img src=x onerror="alert(2)">\n\n[a](javascript:alert(3)) ![i](https://x.test/i.png)'
    )
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    assert 'href="javascript' not in html


def test_an_unknown_fence_language_stays_plain_text() -> None:
    html = markdown_html("```no-such-language\n<b>x</b>\n```")
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html
