"""Where Loom keeps its state: ``$LOOM_HOME``, or ``~/.loom``.

Its own module, imported by the configuration and by the policy's rule files alike, so that neither
has to import the other.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["loom_home"]


def loom_home() -> Path:
    """``$LOOM_HOME``, or ``~/.loom``."""
    env = os.environ.get("LOOM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".loom"
