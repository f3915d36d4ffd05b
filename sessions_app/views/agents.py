"""The agents' colours as a stylesheet, generated from their profiles (``compaction.agents``).

The CSP allows styles from this site only (no inline ``style``), so the colours reach the pages as custom
properties in a served stylesheet: ``--agent-<name>`` (light and dark), ``--replay-<name>``, and a class per agent
(``.agent-<name>``) that sets ``--c`` (swatches, badges) and ``--agent-color`` (the overview). static/app.css,
static/chart.css and static/timeline.js read only these names.
"""

from __future__ import annotations

import hashlib
import re

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from compaction.formats.registry import profiles

_COLOUR = re.compile(r"#[0-9a-fA-F]{6}")
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


def agents_stylesheet() -> str:
    """The stylesheet of every registered agent's colours (a name or colour a CSS rule cannot hold is refused)."""
    light: list[str] = []
    dark: list[str] = []
    classes: list[str] = []
    for name, _, profile in profiles():
        colours = (profile.colour, profile.dark_colour, profile.replay_colour)
        if not _NAME.fullmatch(name) or not all(_COLOUR.fullmatch(c) for c in colours):
            raise ValueError(f"agent {name!r}: a name of a-z, 0-9 and '-', colours as #rrggbb")
        light.append(f"--agent-{name}:{profile.colour}; --replay-{name}:{profile.replay_colour};")
        dark.append(f"--agent-{name}:{profile.dark_colour};")
        classes.append(f".agent-{name} {{ --c:var(--agent-{name}); --agent-color:var(--agent-{name}); }}")
    return (
        "/* Generated from the agents' profiles (sessions_app/views/agents.py). */\n"
        f":root {{ {' '.join(light)} }}\n"
        f"@media (prefers-color-scheme: dark) {{ :root {{ {' '.join(dark)} }} }}\n" + "\n".join(classes) + "\n"
    )


@login_not_required  # colours only, and the login page wears them too
@require_GET
def stylesheet(request: HttpRequest) -> HttpResponse:
    css = agents_stylesheet()
    response = HttpResponse(css, content_type="text/css; charset=utf-8")
    # The link names the content's hash (``agents_css_version``), so a browser may keep it as long as it likes.
    response["Cache-Control"] = "public, max-age=31536000, immutable" if request.GET.get("v") else "no-cache"
    response["ETag"] = f'"{agents_css_version()}"'
    return response


def agents_css_version() -> str:
    """A short hash of the stylesheet: the ``v`` of its link, so a changed registry is fetched anew."""
    return hashlib.sha256(agents_stylesheet().encode()).hexdigest()[:12]
