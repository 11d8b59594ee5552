"""What every event has: its place in the session's log, its session and when it was made.

Its own module so that the event vocabulary can span modules (:mod:`orchestrator.events` holds the union,
:mod:`orchestrator.events_long` the events of long work) without an import cycle.
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

__all__ = ["_EventBase"]


class _EventBase(BaseModel):
    seq: int | None = None
    """Position in the session's log; assigned by the store, ``None`` for live-only events."""
    session_id: str
    ts: float = Field(default_factory=time.time)
    """Wall-clock time the event was created (seconds since the epoch)."""
