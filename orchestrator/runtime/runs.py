"""A run's identity and how it ended: what the sessions, the host and the faces share about runs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

DEFAULT_MAX_STEPS = 50
"""Model calls a run may make unless its caller says otherwise."""


def new_id(prefix: str) -> str:
    """A short random id such as ``r_3f9a1c2b7d4e``."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended, as a face reports it."""

    run_id: str
    status: str
    reason: str
    final_text: str
    steps: int
