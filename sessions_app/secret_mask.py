"""Masks secrets (API keys, tokens, private keys, passwords in URLs) in text about to leave the server as a file.

The finding is detect-secrets' (Yelp's scanner, its own detectors and patterns): every detector of its default
set but the high-entropy ones (a transcript is full of hashes and ids, each of which they flag) and public IP
addresses (not a secret). It scans each line as a reader sees it (HTML entities decoded, so ``"password": "x"``
in an HTML page is found as in the JSON), and every occurrence of what it found is replaced in the line as written.
A private key is masked from its BEGIN line to its END line (detect-secrets flags the header only).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.keyword import DENYLIST, KeywordDetector

SKIPPED = {"Base64 High Entropy String", "Hex High Entropy String", "Public IP (ipv4)"}
MASK = "[masked {kind}]"
# A key's body in any form a transcript holds it: PEM lines, or a JSON string with its newlines as \n.
_PEM = re.compile(
    r"-----BEGIN ([A-Z ]*)PRIVATE KEY-----(?:.*?-----END \1PRIVATE KEY-----|(?:[A-Za-z0-9+/=\s]|\\n)*)", re.DOTALL
)
_KEYWORD = re.compile("|".join(DENYLIST), re.IGNORECASE)  # the words KeywordDetector looks for, as it spells them
_SHORTEST = 6  # a captured part shorter than this is a prefix (GitHub's "ghp"), not the secret: mask the whole match


@dataclass(frozen=True, slots=True)
class Masked:
    kind: str  # detect-secrets' type, e.g. "AWS Access Key"
    line: int  # 1-based line of the text scanned


@cache
def _plugins() -> tuple[BasePlugin, ...]:
    mapping: dict[str, Any] = get_mapping_from_secret_type_to_class()  # its classes take no argument
    return tuple(plugin() for kind, plugin in sorted(mapping.items()) if kind not in SKIPPED)


def _found_in(line: str) -> list[tuple[str, str]]:
    """(kind, secret as it reads) for each secret in one line, as a reader sees it."""
    seen = html.unescape(line)
    found: list[tuple[str, str]] = []
    for plugin in _plugins():
        kind = str(plugin.secret_type)
        if isinstance(plugin, RegexBasedDetector):
            for regex in plugin.denylist:
                for match in regex.finditer(seen):
                    group = match.group(1) if regex.groups else None
                    whole = group is None or len(group) < _SHORTEST or match.start(1) == match.start(0)
                    found.append((kind, str(match.group(0) if whole else group)))
        else:
            if isinstance(plugin, KeywordDetector) and not _KEYWORD.search(seen):
                continue  # its patterns all need one of its words: half the export's time went to lines without
            for secret in plugin.analyze_line(filename="export.html", line=seen, line_number=0):
                if secret.secret_value:
                    found.append((kind, secret.secret_value))
    return found


def mask(text: str, *, escaped: bool) -> tuple[str, list[Masked]]:
    """``text`` with every secret replaced by ``[masked KIND]``, and what was masked (kind and line, never the value).

    ``escaped``: the text is HTML, whose lines are scanned decoded and masked as written.
    """
    findings: list[Masked] = []

    def pem(match: re.Match[str]) -> str:
        findings.append(Masked(kind="Private Key", line=text.count("\n", 0, match.start()) + 1))
        return MASK.format(kind="Private Key")

    text = _PEM.sub(pem, text)
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        for kind, secret in sorted(_found_in(line), key=lambda found: -len(found[1])):
            written = html.escape(secret, quote=True) if escaped else secret
            variants = {written, html.escape(secret, quote=False), secret} if escaped else {written}
            hit = False
            for variant in sorted(variants, key=len, reverse=True):
                if variant and variant in line:
                    line = line.replace(variant, MASK.format(kind=kind))
                    hit = True
            if hit:
                findings.append(Masked(kind=kind, line=number))
        lines[number - 1] = line
    return "\n".join(lines), sorted(findings, key=lambda f: f.line)
