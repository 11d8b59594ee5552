"""Model profiles: what Loom must know about a model beyond its name, starting with its context window.

The window decides the watermark (tokens used / window) and when a session compacts. Known model
families have built-in windows; anything else gets a conservative default, and every value can be
set in config (``"models": {"openai:my-model": {"contextWindow": 32000, "compactAt": 0.7}}``, keys
matched as shell-style patterns, the most specific — longest — pattern winning). A scripted model
may carry its own window (``"context_window"`` in the script), which is how tests and demos cross
the threshold in a few turns.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_THRESHOLD = 0.8
"""Compact when the watermark passes this ratio: room is left for the next answer and its tool results."""

DEFAULT_WINDOW = 128_000
"""For models Loom does not know: the common window of current hosted models, and small enough to be safe."""

_KNOWN: tuple[tuple[str, int], ...] = (
    # Most specific first; matched against "provider:name".
    ("anthropic:claude-*", 200_000),
    ("openai:gpt-4.1*", 1_000_000),
    ("openai:gpt-4o*", 128_000),
    ("openai:deepseek*", 128_000),
    ("openai:kimi*", 128_000),
    ("openai:moonshot*", 128_000),
    ("scripted:*", 200_000),
)
KNOWN_WINDOWS = _KNOWN
"""Loom's built-in windows by ``provider:name`` pattern, most specific first (``list_models`` shows them)."""


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the runtime needs to know about one model."""

    context_window: int
    """Tokens the model accepts per request, input and output together."""
    compact_threshold: float = DEFAULT_THRESHOLD
    """Watermark ratio past which the session compacts before its next model call."""


@dataclass(frozen=True, slots=True)
class ProfileSettings:
    """A config entry under ``models``: any field left None keeps the built-in value."""

    context_window: int | None = None
    compact_threshold: float | None = None


def profile_for(
    spec: str, settings: Mapping[str, ProfileSettings] | None = None, *, own_window: int | None = None
) -> ModelProfile:
    """The profile of the model named ``spec`` (``provider:name``).

    Args:
        spec: the model's name as Loom shows it.
        settings: the config's ``models`` entries, keyed by pattern.
        own_window: a window the model declares itself (a scripted model's ``context_window``); config
            still wins over it, since the user may know better.
    """
    window = own_window or next((w for pattern, w in _KNOWN if fnmatch.fnmatchcase(spec, pattern)), DEFAULT_WINDOW)
    threshold = DEFAULT_THRESHOLD
    matching = sorted(
        ((p, s) for p, s in (settings or {}).items() if fnmatch.fnmatchcase(spec, p)), key=lambda ps: len(ps[0])
    )
    for _pattern, entry in matching:  # least specific first, so the most specific is applied last
        window = entry.context_window or window
        threshold = entry.compact_threshold if entry.compact_threshold is not None else threshold
    return ModelProfile(context_window=window, compact_threshold=threshold)
