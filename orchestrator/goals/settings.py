"""The top-level ``goals`` key of ``$LOOM_HOME/config.json``: how goals run.

``{"goals": {"handoffAt": 0.7, "graderTimeout": 900}}``: ``handoffAt`` is the watermark (context used / window,
between 0 and 1, or ``null`` for never) past which a goal's next work session continues from a handoff instead of
starting fresh; ``graderTimeout`` is each grader run's deadline in seconds.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GoalSettings", "SettingsError", "parse_settings", "read_settings"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GoalSettings:
    """How goals run (the top-level ``goals`` key of the config).

    Attributes:
        handoff_at: A work session whose watermark (context used / window) reached this is continued through a
            handoff by the next session; None: never.
        grader_timeout_s: Each grader run's deadline.
        wait_grace_s: How long past a child's own deadline the controller waits before cancelling it itself.
    """

    handoff_at: float | None = 0.7
    grader_timeout_s: float = 900.0
    wait_grace_s: float = 30.0


class SettingsError(ValueError):
    """The ``goals`` key cannot be used; the message says what to write."""


def parse_settings(raw: object, where: str = "goals") -> GoalSettings:
    """The settings in a ``goals`` value.

    Raises:
        SettingsError: Not an object, an unknown key, or a value out of range.
    """
    if not isinstance(raw, dict):
        raise SettingsError(f'{where} must be an object such as {{"handoffAt": 0.7}}')
    unknown = sorted(set(raw) - {"handoffAt", "graderTimeout"})
    if unknown:
        raise SettingsError(f"{where}: unknown key {unknown[0]!r}; use handoffAt or graderTimeout")
    settings = GoalSettings()
    handoff = raw.get("handoffAt", settings.handoff_at)
    if handoff is not None and (
        isinstance(handoff, bool) or not isinstance(handoff, int | float) or not 0 < handoff <= 1
    ):
        raise SettingsError(f"{where}.handoffAt must be a number above 0 and at most 1 (or null), not {handoff!r}")
    timeout = raw.get("graderTimeout", settings.grader_timeout_s)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise SettingsError(f"{where}.graderTimeout must be a number of seconds above 0, not {timeout!r}")
    return GoalSettings(handoff_at=None if handoff is None else float(handoff), grader_timeout_s=float(timeout))


def read_settings(home: Path) -> GoalSettings:
    """The ``goals`` settings of ``home/config.json`` (the defaults when absent; logged and defaulted when invalid)."""
    path = home / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return GoalSettings()  # a missing file means the defaults; an invalid one is reported by the CLI
    if not isinstance(data, dict) or "goals" not in data:
        return GoalSettings()
    try:
        return parse_settings(data["goals"], f"{path}: goals")
    except SettingsError as exc:
        logger.warning("%s; goals run with the defaults", exc)
        return GoalSettings()
