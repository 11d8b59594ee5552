"""The agent definitions spawn's description lists, read again only when their files change.

Every session Loom opens prepares a subagents server, and parsing the definitions (YAML front matter, the
built-in roles included) costs about 10 ms: more than preparing all of a session's other servers. What they
list depends only on the ``*.md`` files in ``$LOOM_HOME/agents`` and ``<project>/.loom/agents``, so the listing
is kept per home and project for as long as :mod:`orchestrator.agents.cache` keeps their catalog (while no
definition file changed: a stat of each, microseconds).
"""

from __future__ import annotations

import threading
from pathlib import Path

from orchestrator.agents import render_agents
from orchestrator.agents.cache import current_catalog
from orchestrator.agents.loading import AgentCatalog

__all__ = ["agents_listing"]

_KEPT = 64
"""Listings kept (one per home and project seen); past it the oldest is dropped."""
_listings: dict[tuple[str, str], tuple[AgentCatalog, str]] = {}
_lock = threading.Lock()
"""Sessions are prepared in worker threads, several at once."""


def agents_listing(home: Path, project: Path | None) -> str:
    """``render_agents`` of the built-in, user and project definitions, as the face accepts them for ``agent``."""
    key = (str(home), str(project))
    catalog = current_catalog(home, project)
    with _lock:
        kept = _listings.get(key)
    if kept is not None and kept[0] is catalog:  # the cache gives the same catalog while no file changed
        return kept[1]
    listing = render_agents(list(catalog.agents.values()))
    with _lock:
        if len(_listings) >= _KEPT and key not in _listings:
            _listings.pop(next(iter(_listings)))
        _listings[key] = (catalog, listing)
    return listing
