"""Titles and full-text search over the readable text of the shared samples (SQLite and PostgreSQL alike)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from django.test import Client
from django.urls import reverse

from compaction.formats.claude_code import ClaudeCodeParser
from sessions_app import models, services, sweeps
from sessions_app.search_syntax import parse_query
from sessions_app.search_text import TSV_TABLE, search_text
from sessions_app.selectors import agents as agent_selectors
from sessions_app.selectors import search as search_selectors
from sessions_app.selectors import sessions as session_selectors
from sessions_app.selectors import timeline as timeline_selectors
from sessions_app.selectors import transcript as transcript_selectors
from sessions_app.templatetags.search import highlight
from tests.conftest import CLAUDE_SAMPLES
from tests.helpers.sample_sessions import SUBAGENT, SUBAGENT_PHRASE

pytestmark = pytest.mark.django_db


def _prompted(path: Path) -> bool:
    parser = ClaudeCodeParser()
    with path.open("rb") as handle:
        records = list(parser.parse(handle))
    return any(getattr(r, "kind", "") == "prompt" for r in records)


@pytest.mark.parametrize("path", sorted(CLAUDE_SAMPLES.glob("*.jsonl")), ids=lambda p: p.name[:30])
def test_every_claude_code_sample_with_a_prompt_has_a_title(path: Path) -> None:
    if not _prompted(path):
        pytest.skip("no prompt in this sample")
    services.import_paths(paths=[path])
    session = models.Session.objects.get(files__path=str(path.resolve()))
    assert session.title.strip()
    assert not session.title.startswith(("<command-", "<bash-input>"))


def test_a_summary_title_beats_the_first_prompt() -> None:
    services.import_paths(paths=[CLAUDE_SAMPLES / "ccviewer_fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"])
    assert models.Session.objects.get().title == "Empty Repo Setup: CLAUDE.md Foundation Created"


def test_search_text_holds_tool_input_values_not_keys() -> None:
    text = search_text(
        [{"kind": "tool_use", "text": '{"file_path": "/srv/app.py", "edits": [{"old_string": "x = 1"}]}'}]
    )
    assert "/srv/app.py" in text and "x = 1" in text
    assert "file_path" not in text and "old_string" not in text


def test_a_phrase_only_in_a_subagent_is_found_by_the_global_search_with_a_snippet(spotter: models.Session) -> None:
    found = session_selectors.search_sessions(filters=session_selectors.SessionFilters(q=SUBAGENT_PHRASE))
    assert [f.session.pk for f in found] == [spotter.pk]
    hit = found[0].hits[0]
    assert hit.agent == SUBAGENT
    assert hit.snippet.match.lower() == "i also found references to version"
    assert hit.snippet.before  # context around the match
    # The list filters combine with the search: another agent's sessions hold no match.
    assert (
        session_selectors.search_sessions(
            filters=session_selectors.SessionFilters(q=SUBAGENT_PHRASE, format="klaude_code")
        )
        == []
    )
    assert list(session_selectors.session_list(filters=session_selectors.SessionFilters(q=SUBAGENT_PHRASE))) == [
        spotter
    ]


def test_in_session_search_from_the_main_chain_covers_subagents(spotter: models.Session, client_in: Client) -> None:
    client = client_in
    hits = search_selectors.search_session(session=spotter, q=SUBAGENT_PHRASE)
    assert hits and {h.agent for h in hits} == {SUBAGENT}
    page = client.get(reverse("sessions:detail", args=[spotter.pk]), {"q": SUBAGENT_PHRASE})
    body = page.content.decode()
    assert f"subagent {SUBAGENT}" in body
    assert '<mark class="hit">I also found references to version</mark>' in body
    # The hit's link lands on the record in its agent's transcript with the match marked.
    landing = client.get(reverse("sessions:message", args=[spotter.pk, hits[0].seq]), {"q": SUBAGENT_PHRASE})
    assert f"agent={SUBAGENT}" in landing["Location"] and landing["Location"].endswith(f"#m{hits[0].seq}")
    shown = client.get(landing["Location"]).content.decode()
    assert f'id="m{hits[0].seq}"' in shown
    assert '<mark class="hit">I also found references to version</mark>' in shown


def test_a_json_key_name_finds_nothing(spotter: models.Session) -> None:
    for key in ("parentUuid", "isSidechain", "userType"):  # keys of every record line
        assert session_selectors.search_sessions(filters=session_selectors.SessionFilters(q=key)) == []
        assert search_selectors.search_session(session=spotter, q=key) == []


def test_the_list_json_twin_carries_the_matches(spotter: models.Session, client_in: Client) -> None:
    client = client_in
    data = client.get(reverse("sessions:list_json"), {"q": SUBAGENT_PHRASE}).json()
    assert data["count"] == 1
    [match] = data["matches"]
    assert match["session"] == spotter.pk and match["hits"][0]["url"].startswith(f"/sessions/{spotter.pk}/m/")


def test_highlight_escapes_the_text_around_and_inside_marks() -> None:
    marked = highlight("<b>Found</b> it: <script>found()</script>", "found")
    assert "<script>" not in marked and "<b>" not in marked
    assert '<mark class="hit">Found</mark>' in marked and '<mark class="hit">found</mark>' in marked


def test_a_task_call_links_to_its_subagent_and_the_subagent_back(spotter: models.Session, client_in: Client) -> None:
    [spawn] = [s for s in agent_selectors.subagent_spawns(session=spotter).values() if s.agent == SUBAGENT]
    assert spawn.parent == "main" and spawn.description
    tree = agent_selectors.agents(session=spotter)
    assert [(a.agent, a.depth) for a in tree][0] == ("main", 0)
    assert next(a for a in tree if a.agent == SUBAGENT).depth == 1
    # The spawning call's page shows its description and the link to the subagent's transcript.
    landing = client_in.get(reverse("sessions:message", args=[spotter.pk, spawn.seq]))
    body = client_in.get(landing["Location"]).content.decode()
    # ... opening in place (its records loaded on open) and linking to its own page.
    assert f'data-subagent="{SUBAGENT}"' in body
    assert f'{reverse("sessions:detail", args=[spotter.pk])}?agent={SUBAGENT}"' in body
    assert f'<p class="description"><strong>{spawn.description}</strong></p>' in body
    # The subagent's transcript links back to its spawn point.
    sub = client_in.get(reverse("sessions:detail", args=[spotter.pk]), {"agent": SUBAGENT}).content.decode()
    assert reverse("sessions:message", args=[spotter.pk, spawn.seq]) in sub
    assert f"call {spawn.call} (#{spawn.seq})" in sub


def test_whitespace_only_blocks_are_not_shown(tmp_path: Path, client_in: Client) -> None:
    lines = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "hello"},
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {
                "id": "m1",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "\n\n  "}],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "a1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:02Z",
            "message": {
                "id": "m2",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "a real reply"}],
                "usage": {"input_tokens": 12, "output_tokens": 3},
            },
        },
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    services.import_paths(paths=[path])
    session = models.Session.objects.get()
    page = transcript_selectors.transcript_page(session=session, agent="main", page=1)
    assert [m.blocks[0].text for m in page.object_list] == ["hello", "a real reply"]


def test_the_timeline_runs_in_main_chain_calls_and_a_subagent_starts_at_its_spawn_call(
    spotter: models.Session,
) -> None:
    data = timeline_selectors.timeline(session=spotter)
    assert data["x_axis"] == "call"
    main = data["series"]["main"]
    assert [p["x"] for p in main] == [p["call"] for p in main]
    [spawn] = [s for s in agent_selectors.subagent_spawns(session=spotter).values() if s.agent == SUBAGENT]
    spawn_call = max(p["call"] for p in main if p["seq"] <= spawn.seq)  # the call whose response holds the Task call
    sub = data["series"][SUBAGENT]
    assert sub[0]["x"] == spawn_call
    assert [p["x"] for p in sub] == [spawn_call + p["call"] - 1 for p in sub]
    assert spawn.call == spawn_call
    assert sub[-1]["x"] <= main[-1]["x"]  # drawn where it ran, not after the main chain's end
    spawn_marker = next(m for m in data["events"] if m["kind"] == "subagent_spawn" and m["seq"] == spawn.seq)
    assert spawn_marker["x"] == spawn_call
    for estimates in data["estimates"].values():
        xs = [p["x"] for p in estimates]
        assert xs == sorted(set(xs))  # one point per call, in order (uPlot joins series on x)


def test_a_title_only_file_says_what_it_is_and_titles_the_conversation_it_names(tmp_path: Path) -> None:
    title_only = CLAUDE_SAMPLES / "sniffly_ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl"  # one summary record
    services.import_paths(paths=[title_only])
    lone = models.Session.objects.get()
    assert lone.info["title_record_for"] == ["4c7d4d5a-7dd4-428c-bd81-077617558182"]
    assert list(session_selectors.session_list(filters=session_selectors.SessionFilters())) == [lone]
    # The conversation it names arrives: it takes the title, and the title-only file is no longer listed.
    conversation = tmp_path / "named.jsonl"
    conversation.write_text(
        orjson.dumps(
            {
                "type": "user",
                "uuid": "4c7d4d5a-7dd4-428c-bd81-077617558182",
                "parentUuid": None,
                "sessionId": "named",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "make music from word embeddings"},
            }
        ).decode()
        + "\n"
    )
    services.import_paths(paths=[conversation])
    named = models.Session.objects.get(external_id="named")
    assert named.title == "AI Music Generation from Word Embeddings"
    assert list(session_selectors.session_list(filters=session_selectors.SessionFilters())) == [named]
    # Importing the conversation again (a longer file) keeps the attached title.
    with conversation.open("ab") as handle:
        handle.write(
            orjson.dumps(
                {
                    "type": "user",
                    "uuid": "u2",
                    "parentUuid": "4c7d4d5a-7dd4-428c-bd81-077617558182",
                    "sessionId": "named",
                    "timestamp": "2026-01-01T00:00:05Z",
                    "message": {"role": "user", "content": "and louder"},
                }
            )
            + b"\n"
        )
    services.import_paths(paths=[conversation])
    named.refresh_from_db()
    assert named.title == "AI Music Generation from Word Embeddings"


def test_the_search_page_groups_hits_by_session_and_links_to_the_records(
    spotter: models.Session, client_in: Client
) -> None:
    body = client_in.get(reverse("sessions:search"), {"q": SUBAGENT_PHRASE}).content.decode()
    assert f'class="found-title" href="/sessions/{spotter.pk}/?q=' in body
    assert '<mark class="hit">I also found references to version</mark>' in body
    assert f'class="hit-link" href="/sessions/{spotter.pk}/m/' in body
    assert f"subagent {SUBAGENT}" in body
    # An htmx request (the header's Ctrl+K panel) gets the results alone.
    partial = client_in.get(reverse("sessions:search"), {"q": SUBAGENT_PHRASE}, HTTP_HX_REQUEST="true")
    assert b"<html" not in partial.content and b'class="search-results"' in partial.content


def test_every_page_has_the_search_field_without_javascript(spotter: models.Session, client_in: Client) -> None:
    for url in ("/", f"/sessions/{spotter.pk}/", f"/sessions/{spotter.pk}/timeline/", "/reviews/", "/import/"):
        body = client_in.get(url).content.decode()
        assert '<form class="quick-search" role="search" method="get" action="/search/">' in body, url
        assert 'aria-keyshortcuts="Control+K Meta+K"' in body


def test_the_search_combines_with_the_list_filters_and_has_a_json_twin(
    spotter: models.Session, client_in: Client
) -> None:
    data = client_in.get(reverse("sessions:search_json"), {"q": SUBAGENT_PHRASE}).json()
    [found] = data["sessions"]
    assert found["session"]["id"] == spotter.pk and found["session"]["agent_name"] == "Claude Code"
    assert found["records"] == data["records"] >= 1
    assert found["hits"][0]["snippet"]["match"] == "I also found references to version"
    assert found["hits"][0]["agent"] == SUBAGENT and found["hits"][0]["url"].startswith(f"/sessions/{spotter.pk}/m/")
    other = client_in.get(reverse("sessions:search_json"), {"q": SUBAGENT_PHRASE, "agent": "klaude-code"}).json()
    assert other["sessions"] == [] and other["filters"] == {"agent": "klaude-code"}
    assert client_in.get(reverse("sessions:search_json"), {"q": SUBAGENT_PHRASE, "agent": "claude-code"}).json()[
        "sessions"
    ]
    # From a filtered list, the header's search carries the list's filters.
    listing = client_in.get("/", {"agent": "claude-code", "has_compaction": "1"}).content.decode()
    form = listing[listing.index('class="quick-search"') : listing.index('id="quick-search-q"')]
    assert '<input type="hidden" name="agent" value="claude-code">' in form
    assert '<input type="hidden" name="has_compaction" value="1">' in form


def test_the_search_query_count_does_not_grow_with_the_sessions_found(client_in: Client) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    samples = sorted(CLAUDE_SAMPLES.glob("*.jsonl"))
    counts = []
    for batch in (samples[:1], samples[1:4]):
        services.import_paths(paths=batch)
        for url in ("/", "/search/"):
            with CaptureQueriesContext(connection) as queries:
                assert client_in.get(url, {"q": "the"}).status_code == 200
            counts.append(len(queries))
    assert models.Session.objects.count() >= 3
    assert counts[:2] == counts[2:], counts


def test_web_search_syntax_means_the_same_on_both_databases(spotter: models.Session) -> None:
    def found(q: str) -> set[int]:
        return set(search_selectors.matching_messages(q=q).values_list("id", flat=True))

    version = found("version")
    assert version
    without = found("version -OTEL")
    assert without and without < version
    texts = models.Message.objects.filter(id__in=without).values_list("search_text", flat=True)
    assert not [t for t in texts if "otel" in t.lower().replace("hotel", "")]
    assert found("version or zzqxnothing") == version
    assert found("version zzqxnothing") == set()
    # A quoted phrase is matched as written among the records holding its words.
    phrase = found(SUBAGENT_PHRASE)
    assert phrase and phrase <= found(SUBAGENT_PHRASE.strip('"'))
    for text in models.Message.objects.filter(id__in=phrase).values_list("search_text", flat=True):
        assert SUBAGENT_PHRASE.strip('"').lower() in text.lower()
    # Nothing typed is query syntax: punctuation alone finds nothing, quotes and stars are only text.
    assert found("***") == set() and found('"') == set()
    assert found('version" AND "NOT') == found('version" AND "NOT')  # answers, no syntax error


@pytest.mark.parametrize(
    ("q", "expression"),
    [
        ("git status", '"git" AND "status"'),
        ('"shadow branch"', '"shadow branch"'),
        ("a or b c", '("a" OR "b") AND "c"'),
        ('x -y -"z w"', '("x") NOT ("y" OR "z w")'),
        ('it"s NEAR(x)', '"it""s" AND "NEAR(x)"'),
        ("***", None),
        ("-only", None),
    ],
)
def test_fts5_query_quotes_every_item(q: str, expression: str | None) -> None:
    assert search_selectors.fts5_query(parse_query(q)) == expression


def _check_index() -> None:
    """The search index holds exactly the stored records (each database's own index)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":  # FTS5 raises if its index and the message rows disagree
            cursor.execute(
                f"INSERT INTO {search_selectors.FTS}({search_selectors.FTS}, rank) VALUES ('integrity-check', 1)"
            )
            return
        cursor.execute(  # PostgreSQL (migration 0016): one tsvector per record, of its current text
            f"SELECT count(*) FROM sessions_app_message m FULL JOIN {TSV_TABLE} t ON t.id = m.id "
            "WHERE m.id IS NULL OR t.id IS NULL OR t.tsv <> sessions_app_search_words(m.search_text)"
        )
        assert cursor.fetchone() == (0,)


def test_the_search_index_follows_imports_updates_and_deletes(spotter: models.Session) -> None:
    _check_index()
    assert search_selectors.search_session(session=spotter, q=SUBAGENT_PHRASE)
    message = models.Message.objects.filter(session=spotter, search_text__contains="version").first()
    assert message is not None
    message.search_text = "zzqx replaced words"
    message.save(update_fields=["search_text"])
    assert list(search_selectors.matching_messages(q="zzqx").values_list("id", flat=True)) == [message.pk]
    _check_index()
    spotter.delete()
    assert not search_selectors.matching_messages(q="version").exists()
    _check_index()


def test_the_search_index_follows_a_growing_file(tmp_path: Path) -> None:
    from tests.helpers.claude_code_lines import assistant, user, write

    first = [user("u1", None, "alpha question"), assistant("a1", "u1", "msg_1", "alpha answer", ctx=10)]
    path = write(tmp_path, "grow.jsonl", *first)
    services.import_paths(paths=[path])
    assert search_selectors.matching_messages(q="alpha").count() == 2
    path.write_text(path.read_text() + user("u2", "a1", "omega question"))  # the agent wrote one more line
    services.import_paths(paths=[path])
    assert search_selectors.matching_messages(q="omega").count() == 1
    assert search_selectors.matching_messages(q="alpha").count() == 2  # indexed once, not again
    assert models.Session.objects.get().search_ready  # a small import indexes itself, on both databases
    _check_index()


def test_a_large_import_is_searchable_once_the_worker_has_indexed_it(
    tmp_path: Path, client_in: Client, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks
) -> None:
    """A large import leaves its search index to the task worker, on both databases; until it has run, every
    search names the session as still being indexed (pages and JSON)."""
    from django_tasks_db.models import DBTaskResult

    from tests.helpers.claude_code_lines import assistant, user, write

    monkeypatch.setattr(services, "INDEX_INLINE_CHARS", 10)  # these few words stand for a large session
    path = write(
        tmp_path, "big.jsonl", user("u1", None, "gamma question"), assistant("a1", "u1", "m1", "gamma answer", ctx=10)
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.import_paths(paths=[path])
    session = models.Session.objects.get()
    queued = set(DBTaskResult.objects.values_list("task_path", flat=True))
    assert not session.search_ready and "sessions_app.services.index_search_task" in queued
    assert search_selectors.matching_messages(q="gamma").count() == 0
    assert session_selectors.search_pending() == [session]
    for url in ("sessions:list_json", "sessions:search_json"):
        pending = client_in.get(reverse(url), {"q": "gamma"}).json()["search_pending"]
        assert [p["session"] for p in pending] == [session.pk]
    for url in (reverse("sessions:list"), reverse("sessions:search"), reverse("sessions:detail", args=[session.pk])):
        body = client_in.get(url, {"q": "gamma"}).content.decode()
        assert body.count("Still being indexed for search") == 1, url
    # The fragments htmx swaps in (the Ctrl+K panel is the search page's results fragment) say it too, once.
    for url in (reverse("sessions:list"), reverse("sessions:search")):
        fragment = client_in.get(url, {"q": "gamma"}, headers={"HX-Request": "true"}).content.decode()
        assert fragment.count("Still being indexed for search") == 1 and "<html" not in fragment, url
        assert "No worker is running" in fragment, url  # none beats here: the notice says how to start one
    assert client_in.get(reverse("sessions:search_json"), {"q": "gamma"}).json()["search_workers"] == 0
    sweeps.beat(worker_id="test-worker")  # a live worker: the notice only says to wait
    for url in (reverse("sessions:list"), reverse("sessions:search"), reverse("sessions:detail", args=[session.pk])):
        body = client_in.get(url, {"q": "gamma"}).content.decode()
        assert "Still being indexed for search" in body and "No worker is running" not in body, url
    assert client_in.get(reverse("sessions:list_json"), {"q": "gamma"}).json()["search_workers"] == 1
    # A small import into the session meanwhile waits with it (it does not index the large one itself).
    monkeypatch.setattr(services, "INDEX_INLINE_CHARS", 500_000)
    path.write_text(path.read_text() + user("u2", "a1", "gamma again"))
    services.import_paths(paths=[path])
    session.refresh_from_db()
    assert not session.search_ready and search_selectors.matching_messages(q="gamma").count() == 0
    assert services.index_search(session_id=session.pk) == 3  # what the task worker runs
    session.refresh_from_db()
    assert session.search_ready and session_selectors.search_pending() == []
    assert search_selectors.matching_messages(q="gamma").count() == 3
    assert client_in.get(reverse("sessions:search_json"), {"q": "gamma"}).json()["search_pending"] == []
    assert "Still being indexed" not in client_in.get(reverse("sessions:search"), {"q": "gamma"}).content.decode()
    _check_index()


@pytest.mark.django_db(transaction=True)  # the import's commit queues the task; the worker runs it for real
def test_the_task_worker_indexes_a_large_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.claude_code_lines import assistant, user, write
    from tests.helpers.worker import run_worker

    monkeypatch.setattr(services, "INDEX_INLINE_CHARS", 10)  # these few words stand for a large session
    path = write(
        tmp_path,
        "big.jsonl",
        user("u1", None, "epsilon question"),
        assistant("a1", "u1", "m1", "epsilon reply", ctx=20),
    )
    services.import_paths(paths=[path])
    session = models.Session.objects.get()
    assert not session.search_ready and search_selectors.matching_messages(q="epsilon").count() == 0
    run_worker()
    session.refresh_from_db()
    assert session.search_ready and session_selectors.search_pending() == []
    assert search_selectors.matching_messages(q="epsilon").count() == 2
    _check_index()


def test_a_session_still_being_indexed_can_be_changed_and_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records the index does not hold yet are changed and deleted without touching it (an external-content
    FTS5 index told to delete a row it lacks would no longer match its rows, migration 0017)."""
    from tests.helpers.claude_code_lines import assistant, user, write

    small = write(tmp_path, "small.jsonl", user("s1", None, "delta kept"), assistant("s2", "s1", "m0", "ok", ctx=20))
    services.import_paths(paths=[small])
    monkeypatch.setattr(services, "INDEX_INLINE_CHARS", 10)  # these few words stand for a large session
    big = write(tmp_path, "big.jsonl", user("u1", None, "delta pending"), assistant("a1", "u1", "m1", "x", ctx=20))
    services.import_paths(paths=[big])
    pending = models.Session.objects.get(search_ready=False)
    message = models.Message.objects.filter(session=pending, search_text__contains="pending").get()
    message.search_text = "delta renamed"
    message.save(update_fields=["search_text"])
    assert search_selectors.matching_messages(q="renamed").count() == 0  # still not indexed: the worker will do it
    pending.delete()
    _check_index()
    assert search_selectors.matching_messages(q="delta").count() == 1  # the small session's record, still found
    assert session_selectors.search_pending() == []


def test_a_part_of_a_path_or_a_dotted_name_is_found_on_both_databases(tmp_path) -> None:
    # PostgreSQL's parser keeps "/work/demo/CLAUDE.md" as one token; FTS5 splits it at punctuation. The index
    # reads words as FTS5 does on both, so both find the path's parts, as words and as a phrase.
    from tests.helpers.claude_code_lines import assistant, user, write

    path = write(
        tmp_path,
        "paths.jsonl",
        user("u1", None, "please open /work/demo/CLAUDE.md and check pkg.sub_module"),
        assistant("a1", "u1", "msg_1", "done", ctx=1000),
    )
    outcome = services.import_file(path=path)
    assert isinstance(outcome, services.FileImport) and outcome.session is not None
    session = models.Session.objects.get(pk=outcome.session)
    for q in ("demo/CLAUDE.md", '"CLAUDE.md"', "claude", "sub_module", "module", '"pkg.sub_module"'):
        assert search_selectors.matching_messages(q=q, session=session).filter(session=session).exists(), q
    for q in ("demo/CLAUDE.txt", "-claude open", '"md demo"'):
        assert not search_selectors.matching_messages(q=q, session=session).filter(session=session).exists(), q
