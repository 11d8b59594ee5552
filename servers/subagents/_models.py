"""What the subagents tools take and return: the shapes the model reads (their JSON schemas are the tools')."""

from __future__ import annotations

from pydantic import BaseModel, Field

from servers.subagents._summary import ChildState

__all__ = ["MAX_SPAWN_MANY", "MAX_TIMEOUT_S", "ChildSpec", "SpawnEntry", "Spawned", "SpawnedMany", "WaitResult"]

MAX_SPAWN_MANY = 32
"""Children one spawn_many may start."""
MAX_TIMEOUT_S = 24 * 3600.0
"""The longest deadline a child's run may be given."""


class ChildSpec(BaseModel):
    """One child to start: spawn's arguments."""

    goal: str = Field(min_length=1, max_length=100_000, description="the child's task, self-contained")
    agent: str | None = Field(None, max_length=64, description="an agent definition's name (see spawn)")
    allow: list[str] | None = Field(
        None, max_length=64, description="tool-name globs the child may use (fs__read, shell__*); omit: yours"
    )
    model: str | None = Field(None, max_length=500, description="a model spec; omit: the agent's or yours")
    max_steps: int = Field(30, ge=1, le=1000, description="model calls the child may make")
    timeout_s: float = Field(600, gt=0, le=MAX_TIMEOUT_S, description="seconds before the child is stopped")


class Spawned(BaseModel):
    """A child that started."""

    child_id: str
    """The child's session id: for wait, result, send, cancel (and `loom attach CHILD`)."""
    run_id: str
    agent: str = ""
    status: str


class SpawnEntry(BaseModel):
    """One of spawn_many's children: started, or why not."""

    index: int
    started: bool
    child_id: str = ""
    run_id: str = ""
    agent: str = ""
    status: str = ""
    error: str = ""


class SpawnedMany(BaseModel):
    """What spawn_many started, in the order asked."""

    children: list[SpawnEntry]
    started: int
    refused: int


class WaitResult(BaseModel):
    """Finished children's results, and how the others are getting on."""

    finished: list[ChildState]
    running: list[ChildState]
    """Children still going when the wait ended: their progress (status, steps, current tool, elapsed)."""
    waited_s: float
    timed_out: bool
    """The wait's own bound passed before what was waited for happened (the children go on)."""
    note: str = ""
