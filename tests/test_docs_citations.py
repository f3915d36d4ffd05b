"""Every section citation (the section sign followed by a number) in the project resolves to a heading of a
document in the repository's own docs/, and nothing cites the research notes outside the repository.

Which document a citation points into, by a rule simple enough to apply by eye:

1. the nearest document named before it on the same line: a path (``docs/formats/codex.md``,
   ``formats/klaude-code.md``, ``claude-code.md`` = the formats doc of that agent), or a short name
   ("compaction doc" = docs/compaction/claude-code.md; "format doc" = the formats doc of the file's agent;
   "klaude-code doc", "klaude §", "codex doc"); any other ``NAME.md`` is a document outside docs/, which fails;
   "RFC 3986 §5.2.2" cites a public standard and is not checked;
2. otherwise the document the file declares, once, in its module docstring (or a comment):
   ``Sections (§) refer to docs/formats/claude-code.md.``

A citation resolves when that document exists under docs/ and has a Markdown heading numbered as cited
(``## 4. …`` for §4, ``### 2.4 …`` for §2.4, ``#### 2.4a …`` for §2.4a); a range (§3.2-3.3) checks both ends.
The failure message lists each file and line, and what it lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SIGN = "\u00a7"  # the section sign, spelt out so that this file holds no citation of its own

# Where citations can be: the code, its tests and templates, the project's own docs and README.
SCANNED_DIRS = ("compaction", "sessions_app", "bench", "bin", "config", "templates", "static", "tests", "docs")
SCANNED_ROOT_FILES = ("README.md",)
SKIPPED_PARTS = {"__pycache__", "vendor", "goldens", "screenshots", "node_modules"}
THIS_FILE = Path(__file__).resolve()

FORMATS = "docs/formats/{}.md"
COMPACTION_DOC = "docs/compaction/claude-code.md"

CITATION = re.compile(SIGN + r"\s?(\d+(?:\.\d+)*[a-z]?)(?:\s*[-\u2013]\s*" + SIGN + r"?(\d+(?:\.\d+)*[a-z]?))?")
DECLARATION = re.compile(
    r"Sections \(" + SIGN + r"\) refer to `*(docs/[\w/.-]+\.md)"
    r"|`*(docs/[\w/.-]+\.md)`* \(section numbers below refer to it\)"
)
# A document named on a line; the alternatives are tried left to right at each position.
MENTION = re.compile(
    r"(?P<shared>(?:\.\./)?shared/docs/(?:formats|compaction)/[\w-]+\.md)"
    r"|(?:docs/)?(?P<kind>formats|compaction)/(?P<name>[\w-]+)\.md"
    r"|(?P<path>docs/[\w/-]+\.md)"
    r"|\b(?P<bare>[\w-]+)\.md\b"
    r"|(?P<rfc>\bRFC \d+)"
    r"|(?P<compaction_doc>\bcompaction doc)"
    r"|(?P<format_doc>\bformats? doc)"
    r"|(?P<klaude>\bklaude(?:-code)?(?: doc)?(?=\s*(?:doc\b|" + SIGN + ")))"
    r"|(?P<codex>\bcodex doc)",
    re.IGNORECASE,
)
AGENTS = ("claude-code", "klaude-code", "codex", "khaelor")
PUBLIC = "public standard"


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def scanned_files() -> list[Path]:
    files = [REPO / name for name in SCANNED_ROOT_FILES if (REPO / name).is_file()]
    for top in SCANNED_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            # bench/out: the benchmarks' inputs and outputs (git-ignored; an archive of 2 GB of transcripts).
            if (
                path.is_file()
                and not SKIPPED_PARTS.intersection(path.relative_to(REPO).parts)
                and not path.is_relative_to(REPO / "bench" / "out")
            ):
                files.append(path)
    return [path for path in files if path.resolve() != THIS_FILE]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None  # images, archives: no citations


def declared_document(*, relative: str, text: str) -> str | None:
    """The file's own declaration; a document in docs/ declares itself."""
    if relative.startswith("docs/") and relative.endswith(".md"):
        return relative
    match = DECLARATION.search(text)
    return (match.group(1) or match.group(2)) if match else None


def format_doc_of(declared: str | None) -> str | None:
    """The formats doc of the declared document's agent (the compaction doc is Claude Code's)."""
    if declared is None:
        return None
    return FORMATS.format(Path(declared).stem)


def document_named(match: re.Match[str], declared: str | None) -> str | None:
    """The document a mention names; None when the mention needs a declaration the file lacks."""
    if match.group("shared"):
        return match.group("shared")
    if match.group("kind"):
        return f"docs/{match.group('kind')}/{match.group('name')}.md"
    if match.group("path"):
        return match.group("path")
    if match.group("bare"):
        name = match.group("bare")
        return FORMATS.format(name) if name in AGENTS else f"{name}.md"
    if match.group("rfc"):
        return PUBLIC
    if match.group("compaction_doc"):
        return COMPACTION_DOC
    if match.group("format_doc"):
        return format_doc_of(declared)
    if match.group("klaude"):
        return FORMATS.format("klaude-code")
    return FORMATS.format("codex")


