"""The header an htmx request carries: a view given it answers with a fragment, not a page."""

from __future__ import annotations

HTMX = {"HTTP_HX_REQUEST": "true"}
