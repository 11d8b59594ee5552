"""Retrying a tool call that failed for a transient reason, only when repeating it is harmless.

Only ``server_unavailable`` (the server is down or being restarted) and ``outcome_unknown`` (it died
or its connection broke during the call) are transient: another attempt after a restart can succeed.
A call that broke mid-flight may already have had its effect, so only tools whose server promises
``readOnlyHint`` or ``idempotentHint`` are retried; a tool without annotations counts as
side-effecting and is never repeated, and the model is told its outcome is unknown.

Not retried, by design: ``timed_out`` (the call already used its whole time limit, and slow calls
are usually slow again, so a retry would multiply the wait the user configured), ``tool_error`` (the
tool ran and said no), ``invalid_arguments``, ``unknown_tool`` and ``denied`` (the same call fails
the same way).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import anyio
from mcp import types as mt

from orchestrator.events import FailureKind
from orchestrator.hub.outcomes import ToolOutcome

TRANSIENT_FAILURES: frozenset[FailureKind] = frozenset({"server_unavailable", "outcome_unknown"})
"""Failure kinds that another attempt may cure."""


def may_retry(annotations: mt.ToolAnnotations | None) -> bool:
    """Whether repeating a call of a tool with these annotations is harmless (read-only or idempotent)."""
    if annotations is None:
        return False
    return annotations.read_only_hint is True or annotations.idempotent_hint is True


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a transient failure is retried.

    Delays use exponential backoff with full jitter: before retry ``n`` the wait is uniform in
    ``[0, min(max_delay_s, base_delay_s * 2**(n-1))]``, so calls that failed together do not come
    back together. No retry starts once ``budget_s`` has passed since the first attempt began.
    """

    attempts: int = 3
    """Attempts in total, the first included."""
    base_delay_s: float = 0.5
    max_delay_s: float = 4.0
    budget_s: float = 30.0
    jitter: Callable[[], float] = field(default=random.random)
    """Returns a number in [0, 1); injectable so tests are deterministic."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if min(self.base_delay_s, self.max_delay_s, self.budget_s) < 0:
            raise ValueError("delays and budget must not be negative")

    def backoff(self, retry: int) -> float:
        """The jittered wait before retry number ``retry`` (1 for the first retry)."""
        cap = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        return self.jitter() * cap


NO_RETRY = RetryPolicy(attempts=1)
"""A policy that never retries."""


async def call_with_retries(
    attempt: Callable[[], Awaitable[ToolOutcome]],
    policy: RetryPolicy,
    *,
    retryable: bool,
    not_before: Callable[[], float] = lambda: 0.0,
) -> ToolOutcome:
    """Run ``attempt`` and, if it failed transiently and ``retryable``, run it again within ``policy``.

    Args:
        attempt: One try of the call; returns an outcome and never raises for a tool failure.
        policy: Attempts, delays and the time budget.
        retryable: The tool may be repeated safely (see :func:`may_retry`).
        not_before: The ``anyio.current_time()`` before which another attempt cannot succeed (the
            hub's restart backoff for the server); a retry waits for it when the budget allows.

    Returns:
        The last attempt's outcome; if it was retried, the content says so and ``attempts`` counts.
    """
    started = anyio.current_time()
    outcome = await attempt()
    first = outcome
    tries = 1
    while retryable and outcome.failure in TRANSIENT_FAILURES and tries < policy.attempts:
        now = anyio.current_time()
        delay = max(policy.backoff(tries), not_before() - now)
        if now + delay - started > policy.budget_s:
            break
        await anyio.sleep(delay)
        outcome = await attempt()
        tries += 1
    if tries == 1:
        return outcome
    retries = f"{tries - 1} {'retry' if tries == 2 else 'retries'}"
    if outcome.is_error:
        note = f" (gave up after {retries})"
    else:
        why = "its server stopped during the call" if first.failure == "outcome_unknown" else "server unavailable"
        note = f"\n\n(succeeded after {retries}; the first attempt failed: {why})"
    return replace(outcome, content=outcome.content + note, attempts=tries)
