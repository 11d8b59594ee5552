"""RetryingModel and RetryPolicy against an in-memory model."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import AsyncIterator

import pytest

from orchestrator.messages import Message, TextBlock
from orchestrator.models.base import ModelError, ModelEvent, ModelRequest, ModelResponse, TextDelta
from orchestrator.models.retry import RetryAfterError, RetryingModel, RetryPolicy, parse_retry_after
from tests.orchestrator.models.helpers import collect, request

pytestmark = pytest.mark.anyio

TINY = RetryPolicy(max_attempts=4, base_delay_s=0.001, max_delay_s=0.002)


class FlakyModel:
    """Fails with the given errors (one per call, after a delta), then answers."""

    def __init__(self, *errors: ModelError) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.closed = 0

    @property
    def name(self) -> str:
        return "flaky:model"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        try:
            yield TextDelta(f"attempt {self.calls}")
            if self.errors:
                raise self.errors.pop(0)
            message = Message(role="assistant", content=[TextBlock(text="done")])
            yield ModelResponse(message=message, stop_reason="end_turn")
        finally:
            self.closed += 1


def transient(status: int = 529) -> ModelError:
    return ModelError(f"overloaded {status}", transient=True, status=status)


async def test_transient_errors_are_retried_until_success() -> None:
    inner = FlakyModel(transient(), transient(429))
    seen: list[tuple[int, float, str]] = []

    async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
        seen.append((attempt, delay_s, str(error)))

    deltas, response = await collect(RetryingModel(inner, TINY, on_retry=on_retry), request())

    assert response.message.text == "done"
    # Deltas of failed attempts were shown too; on_retry is the consumer's cue to discard them.
    assert deltas == ["attempt 1", "attempt 2", "attempt 3"]
    assert [(a, e) for a, _, e in seen] == [(1, "overloaded 529"), (2, "overloaded 429")]
    assert all(0 <= d <= TINY.max_delay_s for _, d, _ in seen)
    assert inner.closed == inner.calls == 3


async def test_last_transient_error_propagates_unchanged_after_max_attempts() -> None:
    errors = [transient() for _ in range(10)]
    inner = FlakyModel(*errors)

    with pytest.raises(ModelError) as caught:
        await collect(RetryingModel(inner, TINY), request())

    assert inner.calls == TINY.max_attempts
    assert caught.value is errors[TINY.max_attempts - 1]


async def test_permanent_error_is_not_retried() -> None:
    error = ModelError("401 authentication_error", transient=False, status=401)
    inner = FlakyModel(error)
    calls: list[int] = []

    async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
        calls.append(attempt)

    with pytest.raises(ModelError) as caught:
        await collect(RetryingModel(inner, TINY, on_retry=on_retry), request())

    assert caught.value is error
    assert inner.calls == 1
    assert calls == []


async def test_single_attempt_policy_never_retries() -> None:
    inner = FlakyModel(transient())

    with pytest.raises(ModelError):
        await collect(RetryingModel(inner, RetryPolicy(max_attempts=1)), request())

    assert inner.calls == 1


async def test_abandoned_stream_closes_the_inner_attempt() -> None:
    inner = FlakyModel()
    events = RetryingModel(inner, TINY).stream(request())
    assert isinstance(await anext(events), TextDelta)

    await events.aclose()  # type: ignore[attr-defined]

    assert inner.closed == 1


async def test_retry_after_is_a_floor_capped_by_max_delay() -> None:
    seen: list[float] = []

    async def on_retry(attempt: int, delay_s: float, error: ModelError) -> None:
        seen.append(delay_s)

    hinted = RetryAfterError("429 rate_limit_error", retry_after_s=0.03, status=429)
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.05)
    started = time.monotonic()
    await collect(RetryingModel(FlakyModel(hinted), policy, on_retry=on_retry), request())

    assert seen == [0.03]
    assert time.monotonic() - started >= 0.03
    assert policy.delay_s(1, RetryAfterError("x", retry_after_s=3600)) == 0.05


def test_backoff_is_full_jitter_under_an_exponential_ceiling() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=30.0)
    random.seed(1234)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (40, 30.0)]:
        delays = [policy.delay_s(attempt, transient()) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        # Full jitter spreads over the whole range rather than clustering near the ceiling.
        assert min(delays) < ceiling * 0.1 and max(delays) > ceiling * 0.9


def test_name_passes_through() -> None:
    assert RetryingModel(FlakyModel()).name == "flaky:model"


def test_zero_attempts_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryingModel(FlakyModel(), RetryPolicy(max_attempts=0))


def test_parse_retry_after() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.25 ") == 0.25
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    future = email.utils.formatdate(time.time() + 120, usegmt=True)
    parsed = parse_retry_after(future)
    assert parsed is not None and 100 < parsed <= 120
    past = email.utils.formatdate(time.time() - 120, usegmt=True)
    assert parse_retry_after(past) == 0.0
