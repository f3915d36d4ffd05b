"""How a page names a call or a point, the same way on every page (README, "Call numbers").

"call N" is the N-th API call of an agent, numbered from 1; "after call N" is the point between call N and call N+1.
Every main-chain call number a page shows links to that call on the token timeline and to Preview at that point, so
a number copied from any page into Preview or ``--at`` means the same point.
"""

from __future__ import annotations

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from compaction.transcript import MAIN

register = template.Library()


def _links(session_id: int, call: int, text: str, *, agent: str) -> SafeString:
    turn = reverse("sessions:turn", args=[session_id])
    if agent != MAIN:
        return format_html('<a class="call-ref" href="{}?agent={}&amp;call={}">{}</a>', turn, agent, call, text)
    preview = reverse("sessions:preview", args=[session_id])
    return format_html(
        '<a class="call-ref" href="{}?call={}">{}</a> '
        '<a class="preview-ref small" href="{}?at={}" aria-label="Preview after call {}">(preview)</a>',
        turn,
        call,
        text,
        preview,
        call,
        call,
    )


@register.simple_tag
def call_link(session_id: int, call: int | None, agent: str = MAIN) -> str:
    """ "call N", linked to the call on the timeline and to Preview after it; "–" without a call."""
    if call is None or call < 1:
        return "–"
    return _links(session_id, call, f"call {intcomma(call)}", agent=agent)


@register.simple_tag
def after_call_link(session_id: int, after_call: int | None, agent: str = MAIN) -> str:
    """ "after call N", linked to call N on the timeline and to Preview at that point; before any call, said so."""
    if after_call is None:
        return "–"
    if after_call < 1:
        return "before the first call"
    return _links(session_id, after_call, f"after call {intcomma(after_call)}", agent=agent)
