"""Retrying transient model failures with exponential backoff and full jitter.

Providers raise :class:`~orchestrator.models.base.ModelError` with ``transient=True`` for failures
that may pass (rate limits, overload, 5xx, dropped connections). :class:`RetryingModel` wraps any
model and repeats the whole call for those. When the server said how long to wait (``Retry-After``),
providers raise :class:`RetryAfterError`, a ``ModelError`` that carries the hint.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from orchestrator.models.base import Model, ModelError, ModelEvent, ModelRequest

OnRetry = Callable[[int, float, ModelError], Awaitable[None]]
"""Called as ``on_retry(failed_attempt, delay_s, error)`` before sleeping; attempts count from 1."""


class RetryAfterError(ModelError):
    """A transient :class:`ModelError` with the server's hint of how long to wait.

    Attributes:
        retry_after_s: seconds the server asked us to wait before trying again.
    """

    def __init__(self, message: str, *, retry_after_s: float, status: int | None = None) -> None:
        super().__init__(message, transient=True, status=status)
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None) -> float | None:
    """Parse a ``Retry-After`` header (delta seconds or an HTTP date) into seconds, if valid."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    # A negative or non-finite hint is useless; ``x == x`` filters out NaN.
    if seconds != seconds or seconds == float("inf"):
        return None
    return max(0.0, seconds)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry.

    Attributes:
        max_attempts: total attempts including the first; 1 disables retrying.
        base_delay_s: backoff ceiling for the first retry; it doubles with every further retry.
        max_delay_s: upper bound for any single wait, including a server's ``Retry-After``.
    """

    max_attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def delay_s(self, failed_attempt: int, error: ModelError) -> float:
        """The wait after attempt number ``failed_attempt`` (from 1) failed with ``error``.

        Full jitter (uniform between 0 and the exponential ceiling) spreads out clients that failed
        together, so they do not retry in lockstep. A server's ``Retry-After`` is a floor: retrying
        earlier would only fail again.
        """
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (failed_attempt - 1))
        delay = random.uniform(0.0, ceiling)
        if isinstance(error, RetryAfterError):
            delay = max(delay, min(error.retry_after_s, self.max_delay_s))
        return delay


class RetryingModel:
    """A :class:`~orchestrator.models.base.Model` that retries its inner model's transient errors.

    The whole call is repeated, so text deltas already yielded by a failed attempt are followed by
    the deltas of the next one; ``on_retry`` tells the consumer to discard what it displayed. The
    final :class:`~orchestrator.models.base.ModelResponse` always comes from a single attempt.
    Permanent errors, and the error of the last attempt, propagate unchanged.
    """

    def __init__(self, inner: Model, policy: RetryPolicy | None = None, on_retry: OnRetry | None = None) -> None:
        """Wrap ``inner``.

        Args:
            inner: the model to call.
            policy: attempts and backoff; the :class:`RetryPolicy` defaults when omitted.
            on_retry: awaited as ``on_retry(failed_attempt, delay_s, error)`` before each wait.
        """
        if policy is not None and policy.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self._on_retry = on_retry

    @property
    def name(self) -> str:
        """The inner model's name."""
        return self.inner.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the inner model's events, retrying transient failures.

        Raises:
            ModelError: a permanent failure, or the failure of the last allowed attempt.
        """
        attempt = 1
        while True:
            try:
                async with _closing(self.inner.stream(request)) as events:
                    async for event in events:
                        yield event
                return
            except ModelError as error:
                if not error.transient or attempt >= self.policy.max_attempts:
                    raise
                delay = self.policy.delay_s(attempt, error)
                if self._on_retry is not None:
                    await self._on_retry(attempt, delay, error)
                await anyio.sleep(delay)
                attempt += 1


@asynccontextmanager
async def _closing(events: AsyncIterator[ModelEvent]) -> AsyncIterator[AsyncIterator[ModelEvent]]:
    # Close a failed or abandoned attempt's stream (and its HTTP response) right away instead of
    # whenever the garbage collector gets to it; the Model protocol only promises an iterator.
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
