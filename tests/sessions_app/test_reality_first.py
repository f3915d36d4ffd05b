"""Reality first (issue 33): where the agent really compacted, the preview and the replay start from what it did.

Every shared sample with a real compaction is imported once for the module (``compacted``): the preview's command
and its page, and the replay's command, are asked at each real compaction of each of them.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command

from compaction.strategies.registry import default_parameters, strategy_for_format
from sessions_app import models, services
from sessions_app.selectors import conversation as conversation_selectors
from tests.helpers.sample_sessions import compacted_samples

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Real:
    """One real compaction of a sample, as the session's own events say it."""

    session: int
    name: str
    strategy: str
    after_call: int
    trigger: str
    context_after: int | None


@pytest.fixture(scope="module")
def compacted(django_db_setup, django_db_blocker) -> Iterator[list[Real]]:
    """Each sample with a real compaction imported once for the whole module, and its real compactions."""
    with django_db_blocker.unblock():
        report = services.import_paths(paths=compacted_samples())
        assert report.rejected == []
        sessions = list(models.Session.objects.order_by("id"))
        reals = []
        for session in sessions:
            stats = command("session_stats", str(session.pk), "--json")
            for event in stats["events"]:
                if event["kind"] == "compaction" and event["agent"] == "main":
                    reals.append(
                        Real(
                            session=session.pk,
                            name=sample_name(session),
                            strategy=strategy_for_format(session.format),
                            after_call=event["after_call"],
                            trigger=event["trigger"],
                            context_after=event["context_after"],
                        )
                    )
    yield reals
    with django_db_blocker.unblock():
        models.Session.objects.filter(pk__in=[s.pk for s in sessions]).delete()


def sample_name(session: models.Session) -> str:
    path = Path(session.files.order_by("id").values_list("path", flat=True)[0])
    return path.parent.name if path.name == "events.jsonl" else path.name


def command(name: str, *args: str) -> dict:
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return json.loads(out.getvalue())


def test_every_agent_with_a_real_compaction_is_in_the_samples(compacted):
    # The rest of the module asks each of them: a sample of every agent that compacts.
    assert {r.strategy for r in compacted} == {"claude-code", "codex", "klaude-code", "khaelor"}
    assert len(compacted) >= 12


def test_the_preview_at_a_real_compaction_says_compact_and_shows_what_really_happened(compacted):
    for real in compacted:
        data = command(
            "preview", str(real.session), "--strategy", real.strategy, "--at", str(real.after_call), "--json"
        )
        where = (real.name, real.after_call)
        assert data["should_compact"] is True, (where, data["reason"])
        assert data["real"] is not None, where
        assert {"cut", "summary_tokens", "context_after"} <= set(data["real"]), where
        # What really happened is the record's: the context the first call after it sent.
        assert data["real"]["context_after"] == real.context_after, where
        if real.trigger == "manual":
            # No rule fires a /compact: the agent's own strategy acts because the agent did, and says so.
            assert "really compacted here" in data["reason"], where


def test_another_strategy_at_a_real_compaction_shows_reality_beside_its_own_rule(compacted):
    real = next(r for r in compacted if r.strategy == "claude-code")
    data = command("preview", str(real.session), "--strategy", "khaelor", "--at", str(real.after_call), "--json")
    # Not the session's agent: its own rule decides, and what really happened is shown beside it.
    assert data["should_compact"] == data["rule_should_compact"]
    assert data["real"]["context_after"] == real.context_after


def test_a_point_without_a_real_compaction_has_no_real_block(compacted):
    real = compacted[0]
    data = command("preview", str(real.session), "--strategy", real.strategy, "--at", "1", "--json")
    assert data["real"] is None


def test_the_preview_page_shows_what_really_happened_without_none_true_or_false(client_in, compacted):
    for real in compacted:
        query = {"strategy": real.strategy, "at": real.after_call}
        response = client_in.get(f"/sessions/{real.session}/preview/", query)
        assert response.status_code == 200
        page = response.content.decode()
        assert 'id="real-compaction"' in page, real
        if real.context_after is not None:
            assert f"{real.context_after:,}" in page
        # No Python literal leaks into the page's own text (typed fields, proper labels); the session's records
        # are quoted as they are.
        assert not literals(own_parts(page)), (real, literals(own_parts(page)))


def own_parts(page: str) -> str:
    """The page's forms, facts, tables and notes: what it writes itself, not the transcript it quotes."""
    parts = re.findall(
        r"<form.*?</form>|<dl class=\"facts\">.*?</dl>|<table.*?</table>|<p class=\"small[^>]*>.*?</p>",
        page,
        flags=re.S,
    )
    return "\n".join(parts)


def literals(html: str) -> list[str]:
    """Python's None, True or False as text or as a field's value."""
    text = re.sub(r"<[^>]+>", " ", html)
    shown = re.findall(r".{0,60}\b(?:None|True|False)\b.{0,20}", text)
    return shown + re.findall(r'value="(?:None|True|False)"', html)


