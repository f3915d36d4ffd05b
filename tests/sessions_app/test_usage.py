"""Usage across sessions (issue 36): the page, its JSON and CSV twins and ``manage.py usage`` give each session the
cost its own pages give it, count days in the zone asked for, group as ccusage writes its periods, show subagents
and inline subagents apart, and read in a number of queries that does not grow with the number of sessions."""

from __future__ import annotations

import csv
import importlib
import io
from io import StringIO
from typing import Any

import orjson
import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import models, services, sweeps
from sessions_app.selectors.calls import session_stats
from tests.conftest import AGENT_SAMPLE_FOLDERS, CLAUDE_SAMPLES, CODEX_SAMPLES
from tests.helpers.usage_sessions import import_usage, import_usage_inline

pytestmark = pytest.mark.django_db

TOKENS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_creation_1h_tokens", "cache_read_tokens")


def _command(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("usage", *args, "--json", stdout=out)
    return orjson.loads(out.getvalue())


def _web(client: Any, url: str) -> Any:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return orjson.loads(response.content)


# ----------------------------------------------------------------------------- one session, one cost


@pytest.mark.parametrize("agent", sorted(AGENT_SAMPLE_FOLDERS))
def test_each_sessions_usage_is_the_cost_its_pages_show(client_in, agent):
    report = services.import_paths(paths=[AGENT_SAMPLE_FOLDERS[agent]])
    assert report.rejected == []
    sessions = list(models.Session.objects.order_by("id"))
    assert sessions
    web = {row["session"]: row for row in _web(client_in, "/usage.json?by=session")["rows"]}
    cli = {row["session"]: row for row in _command("--by", "session")["rows"]}
    assert web == cli
    listed = {s["id"]: s for s in _web(client_in, "/sessions.json?per_page=200")["sessions"]}
    priced = 0
    for session in sessions:
        page = _web(client_in, f"/sessions/{session.pk}.json")["session"]
        stats = session_stats(session=session).cost.as_json()
        row = web.get(session.pk)
        where = (agent, session.pk, session.title[:40])
        if row is None:  # no call recorded usage: nothing to count, nothing spent
            assert stats["usage"] == dict.fromkeys(TOKENS, 0) and page["cost_usd"] in (0.0, None), where
            continue
        assert row["cost_usd"] == page["cost_usd"] == listed[session.pk]["cost_usd"] == stats["cost_usd"], where
        assert {name: row[name] for name in TOKENS} == stats["usage"], where
        priced += row["cost_usd"] is not None and row["cost_usd"] > 0
    # The sum over sessions is the total, in every grouping.
    total = _web(client_in, "/usage.json?by=session")["totals"]
    for by in ("day", "week", "month", "project", "model", "agent"):
        assert _web(client_in, f"/usage.json?by={by}&tz=UTC")["totals"] == total, by
    if agent in ("claude-code", "codex"):
        assert priced, "the samples of this agent record priced usage"


def test_subagents_and_inline_subagents_are_counted_and_shown_apart(client_in, tmp_path):
    sample = CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"
    services.import_paths(paths=[sample, sample.with_suffix("")])
    import_usage_inline(tmp_path, "inline-1", "2026-03-02T10:00:00.000Z")
    rows = {r["session"]: r for r in _web(client_in, "/usage.json?by=session")["rows"]}
    spotter = models.Session.objects.get(files__path=str(sample.resolve()))
    inline = models.Session.objects.get(external_id="inline-1")
    side_calls = models.ApiCall.objects.filter(session=spotter).exclude(agent="main").count()
    assert side_calls and rows[spotter.pk]["subagents"]["calls"] == side_calls
    assert 0 < rows[spotter.pk]["subagents"]["cost_usd"] < rows[spotter.pk]["cost_usd"]
    assert rows[spotter.pk]["inline_subagents"]["calls"] == 0
    # The inline response: its tokens are in the row, and apart (two lines of one response count once, the last
    # line's output).
    assert rows[inline.pk]["inline_subagents"]["calls"] == 1
    assert rows[inline.pk]["inline_subagents"]["input_tokens"] == 7
    assert rows[inline.pk]["inline_subagents"]["output_tokens"] == 40
    assert rows[inline.pk]["input_tokens"] == 10 + 7
    assert rows[inline.pk]["cost_usd"] == inline.cost_usd


# ----------------------------------------------------------------------------- days, weeks, months, zones


def test_days_are_counted_in_the_zone_asked_for(client_in, tmp_path, settings):
    # 03:00 UTC on 1 January 2026 is still 31 December 2025 in New York.
    import_usage(tmp_path, "zone", "2026-01-01T03:00:00.000Z", "2026-01-01T12:00:00.000Z")
    utc = _web(client_in, "/usage.json?by=day&tz=UTC")
    assert [(r["group"], r["calls"]) for r in utc["rows"]] == [("2026-01-01", 2)]
    assert utc["time_zone"] == "UTC"
    new_york = _web(client_in, "/usage.json?by=day&tz=America/New_York")
    assert [(r["group"], r["calls"]) for r in new_york["rows"]] == [("2025-12-31", 1), ("2026-01-01", 1)]
    assert [r["group"] for r in _web(client_in, "/usage.json?by=month&tz=America/New_York")["rows"]] == [
        "2025-12",
        "2026-01",
    ]
    # The setting is the default zone; the command's --timezone chooses another, as the page's tz does.
    settings.USAGE_TIME_ZONE = "America/New_York"
    assert _web(client_in, "/usage.json?by=day")["rows"] == new_york["rows"]
    assert _command("--by", "day", "--timezone", "UTC")["rows"] == utc["rows"]
    # Since and until are days of that zone.
    assert [r["group"] for r in _command("--by", "day", "--since", "2026-01-01")["rows"]] == ["2026-01-01"]
    assert [r["group"] for r in _command("--by", "day", "--until", "20251231")["rows"]] == ["2025-12-31"]


def test_a_zone_a_quarter_hour_off_utc_splits_its_days_at_its_own_midnight(client_in, tmp_path):
    # Kathmandu is UTC+5:45: 18:14 UTC is 23:59 there, 18:16 UTC is 00:01 the next day.
    import_usage(tmp_path, "nepal", "2026-01-01T18:14:59.000Z", "2026-01-01T18:16:00.000Z")
    days = _web(client_in, "/usage.json?by=day&tz=Asia/Kathmandu")["rows"]
    assert [(r["group"], r["calls"]) for r in days] == [("2026-01-01", 1), ("2026-01-02", 1)]


def test_days_across_a_daylight_saving_change_end_at_each_local_midnight(client_in, tmp_path):
    # New York moves from UTC-5 to UTC-4 at 07:00 UTC on 8 March 2026: 04:30 UTC is 23:30 on the 7th before it,
    # 03:30 UTC on the 9th is 23:30 on the 8th after it, and 04:30 UTC on the 9th is already the 9th.
    import_usage(tmp_path, "dst", "2026-03-08T04:30:00.000Z", "2026-03-09T03:30:00.000Z", "2026-03-09T04:30:00.000Z")
    days = _web(client_in, "/usage.json?by=day&tz=America/New_York")["rows"]
    assert [(r["group"], r["calls"]) for r in days] == [("2026-03-07", 1), ("2026-03-08", 1), ("2026-03-09", 1)]


def test_a_week_is_written_as_the_iso_date_of_its_monday(client_in, tmp_path):
    # Sunday 8 February and Monday 9 February 2026 fall in two ISO weeks.
    import_usage(tmp_path, "week", "2026-02-08T12:00:00.000Z", "2026-02-09T12:00:00.000Z")
    weeks = _web(client_in, "/usage.json?by=week&tz=UTC")["rows"]
    assert [(r["group"], r["calls"]) for r in weeks] == [("2026-02-02", 1), ("2026-02-09", 1)]


def test_filters_are_the_session_lists(client_in, tmp_path):
    import_usage(tmp_path, "one", "2026-01-05T12:00:00.000Z")
    import_usage(tmp_path, "two", "2026-01-06T12:00:00.000Z", model="claude-sonnet-4-5-20250929")
    one = models.Session.objects.get(external_id="one")
    models.Session.objects.filter(pk=one.pk).update(project="/elsewhere", has_compaction=True)
    by_model = _web(client_in, "/usage.json?by=model")["rows"]
    assert sorted(r["group"] for r in by_model) == ["claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929"]
    assert [r["session"] for r in _web(client_in, "/usage.json?by=session&project=/elsewhere")["rows"]] == [one.pk]
    assert [r["session"] for r in _web(client_in, "/usage.json?by=session&has_compaction=1")["rows"]] == [one.pk]
    only_sonnet = _web(client_in, "/usage.json?by=day&tz=UTC&model=claude-sonnet-4-5-20250929")["rows"]
    assert [r["group"] for r in only_sonnet] == ["2026-01-06"]
    assert _web(client_in, "/usage.json?by=agent&agent=codex")["rows"] == []
    assert [r["group"] for r in _web(client_in, "/usage.json?by=agent&agent=claude-code")["rows"]] == ["claude-code"]
    assert _command("--by", "session", "--project", "/elsewhere")["rows"][0]["session"] == one.pk


# ----------------------------------------------------------------------------- page, CSV, errors, queries


def test_the_session_list_links_its_sessions_usage(client_in, tmp_path):
    import_usage(tmp_path, "linked", "2026-01-05T12:00:00.000Z")
    html = client_in.get("/?agent=claude-code&has_compaction=1").content.decode()
    assert 'href="/usage/?agent=claude-code&amp;has_compaction=1"' in html


def test_the_page_shows_the_table_and_the_charts_data(client_in, tmp_path):
    import_usage(tmp_path, "page", "2026-01-05T12:00:00.000Z", "2026-01-07T12:00:00.000Z")
    response = client_in.get("/usage/?by=day&tz=UTC&stack=agent")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'href="/usage/"' in html  # the header links the page
    assert "2026-01-05" in html and "2026-01-07" in html
    chart = response.context["chart"]
    assert chart["stack"] == "agent" and chart["groups"] == ["2026-01-05", "2026-01-07"]
    assert [s["agent"] for s in chart["series"]] == ["claude-code"]
    assert "data-chart=" in html and "usage.js" in html
    # An htmx request gets the results region only.
    partial = client_in.get("/usage/?by=month&tz=UTC", headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<div id="results">') and "2026-01" in partial


def test_the_chart_folds_the_smallest_sessions_into_one_bar(client_in, tmp_path, monkeypatch):
    from sessions_app.views import usage as usage_views

    monkeypatch.setattr(usage_views, "CHART_BARS", 3)
    for n in range(5):
        import_usage(tmp_path, f"fold-{n}", *[f"2026-01-0{d + 1}T12:00:00.000Z" for d in range(n + 1)])
    response = client_in.get("/usage/?by=session")
    chart = response.context["chart"]
    rows = response.context["report"].rows
    assert len(rows) == 5 and chart["groups"][-1] == "3 others" and len(chart["groups"]) == 3
    (series,) = chart["series"]
    assert series["values"][:2] == [round(r.numbers.cost, 6) for r in rows[:2]]
    assert series["values"][2] == pytest.approx(sum(r.numbers.cost for r in rows[2:]), abs=1e-6)
    # A time line keeps every period.
    assert len(client_in.get("/usage/?by=day&tz=UTC").context["chart"]["groups"]) == 5


def test_the_csv_has_a_header_and_one_row_per_group(client_in, tmp_path):
    import_usage(tmp_path, "csv", "2026-01-05T12:00:00.000Z", "2026-01-07T12:00:00.000Z")
    response = client_in.get("/usage.csv?by=day&tz=UTC")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert 'filename="usage-by-day.csv"' in response["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:3] == ["group", "label", "input_tokens"] and "cost_usd" in rows[0]
    assert [r[0] for r in rows[1:]] == ["2026-01-05", "2026-01-07"]
    as_json = _web(client_in, "/usage.json?by=day&tz=UTC")["rows"]
    cost = rows[0].index("cost_usd")
    assert [float(r[cost]) for r in rows[1:]] == [r["cost_usd"] for r in as_json]
    out = StringIO()
    call_command("usage", "--by", "day", "--timezone", "UTC", "--csv", stdout=out)
    assert list(csv.reader(io.StringIO(out.getvalue()))) == rows


def test_an_unknown_zone_or_grouping_is_refused_with_a_reason(client_in):
    response = client_in.get("/usage.json?tz=Mars/Olympus")
    assert response.status_code == 400 and "Mars/Olympus" in orjson.loads(response.content)["error"]
    assert client_in.get("/usage/?by=fortnight").status_code == 400
    with pytest.raises(CommandError, match="Unknown time zone"):
        call_command("usage", "--timezone", "Mars/Olympus", stdout=StringIO())


def test_the_pages_queries_do_not_grow_with_the_sessions(client_in, tmp_path):
    def queries(url: str) -> int:
        client_in.get(url)  # the login session and price lookups, once
        with CaptureQueriesContext(connection) as seen:
            assert client_in.get(url).status_code == 200
        # Only the usage cells the import keeps are read, never the calls or the records.
        read = " ".join(q["sql"] for q in seen.captured_queries)
        assert models.ApiCall._meta.db_table not in read and models.Message._meta.db_table not in read, url
        return len(seen)

    urls = [f"/usage/?by={by}&tz=UTC" for by in ("day", "week", "session", "model")] + ["/usage.json?by=session"]
    import_usage_inline(tmp_path, "few-0", "2026-01-05T12:00:00.000Z")
    few = [queries(url) for url in urls]
    for n in range(1, 7):
        import_usage_inline(tmp_path, f"many-{n}", f"2026-01-{5 + n:02d}T12:00:00.000Z")
        import_usage(tmp_path, f"plain-{n}", f"2026-02-{n:02d}T12:00:00.000Z")
    many = [queries(url) for url in urls]
    assert len(_web(client_in, "/usage.json?by=session")["rows"]) == 13
    assert many == few
    assert max(many) <= 12


def test_the_migration_fills_the_cells_the_import_keeps(client_in):
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"])
    kept = _web(client_in, "/usage.json?by=day&tz=UTC")
    assert kept["rows"]
    models.UsageCell.objects.all().delete()
    assert _web(client_in, "/usage.json?by=day&tz=UTC")["rows"] == []
    migration = importlib.import_module("sessions_app.migrations.0028_usage_cells")
    migration.fill_usage_cells(django_apps, None)
    assert _web(client_in, "/usage.json?by=day&tz=UTC") == kept


def test_cells_split_at_a_tier_the_prices_no_longer_have_are_made_again(client_in, settings):
    services.import_paths(paths=[CLAUDE_SAMPLES / "spotter_ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"])
    session = models.Session.objects.get()
    assert sweeps.rebuild_stale_usage_cells() == 0
    tiered = set(models.UsageCell.objects.values_list("model", "tier_start"))
    model = next(name for name, tier in tiered if tier is not None)  # genai-prices tiers it at 200k
    settings.MODEL_PRICES = {model: {"input": 1, "output": 2}}  # a flat price: no tier
    assert sweeps.rebuild_stale_usage_cells() == 1
    assert set(models.UsageCell.objects.filter(model=model).values_list("tier_start", flat=True)) == {None}
    row = _web(client_in, "/usage.json?by=session")["rows"][0]
    assert row["cost_usd"] == session_stats(session=session).cost.total_usd


def test_a_total_without_a_price_says_which_model_has_none(client_in):
    # Codex 0.34.0's rollout names no model: its calls have no price, so neither has the total; the page says why.
    services.import_file(path=CODEX_SAMPLES / "openprintkit__0.34.0__rollout-2025-10-31T19-02-58-c61729d4.jsonl")
    page = client_in.get("/usage/").content.decode()
    assert 'id="usage-total-cost">no price<' in page
    assert "No total cost: no price is known for unknown model (<code>MODEL_PRICES</code> gives one)." in page
