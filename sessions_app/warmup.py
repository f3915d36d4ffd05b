"""What a web process loads at its start instead of in its first requests (issue 12: a first request after a
start within 400 ms). Called by config/wsgi.py only: commands never pay for it."""

from __future__ import annotations

from django.conf import settings
from django.template.loader import get_template
from django.urls import get_resolver

from sessions_app.rendering import warm_up as load_renderer


def warm_up() -> None:
    get_resolver().url_patterns  # noqa: B018  (imports config.urls and every view module)
    # The strategies import these where they use them, so that a command does not pay for them; pages do use them
    # (the layers on the timeline, the offline summary in previews and runs).
    from compaction import layers, offline  # noqa: F401

    load_renderer()  # markdown-it, Pygments, nh3
    # Every page template compiled into the cached loader (DEBUG=0) now, not by each page's first request.
    root = settings.BASE_DIR / "templates"
    for path in sorted(root.rglob("*.html")):
        get_template(path.relative_to(root).as_posix())