def replayed(real: Real, *extra: str) -> dict:
    return command("replay", str(real.session), "--strategy", real.strategy, *extra, "--json")


def test_every_agents_replay_follows_the_real_compactions_by_default(compacted):
    for real in compacted:
        data = replayed(real)
        assert data["follow_reality"] is True, real
        events = [e for e in data["events"] if e["kind"] == "compaction"]
        # Each compaction event says, as the session's events do, the context before and after it.
        assert all({"after_call", "context_before", "context_after"} <= set(e) for e in events)
        met = [e for e in events if e["followed"] and abs(e["after_call"] - real.after_call) <= 1]
        assert met, (real, [(e["after_call"], e["trigger"]) for e in events])
        if real.context_after is not None:
            # Taken up where it happened: the replay continues from the recorded context after it.
            assert any(e["context_after"] == real.context_after for e in met), real
        # Its peak is never below a context it compacts at.
        assert all(data["peak"]["tokens"] >= e["tokens_before"] for e in events), real


def test_following_is_its_own_switch_not_a_parameter_value(compacted):
    real = next(r for r in compacted if r.strategy == "klaude-code")
    session = models.Session.objects.get(pk=real.session)
    info = conversation_selectors.session_info(session=session)
    key, value = next((k, v) for k, v in default_parameters(real.strategy, info=info).items() if v is not None)
    # A parameter set to its own default value keeps following what really happened.
    assert replayed(real, "--param", f"{key}={value}")["follow_reality"] is True
    assert replayed(real, "--no-follow-reality")["follow_reality"] is False
    # Another agent's strategy models its own path unless asked to follow.
    other = command("replay", str(real.session), "--strategy", "khaelor", "--json")
    assert other["follow_reality"] is False
    assert command("replay", str(real.session), "--strategy", "khaelor", "--follow-reality", "--json")["follow_reality"]


def test_the_what_if_page_has_the_follow_switch_and_typed_fields(client_in, compacted):
    real = next(r for r in compacted if r.strategy == "claude-code")
    url = f"/sessions/{real.session}/timeline/"
    page = client_in.get(url, {"replay": ["claude-code", "codex"], "claude-code.follow": "0"}).content.decode()
    assert 'name="claude-code.follow"' in page and 'name="codex.follow"' in page
    assert '<option value="0" selected>' in page  # the switch as asked
    assert "every compaction modelled" in page
    assert not literals(own_parts(page))
    data = client_in.get(
        f"/sessions/{real.session}/timeline.json", {"replay": "claude-code", "claude-code.follow": "0"}
    ).json()
    assert data["replays"]["claude-code"]["follow_reality"] is False


def test_the_modelled_replay_meets_each_real_compaction_within_one_call_and_20_percent(compacted):
    misses, unrecorded = {}, []
    for real in compacted:
        data = replayed(real, "--no-follow-reality")
        assert data["follow_reality"] is False
        near = [
            e
            for e in data["events"]
            if e["kind"] == "compaction" and abs(e["after_call"] - real.after_call) <= 1 and not e["followed"]
        ]
        if real.context_after is None and near:
            unrecorded.append((real.name, real.after_call))
        elif not near or not any(
            abs(e["context_after"] - real.context_after) <= 0.2 * real.context_after for e in near
        ):
            misses[(real.name, real.after_call)] = [(e["after_call"], e["context_after"]) for e in near]
    assert misses == {}
    # Only a log without usage records no context after its compaction: there the call is what can be checked.
    assert unrecorded == [("ledger-migration.events.jsonl", 23)]


def test_a_replay_of_a_log_without_usage_decides_with_the_agents_own_count_where_the_log_records_it(compacted):
    real = next(r for r in compacted if r.strategy == "khaelor")
    data = replayed(real, "--no-follow-reality")
    notes = " ".join(data["notes"])
    # Its one count of the agent's own (the compaction's tokensBefore) would measure what the log does not show, but
    # the record contradicts it as an offset carried by every request: said, and not used as one.
    assert "No usage is recorded, and the log's numbers contradict each other" in notes
    assert f"compaction after call {real.after_call} (161,250)" in notes and "after call 12, where it did not" in notes
    assert data["baseline"] == 0
    # Where the record gives that count, the decision uses it (reality first): the agent's own strategy compacts
    # there, with the agent's own count before it, and nowhere else.
    events = [e for e in data["events"] if e["kind"] == "compaction"]
    assert [(e["after_call"], e["tokens_before"]) for e in events] == [(real.after_call, 161_250)]
    assert data["peak"]["tokens"] >= 161_250
    assert dict(data["counted"])[real.after_call] < 160_000  # the call before: the log's estimate alone