@cache
def headings(*, root: Path, document: str) -> frozenset[str]:
    """Section numbers of a document's headings: "4", "4.1", "2.4a"."""
    numbers = set()
    for line in (root / document).read_text(encoding="utf-8").splitlines():
        match = re.match(r"#{1,6}\s+(\d+(?:\.\d+)*[a-z]?)\.?\s", line)
        if match:
            numbers.add(match.group(1))
    return frozenset(numbers)


def citation_problems(*, root: Path, relative: str, text: str) -> list[Problem]:
    declared = declared_document(relative=relative, text=text)
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if SIGN not in line:
            continue
        mentions = list(MENTION.finditer(line))
        for citation in CITATION.finditer(line):
            before = [m for m in mentions if m.start() < citation.start()]
            document = document_named(before[-1], declared) if before else declared
            cited = SIGN + citation.group(0)[1:].strip()
            if document == PUBLIC:
                continue
            if document is None:
                problems.append(Problem(relative, number, f"{cited}: no document named and none declared"))
            elif "shared/" in document or not document.startswith("docs/"):
                problems.append(Problem(relative, number, f"{cited}: cites {document}, which is not in docs/"))
            elif not (root / document).is_file():
                problems.append(Problem(relative, number, f"{cited}: {document} does not exist"))
            else:
                numbers = headings(root=root, document=document)
                missing = [n for n in citation.groups() if n and n not in numbers]
                if missing:
                    problems.append(Problem(relative, number, f"{cited}: {document} has no heading {missing[0]}"))
    return problems


def shared_doc_problems(*, root: Path, relative: str, text: str) -> list[Problem]:
    return [
        Problem(relative, number, "cites the shared research notes (shared/docs/), not the repository's docs/")
        for number, line in enumerate(text.splitlines(), start=1)
        if "shared/docs/" in line
    ]


def all_problems(check: Callable[..., list[Problem]]) -> list[Problem]:
    problems = []
    for path in scanned_files():
        text = text_of(path)
        if text is not None and (SIGN in text or "shared/docs/" in text):
            problems.extend(check(root=REPO, relative=path.relative_to(REPO).as_posix(), text=text))
    return problems


# ------------------------------------------------------------------------------- the rule itself


def _write_docs(root: Path, sections: dict[str, tuple[str, ...]]) -> None:
    for document, numbers in sections.items():
        (root / document).parent.mkdir(parents=True, exist_ok=True)
        (root / document).write_text("".join(f"## {n} Title\n" for n in numbers), encoding="utf-8")


def test_the_rule_resolves_a_named_document_before_the_declared_one(tmp_path) -> None:
    _write_docs(
        tmp_path,
        {
            "docs/compaction/claude-code.md": ("2.6",),
            "docs/formats/claude-code.md": ("6.1",),
            "docs/formats/codex.md": ("4", "5"),
            "docs/formats/klaude-code.md": ("3.8",),
        },
    )
    text = (
        f'"""Sections ({SIGN}) refer to docs/compaction/claude-code.md."""\n'
        f"# {SIGN}2.6 step 4 and {SIGN}9.9\n"
        f"# format doc {SIGN}6.1, docs/formats/codex.md {SIGN}4-5, klaude {SIGN}3.8; RFC 3986 {SIGN}5.2.2\n"
        f"# EVENT_MODEL.md {SIGN}6.5.3 and shared/docs/formats/codex.md {SIGN}4\n"
    )
    problems = [str(p) for p in citation_problems(root=tmp_path, relative="module.py", text=text)]
    assert problems == [
        f"module.py:2: {SIGN}9.9: docs/compaction/claude-code.md has no heading 9.9",
        f"module.py:4: {SIGN}6.5.3: cites EVENT_MODEL.md, which is not in docs/",
        f"module.py:4: {SIGN}4: cites shared/docs/formats/codex.md, which is not in docs/",
    ]


def test_a_file_without_a_declaration_is_reported_for_its_bare_citations(tmp_path) -> None:
    _write_docs(tmp_path, {"docs/formats/codex.md": ("3.", "4.")})
    text = f"# docs/formats/codex.md {SIGN}4 is named; {SIGN}4 reads on from it\n# {SIGN}3 alone\n"
    problems = [str(p) for p in citation_problems(root=tmp_path, relative="view.py", text=text)]
    assert problems == [f"view.py:2: {SIGN}3: no document named and none declared"]


# ------------------------------------------------------------------------------- the repository


def test_the_docs_index_names_every_document_in_docs() -> None:
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    documents = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.name != "README.md")
    assert documents and [d for d in documents if d not in index] == []


def test_the_docs_own_cross_references_resolve() -> None:
    problems = [p for p in all_problems(citation_problems) if p.path.startswith("docs/")]
    assert problems == [], "\n" + "\n".join(map(str, problems))


def test_every_citation_resolves_to_a_heading_of_a_document_in_docs() -> None:
    problems = all_problems(citation_problems)
    assert problems == [], f"\n{len(problems)} citations do not resolve:\n" + "\n".join(map(str, problems))


def test_nothing_cites_the_shared_research_notes() -> None:
    problems = all_problems(shared_doc_problems)
    assert problems == [], "\n" + "\n".join(map(str, problems))
