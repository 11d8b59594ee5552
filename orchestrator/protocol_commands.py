"""The face's results for the tools behind a client's commands: a session's mode, its skills.

Part of the face's protocol like :mod:`orchestrator.protocol` (``docs/protocol.md`` lists them), kept in a
module of their own. Only pydantic is imported, so a client pays for nothing else.
"""

from __future__ import annotations

from pydantic import BaseModel

from orchestrator.protocol_servers import ModelList  # list_models moved beside list_servers; kept importable here

__all__ = ["ModeInfo", "ModelList", "SkillInfo", "SkillList"]


class ModeInfo(BaseModel):
    """A session's policy mode after ``set_mode``; the next tool call is decided under it."""

    session_id: str
    mode: str
    previous: str
    changed: bool
    """False when the session was already in ``mode`` (nothing was recorded)."""


class SkillInfo(BaseModel):
    """A skill a session's model can load (``/NAME`` in the TUI asks the model to use it)."""

    name: str
    description: str
    source: str
    """``user`` ($LOOM_HOME/skills) or ``project`` (.loom/skills under the project root)."""


class SkillList(BaseModel):
    """The skills of a session's project and of the user, by name; ``problems`` says which were left out and why."""

    session_id: str
    skills: list[SkillInfo]
    problems: list[str] = []
