"""Summarizers against the real ``anthropic`` SDK talking to the scripted server (no network)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from compaction.costs import call_cost
from compaction.summarize import (
    TRUNCATION_MARKER,
    AnthropicSummarizer,
    OfflineSummarizer,
    SummaryFailed,
    SummaryRequest,
    estimate_cost_usd,
    model_family,
    rounds_to_drop,
)
from compaction.tokens import chars_div_4
from compaction.transcript import Usage
from tests.anthropic_server import (
    ScriptedServer,
    drop_stream,
    ok,
    prompt_too_long,
    slow,
    start_server,
    status,
    stream_error,
)
from tests.compaction.summary_requests import SONNET, make_request

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-ant-test-Zq9SECRETkey-0123456789"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = start_server()
    yield scripted
    scripted.close()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def summarizer(server: ScriptedServer, sleeps: list[float]) -> Iterator[AnthropicSummarizer]:
    with AnthropicSummarizer(api_key=API_KEY, base_url=server.url, sleep=sleeps.append, jitter=False) as instance:
        yield instance


def user_text(body: dict) -> str:
    (message,) = body["messages"]
    assert message["role"] == "user"
    return message["content"]


def test_success_returns_text_usage_and_cost(server: ScriptedServer, summarizer: AnthropicSummarizer) -> None:
    server.script(ok("The user wants the login bug fixed.", input_tokens=1_200, output_tokens=300))

    result = summarizer.summarize(make_request())

    assert result.text == "The user wants the login bug fixed."
    assert (result.input_tokens, result.output_tokens) == (1_200, 300)
    # Sonnet 5 list price $2 / $10 per MTok (platform.claude.com/docs/models/sonnet-5/overview).
    assert result.cost_usd == pytest.approx((1_200 * 2 + 300 * 10) / 1_000_000)
    assert result.model == SONNET
    assert (result.attempts, result.dropped_rounds, result.offline) == (1, 0, False)
    assert result.raw["stop_reason"] == "end_turn"
    (body,) = server.requests
    assert body["stream"] is True
    assert body["model"] == SONNET
    assert body["max_tokens"] == 20_000
    assert body["system"] == "You are a helpful AI assistant tasked with summarizing conversations."
    sent = user_text(body)
    assert sent.startswith("User: fix the login bug")
    assert sent.endswith("Summarise the conversation so far.")
    assert TRUNCATION_MARKER not in sent


def test_unknown_model_has_no_cost(server: ScriptedServer, summarizer: AnthropicSummarizer) -> None:
    server.script(ok("summary"))
    result = summarizer.summarize(make_request(model="my-local-proxy-model"))
    assert result.text == "summary"
    assert result.cost_usd is None


def test_429_waits_for_retry_after_then_succeeds(
    server: ScriptedServer, summarizer: AnthropicSummarizer, sleeps: list[float]
) -> None:
    server.script(status(429, retry_after=7), ok("after the rate limit"))

    result = summarizer.summarize(make_request())

    assert result.text == "after the rate limit"
    assert result.attempts == 2
    assert sleeps == [7.0]  # the server's retry-after, not our own backoff
    assert len(server.requests) == 2
    assert result.raw["attempt_log"][0]["error"].startswith("429 rate limited")


def test_retry_after_is_capped(server: ScriptedServer, sleeps: list[float]) -> None:
    server.script(status(429, retry_after=3_600), ok("done"))
    with AnthropicSummarizer(api_key=API_KEY, base_url=server.url, sleep=sleeps.append, retry_after_cap=30.0) as capped:
        assert capped.summarize(make_request()).text == "done"
    assert sleeps == [30.0]


def test_529_until_the_breaker_opens(
    server: ScriptedServer, summarizer: AnthropicSummarizer, sleeps: list[float]
) -> None:
    server.script(*[status(529) for _ in range(5)])

    with pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request())

    assert str(failed.value).startswith("circuit breaker open after 3 consecutive failures: 529 overloaded")
    assert failed.value.reason == "circuit_breaker"
    assert failed.value.attempts == 3
    assert len(server.requests) == 3  # exactly 3 attempts; the SDK itself did not retry
    assert server.pending() == 2
    # Claude Code's backoff (withRetry.ts getRetryDelay): 0.5 s * 2^(n-1), no sleep after the last failure.
    assert sleeps == [0.5, 1.0]


def test_max_attempts_bounds_the_requests(server: ScriptedServer, sleeps: list[float]) -> None:
    server.script(status(503), status(503), ok("unused"))
    limited = AnthropicSummarizer(api_key=API_KEY, base_url=server.url, sleep=sleeps.append, max_attempts=2)
    with limited, pytest.raises(SummaryFailed) as failed:
        limited.summarize(make_request())
    assert failed.value.reason == "max_attempts"
    assert str(failed.value).startswith("gave up after 2 attempts: 503 server error")
    assert len(server.requests) == 2
    assert len(sleeps) == 1  # no pointless wait after the last allowed attempt


def test_500_then_success(server: ScriptedServer, summarizer: AnthropicSummarizer, sleeps: list[float]) -> None:
    server.script(status(500), ok("recovered"))
    result = summarizer.summarize(make_request())
    assert result.text == "recovered"
    assert result.attempts == 2
    assert sleeps == [0.5]


def test_different_transient_failures_count_toward_the_breaker(
    server: ScriptedServer, summarizer: AnthropicSummarizer
) -> None:
    # 529, 500 and a dropped stream are all consecutive failures: the third opens the breaker.
    server.script(status(529), status(500), drop_stream("partial answer that never ends"), ok("unused"))
    with pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request())
    assert "3 consecutive failures: stream dropped" in str(failed.value)
    assert server.pending() == 1


def test_prompt_too_long_retries_without_the_oldest_round(
    server: ScriptedServer, summarizer: AnthropicSummarizer, sleeps: list[float]
) -> None:
    rounds = ["ROUND-ONE " + "a" * 400, "ROUND-TWO " + "b" * 400, "ROUND-THREE " + "c" * 400]
    # 50 tokens over: dropping round one (about 100 estimated tokens) covers the gap.
    server.script(prompt_too_long(tokens=100_050, maximum=100_000), ok("shorter summary"))

    result = summarizer.summarize(make_request(rounds=rounds))

    assert result.text == "shorter summary"
    assert result.dropped_rounds == 1
    assert result.attempts == 2
    assert sleeps == []  # the request changed; nothing to wait for
    first, second = (user_text(body) for body in server.requests)
    assert "ROUND-ONE" in first
    assert "ROUND-ONE" not in second
    assert "ROUND-TWO" in second and "ROUND-THREE" in second
    assert second.startswith(TRUNCATION_MARKER)


def test_prompt_too_long_drops_enough_rounds_to_cover_the_gap(
    server: ScriptedServer, summarizer: AnthropicSummarizer
) -> None:
    rounds = [f"ROUND-{n} " + "x" * 392 for n in range(5)]  # 400 chars = 100 estimated tokens each
    server.script(prompt_too_long(tokens=1_250, maximum=1_000), ok("fits now"))

    result = summarizer.summarize(make_request(rounds=rounds))

    assert result.dropped_rounds == 3  # 250 tokens over: three rounds of 100
    second = user_text(server.requests[1])
    assert [n for n in range(5) if f"ROUND-{n} " in second] == [3, 4]


def test_prompt_too_long_with_nothing_left_to_drop_fails(
    server: ScriptedServer, summarizer: AnthropicSummarizer
) -> None:
    server.script(prompt_too_long(tokens=210_000, maximum=200_000))
    with pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request(rounds=["the only round"]))
    assert failed.value.reason == "prompt_too_long"
    assert "prompt is too long: 210000 tokens > 200000 maximum" in str(failed.value)
    assert "no older round is left to drop" in str(failed.value)
    assert len(server.requests) == 1


def test_dropped_stream_then_success(
    server: ScriptedServer, summarizer: AnthropicSummarizer, sleeps: list[float]
) -> None:
    server.script(drop_stream("one two three four five six seven eight nine ten eleven twelve"), ok("complete"))
    progress: list[str] = []
    result = summarizer.summarize(make_request(), on_progress=progress.append)
    assert result.text == "complete"
    assert result.attempts == 2
    assert len(sleeps) == 1
    assert "stream dropped" in result.raw["attempt_log"][0]["error"]
    assert progress[-1] == "complete"


def test_overloaded_error_inside_a_stream_is_retried(server: ScriptedServer, summarizer: AnthropicSummarizer) -> None:
    server.script(stream_error("overloaded_error"), ok("after the mid-stream error"))
    result = summarizer.summarize(make_request())
    assert result.text == "after the mid-stream error"
    assert result.raw["attempt_log"][0]["error"].startswith("529 overloaded")


def test_progress_receives_growing_text(server: ScriptedServer, sleeps: list[float]) -> None:
    final = "The session set out to fix the login bug, read auth/login.py and added a regression test for it."
    server.script(slow(final, chunk_delay=0.01))
    progress: list[str] = []
    with AnthropicSummarizer(api_key=API_KEY, base_url=server.url, sleep=sleeps.append, progress_interval_s=0) as s:
        result = s.summarize(make_request(), on_progress=progress.append)
    assert result.text == final
    assert len(progress) > 3
    assert all(
        later.startswith(earlier) and len(later) > len(earlier) for earlier, later in itertools.pairwise(progress)
    )
    assert progress[-1] == final


def test_progress_is_throttled(server: ScriptedServer) -> None:
    final = " ".join(f"word{n}" for n in range(60))
    server.script(ok(final))
    progress: list[str] = []
    with AnthropicSummarizer(api_key=API_KEY, base_url=server.url, progress_interval_s=3_600) as s:
        s.summarize(make_request(), on_progress=progress.append)
    assert progress == [final]  # only the final text within an hour-long throttle window


def test_rejected_request_fails_at_once_and_never_shows_the_key(
    server: ScriptedServer, summarizer: AnthropicSummarizer
) -> None:
    server.script(status(401, message=f"invalid x-api-key: {API_KEY}"), ok("unused"))
    with pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request())
    error = failed.value
    assert error.reason == "rejected"
    assert len(server.requests) == 1
    assert "401 authentication_error" in str(error)
    shown = [str(error), repr(error), error.last_error, "".join(traceback.format_exception(error))]
    assert all(API_KEY not in text for text in shown)
    assert "[redacted]" in str(error)
    assert error.__context__ is None and error.__cause__ is None  # the SDK error (and its request) is not kept
    assert API_KEY not in repr(summarizer)


def test_breaker_message_never_shows_the_key(server: ScriptedServer, summarizer: AnthropicSummarizer) -> None:
    server.script(*[status(529, message=f"Overloaded (key {API_KEY})") for _ in range(3)])
    with pytest.raises(SummaryFailed) as failed:
        summarizer.summarize(make_request())
    assert API_KEY not in str(failed.value)
    assert API_KEY not in "".join(traceback.format_exception(failed.value))


def test_summarizer_needs_a_key() -> None:
    with pytest.raises(ValueError, match="OfflineSummarizer"):
        AnthropicSummarizer(api_key="")


# --- prices and round dropping -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5-20250929", ("sonnet", "4.5")),
        ("claude-opus-4-20250514", ("opus", "4")),
        ("claude-opus-4-1", ("opus", "4.1")),
        ("claude-haiku-4-5", ("haiku", "4.5")),
        ("claude-sonnet-5", ("sonnet", "5")),
        ("claude-opus-5-5", ("opus", "5.5")),
        ("claude-3-5-haiku-20241022", ("haiku", "3.5")),
        ("claude-3-opus-latest", ("opus", "3")),
        ("gpt-4o", None),
    ],
)
def test_model_family(model: str, family: tuple[str, str] | None) -> None:
    assert model_family(model) == family


@pytest.mark.parametrize(
    ("model", "dollars_for_1m_in_1m_out"),
    [
        # List prices, per MTok input + output (docs.anthropic.com pricing; platform.claude.com model pages).
        ("claude-opus-4-1-20250805", 15 + 75),
        ("claude-opus-4-5-20251101", 5 + 25),
        ("claude-sonnet-4-20250514", 3 + 15),
        ("claude-haiku-4-5-20251001", 1 + 5),
        ("claude-3-haiku-20240307", 0.25 + 1.25),
        ("claude-opus-5-5", 4 + 20),
        ("claude-sonnet-5", 2 + 10),
    ],
)
def test_cost_uses_list_prices(model: str, dollars_for_1m_in_1m_out: float) -> None:
    cost = estimate_cost_usd(model=model, input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost == pytest.approx(dollars_for_1m_in_1m_out)


def test_cost_of_unknown_model_is_none() -> None:
    assert estimate_cost_usd(model="llama-3", input_tokens=10, output_tokens=10) is None


def test_a_run_is_costed_with_the_price_table_of_sessions() -> None:
    """One price table: a summary call costs what the same usage in a session costs (compaction.costs)."""
    usage = Usage(input_tokens=1200, output_tokens=300, cache_creation_input_tokens=5000, cache_read_input_tokens=9000)
    for model in ("claude-sonnet-4-5-20250929", "claude-haiku-5-5", "claude-opus-4-1-20250805"):
        session_cost = call_cost(usage, model=model)
        assert session_cost is not None
        run_cost = estimate_cost_usd(
            model=model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens,
        )
        assert run_cost == pytest.approx(session_cost.total)
    own = {"my-model": {"input": 1.0, "output": 2.0}}  # MODEL_PRICES: a model the package does not know
    assert estimate_cost_usd(model="my-model", input_tokens=10**6, output_tokens=10**6, prices=own) == 3.0


def test_rounds_to_drop_without_a_gap_drops_twenty_percent() -> None:
    # Claude Code's fallback when the token gap cannot be parsed: max(1, floor(n * 0.2)) (compaction doc §1.2).
    assert rounds_to_drop([1] * 10, token_gap=None) == 2
    assert rounds_to_drop([1] * 3, token_gap=None) == 1
    assert rounds_to_drop([1], token_gap=None) == 0
    assert rounds_to_drop([100] * 4, token_gap=10_000) == 3  # always keeps one round


def test_rounds_to_drop_covers_the_gap_with_the_fewest_oldest_rounds() -> None:
    assert rounds_to_drop([2, 1_006, 1_006, 1_006, 1_006], token_gap=2_500) == 4  # 2 + 3 x 1,006 >= 2,500
    assert rounds_to_drop([2, 1_006, 1_006, 1_006, 1_006], token_gap=1_000) == 2


# --- offline ------------------------------------------------------------------------------------

OFFLINE_TRANSCRIPT = """\
User: Please fix the flaky login test and make the session timeout configurable.
Assistant: I'll start by reading the test.
[tool_use Read] {"file_path": "/repo/tests/test_login.py"}
[tool_result] def test_login(): ...  # TODO: stop sleeping here
Assistant: The test sleeps; I will patch auth/session.py as well.
[tool_use Edit] {"file_path": "/repo/auth/session.py", "old_string": "30", "new_string": "settings.TIMEOUT"}
[tool_result] The file /repo/auth/session.py has been updated.
Assistant: Next step: run the suite with pytest tests/test_login.py.
User: Also update docs/config.md when you are done.
"""


def offline_request(transcript: str = OFFLINE_TRANSCRIPT) -> SummaryRequest:
    return SummaryRequest(
        system="sys", transcript=transcript, rounds=None, model=SONNET, max_tokens=20_000, instructions="Summarise."
    )


def test_offline_summary_is_deterministic_and_labelled() -> None:
    first = OfflineSummarizer().summarize(offline_request())
    second = OfflineSummarizer().summarize(offline_request())

    assert first.text == second.text
    assert (first.input_tokens, first.output_tokens) == (second.input_tokens, second.output_tokens)
    assert first.offline is True
    assert "offline extractive summary" in first.text.splitlines()[0].lower()
    assert first.model != SONNET  # no model was called, so none is claimed
    assert first.cost_usd == 0.0
    assert first.output_tokens == chars_div_4(first.text)
    assert first.input_tokens == chars_div_4("sys") + chars_div_4(OFFLINE_TRANSCRIPT) + chars_div_4("Summarise.")


def test_offline_summary_sections() -> None:
    text = OfflineSummarizer().summarize(offline_request()).text
    sections = {chunk.split("\n", 1)[0]: chunk.split("\n", 1)[1] for chunk in text.split("\n## ")[1:] if "\n" in chunk}
    assert set(sections) == {"Objective", "Files touched", "Last actions", "Open tasks"}
    assert sections["Objective"].startswith("Please fix the flaky login test")
    files = [line[2:] for line in sections["Files touched"].splitlines() if line.startswith("- ")]
    assert files == ["/repo/tests/test_login.py", "/repo/auth/session.py"]
    assert "Next step: run the suite" in sections["Last actions"]
    assert "TODO: stop sleeping here" in sections["Open tasks"]
    assert "Last user request: Also update docs/config.md" in sections["Open tasks"]


def test_offline_summary_of_unstructured_text() -> None:
    result = OfflineSummarizer().summarize(offline_request("just some notes about src/app/main.py\nnothing else"))
    assert "## Objective\njust some notes about src/app/main.py" in result.text
    assert "- src/app/main.py" in result.text
    assert "## Open tasks\n- (none found)" in result.text


def test_offline_reports_progress_once() -> None:
    progress: list[str] = []
    result = OfflineSummarizer().summarize(offline_request(), on_progress=progress.append)
    assert progress == [result.text]


# --- the scripted server itself ------------------------------------------------------------------


def test_server_answers_non_streaming_requests_and_records_them(server: ScriptedServer) -> None:
    client = anthropic.Anthropic(api_key=API_KEY, base_url=server.url, max_retries=0)
    try:
        message = client.messages.create(model=SONNET, max_tokens=50, messages=[{"role": "user", "content": "hello"}])
    finally:
        client.close()
    assert message.content[0].type == "text"
    assert "scripted" in message.content[0].text  # the deterministic default answer
    assert message.usage.output_tokens > 0
    assert server.requests == [{"model": SONNET, "max_tokens": 50, "messages": [{"role": "user", "content": "hello"}]}]
    assert all(API_KEY not in value for value in server.request_headers[0].values())


def test_server_runs_as_a_standalone_process() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.anthropic_server", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:")
        with AnthropicSummarizer(api_key=API_KEY, base_url=url) as summarizer:
            result = summarizer.summarize(make_request())
        assert "scripted" in result.text
    finally:
        process.terminate()
        process.wait(timeout=10)