def test_no_what_if_or_diagnosis_page_renders_none_true_or_false(client_in, compacted):
    every = [("replay", name) for name in ("claude-code", "klaude-code", "khaelor", "codex")]
    for session in sorted({r.session for r in compacted}):
        for url, query in (
            (f"/sessions/{session}/timeline/", every),
            (f"/sessions/{session}/diagnosis/", []),
            (f"/sessions/{session}/", []),
        ):
            response = client_in.get(url + "?" + "&".join(f"{k}={v}" for k, v in query))
            assert response.status_code == 200, url
            # Every replay's recorded-vs-replayed table, its notes and the forms: no Python literal as text.
            assert not literals(own_parts(response.content.decode())), (
                url,
                literals(own_parts(response.content.decode())),
            )


def test_the_what_if_shows_the_overflow_at_the_models_limit_and_a_looping_parameter_set(client_in, compacted):
    real = next(r for r in compacted if r.strategy == "claude-code" and r.name.startswith("entirecli_a5d8"))
    # Codex's strategy on a Claude Code session: the model's 200,000, not Codex's 272,000, and the overflow shown.
    codex = command("replay", str(real.session), "--strategy", "codex", "--json")
    assert codex["window"] == 200_000 and codex["follow_reality"] is False
    overflow = next(e for e in codex["events"] if e["kind"] == "overflow")
    assert overflow["tokens_before"] > 200_000
    assert any("accepts at most 200,000" in n for n in codex["notes"])
    # A compaction line below what a compaction leaves (5 % of the window): flagged, and stopped where the session's
    # version stops it (2.1.7 has no such rule: it keeps compacting, and the replay says so).
    looping = replayed(real, "--param", "pct_override=5", "--no-follow-reality")
    assert looping["thrashing"] is not None and looping["thrashing"]["rapid_compactions"] >= 3
    assert any("free too little" in n and "no rule that stops it" in n for n in looping["notes"])
    stopped = replayed(real, "--param", "pct_override=5", "--param", "version=2.1.89", "--no-follow-reality")
    assert stopped["thrashing"]["stopped_after_call"] is not None
    # The page shows both, as the JSON twin does.
    page = client_in.get(
        f"/sessions/{real.session}/timeline/",
        {"replay": ["codex", "claude-code"], "claude-code.pct_override": "5", "claude-code.follow": "0"},
    ).content.decode()
    assert "accepts at most 200,000" in page and "free too little" in page
    assert not literals(own_parts(page))


def test_the_preview_at_a_real_prune_shows_it_and_the_agents_own_strategy_clears_the_same_results(client_in, compacted):
    prunes = []
    for session in sorted({r.session for r in compacted}):
        stats = command("session_stats", str(session), "--json")
        strategy = strategy_for_format(stats["format"])
        prunes += [
            (session, strategy, e)
            for e in stats["events"]
            if e["kind"] in ("microcompact", "prune") and e["agent"] == "main"
        ]
    # A Claude Code microcompact before its auto compaction, one on its own, and KHAELOR's context.pruned.
    assert len(prunes) >= 3 and {"claude-code", "khaelor"} <= {strategy for _, strategy, _ in prunes}
    for session, strategy, event in prunes:
        at = str(event["after_call"])
        data = command("preview", str(session), "--strategy", strategy, "--at", at, "--json")
        real = data["real_prune"]
        assert real is not None and real["tool_ids"], (session, at)
        assert set(real["tool_ids"]) <= set(data["prune"]), (session, at)
        page = client_in.get(f"/sessions/{session}/preview/", {"strategy": strategy, "at": at}).content.decode()
        assert "What really happened here: a prune" in page
        assert f'id="real-prune-results">{len(real["tool_ids"]):,}<' in page
    data = command("preview", str(prunes[0][0]), "--strategy", prunes[0][1], "--at", "1", "--json")
    assert data["real_prune"] is None


def test_the_previews_context_after_is_the_modelled_replays_at_each_first_real_compaction(compacted):
    # One number: before the replay's history parts from the session's, a compaction at the same point leaves the same
    # context in the preview and in the what-if replay, for every agent.
    firsts = {}
    for real in compacted:
        firsts.setdefault(real.session, real)
    assert {real.strategy for real in firsts.values()} == {"claude-code", "codex", "klaude-code", "khaelor"}
    met = set()
    for real in firsts.values():
        at = str(real.after_call)
        preview = command("preview", str(real.session), "--strategy", real.strategy, "--at", at, "--json")
        replayed = command("replay", str(real.session), "--strategy", real.strategy, "--no-follow-reality", "--json")
        event = next(
            (e for e in replayed["events"] if e["kind"] == "compaction" and e["after_call"] == real.after_call), None
        )
        if event is None:
            continue  # the rule fires a call away from the real one: another point, another context
        assert preview["context_after_estimate"] == event["context_after"], (real.name, at)
        met.add(real.strategy)
    assert met == {"claude-code", "codex", "klaude-code", "khaelor"}
