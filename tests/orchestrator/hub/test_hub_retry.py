"""Failure classification and retries, against a real stdio server that dies mid-call."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from orchestrator.hub import outcomes
from orchestrator.hub.pool import Hub
from orchestrator.hub.retry import RetryPolicy, call_with_retries
from tests.orchestrator.hub.test_hub_limits import limits_server

pytestmark = pytest.mark.anyio

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05, budget_s=10, jitter=lambda: 1.0)
QUICK_RESTARTS = (0.05, 0.1)


def runs(record: Path, tag: str) -> int:
    return record.read_text().splitlines().count(f"run {tag}") if record.exists() else 0


def fast_hub(record: Path, tmp_path: Path, retry: RetryPolicy = FAST) -> Hub:
    return Hub({}, [limits_server(record)], log_dir=tmp_path, retry=retry, restart_backoff_s=QUICK_RESTARTS)


async def test_an_idempotent_tool_is_retried_after_the_server_dies_and_restarts(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    failures: list[str] = []

    async def on_failure(server: str, error: str) -> None:
        failures.append(server)

    hub = Hub(
        {},
        [limits_server(record)],
        log_dir=tmp_path,
        on_failure=on_failure,
        retry=FAST,
        restart_backoff_s=QUICK_RESTARTS,
    )
    async with hub:
        with anyio.fail_after(20):
            outcome = await hub.call("ext__crash_once_idempotent", {"tag": "a"})
    assert (outcome.is_error, outcome.failure, outcome.attempts) == (False, None, 2)
    assert outcome.content.startswith("done a")
    assert "succeeded after 1 retry; the first attempt failed: its server stopped during the call" in outcome.content
    assert runs(record, "a") == 2
    assert failures == ["ext"]  # the crash is still reported, even though the call recovered


async def test_a_tool_without_annotations_is_never_retried(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with fast_hub(record, tmp_path) as hub:
        with anyio.fail_after(20):
            outcome = await hub.call("ext__crash_once", {"tag": "b"})
            await anyio.sleep(0.3)  # long enough for a (wrong) retry to have run
    assert (outcome.failure, outcome.attempts) == ("outcome_unknown", 1)
    assert "retr" not in outcome.content
    assert runs(record, "b") == 1


async def test_retries_are_bounded_in_attempts(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    async with fast_hub(record, tmp_path) as hub:
        with anyio.fail_after(30):
            outcome = await hub.call("ext__crash_always", {"tag": "c"})
    assert (outcome.failure, outcome.attempts) == ("outcome_unknown", 3)
    assert outcome.content.endswith("(gave up after 2 retries)")
    assert runs(record, "c") == 3


async def test_retries_are_bounded_in_time(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    no_time = RetryPolicy(attempts=5, base_delay_s=0.01, budget_s=0.0, jitter=lambda: 1.0)
    async with fast_hub(record, tmp_path, retry=no_time) as hub:
        with anyio.fail_after(20):
            outcome = await hub.call("ext__crash_always", {"tag": "d"})
    assert (outcome.failure, outcome.attempts) == ("outcome_unknown", 1)
    assert runs(record, "d") == 1


@pytest.mark.parametrize(
    ("arguments", "failure", "says"),
    [
        ({}, "tool_error", "no such ticket"),
        ({"protocol_code": -32602}, "invalid_arguments", "tag must name an existing ticket"),
        ({"protocol_code": -32603}, "tool_error", "database is locked"),
    ],
)
async def test_failures_that_would_repeat_are_classified_and_not_retried(
    tmp_path: Path, arguments: dict[str, int], failure: str, says: str
) -> None:
    record = tmp_path / "record.txt"
    async with fast_hub(record, tmp_path) as hub:
        outcome = await hub.call("ext__refuse", {"tag": "e", **arguments})
    assert (outcome.is_error, outcome.failure, outcome.attempts) == (True, failure, 1)
    assert says in outcome.content
    assert runs(record, "e") == 1


async def test_a_timed_out_call_is_not_retried(tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    cfg = limits_server(record, tool_timeouts={"sleepy": 0.3})
    async with Hub({}, [cfg], log_dir=tmp_path, retry=FAST) as hub:
        outcome = await hub.call("ext__sleepy", {"tag": "f", "seconds": 30})  # read-only, yet not repeated
    assert (outcome.failure, outcome.attempts) == ("timed_out", 1)
    assert record.read_text().splitlines().count("start f") == 1


def test_backoff_is_exponential_capped_and_fully_jittered() -> None:
    top = RetryPolicy(base_delay_s=0.5, max_delay_s=3, jitter=lambda: 1.0)
    assert [top.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert RetryPolicy(jitter=lambda: 0.0).backoff(3) == 0.0
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)


async def test_retries_wait_for_the_servers_restart_window() -> None:
    tries: list[float] = []

    async def attempt() -> outcomes.ToolOutcome:
        tries.append(anyio.current_time())
        return outcomes.server_unavailable("x", "down") if len(tries) < 2 else outcomes.ToolOutcome("ok")

    ready_at = anyio.current_time() + 0.2
    outcome = await call_with_retries(attempt, FAST, retryable=True, not_before=lambda: ready_at)
    assert outcome.attempts == 2 and tries[1] >= ready_at


def test_every_failure_message_is_short_and_says_what_to_do() -> None:
    messages = [
        outcomes.unknown_tool("fs__raed", [f"fs__tool{i}" for i in range(50)]),
        outcomes.invalid_arguments("fs__read", "'path' is a required property"),
        outcomes.server_unavailable("gh", "stopped answering: " + "x" * 2000),
        outcomes.timed_out("fs__grep", 30, read_only=True),
        outcomes.timed_out("gh__merge", 30, read_only=False),
    ]
    for outcome in messages:
        assert outcome.is_error and outcome.failure is not None
        assert len(outcome.content) < 700, outcome.content
        assert any(word in outcome.content for word in ("call one of", "Fix", "try another way", "Try")), outcome
