"""The agent catalog, read again only when a definition file changes.

Reading the definitions (YAML front matter, the built-in roles included) costs about 10 ms, and it is needed
whenever a session is prepared (its ``spawn`` tool lists the agents) and whenever a child is started (its
definition is looked up by name). What it finds depends only on the ``*.md`` files in ``$LOOM_HOME/agents`` and
``<project>/.loom/agents``, so the catalog is kept per home and project with those files' names, sizes,
modification times and inodes, and read again when any of them differs (a stat of each: microseconds). A
definition edited between two spawns is therefore seen by the second.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from orchestrator.agents.loading import AgentCatalog
from orchestrator.agents.roles import catalog_with_builtins

__all__ = ["current_catalog", "definitions_state"]

_KEPT = 64
"""Catalogs kept (one per home and project seen); past it the oldest is dropped."""
_catalogs: dict[tuple[str, str], tuple[object, AgentCatalog]] = {}
_lock = threading.Lock()
"""Sessions are prepared in worker threads, several at once."""


def _files(directory: Path) -> tuple[object, ...]:
    try:
        with os.scandir(directory) as entries:
            found: list[tuple[object, ...]] = []
            for entry in entries:
                if entry.name.endswith(".md"):
                    try:
                        st = entry.stat()
                    except OSError:
                        found.append((entry.name, None))
                        continue
                    found.append((entry.name, st.st_size, st.st_mtime_ns, st.st_ino))
            return tuple(sorted(found, key=repr))
    except OSError as exc:  # missing or unreadable: as the catalog will find it
        return (type(exc).__name__,)


def definitions_state(home: Path, project: Path | None) -> object:
    """What the catalog of ``home`` and ``project`` depends on: equal states give equal catalogs."""
    return (_files(home / "agents"), _files(project / ".loom" / "agents") if project is not None else ())


def current_catalog(home: Path, project: Path | None) -> AgentCatalog:
    """:func:`~orchestrator.agents.roles.catalog_with_builtins`, from memory while no definition file changed.

    Blocking (it stats the definition directories, and reads them when they changed): call it from a worker
    thread.
    """
    key = (str(home), str(project))
    state = definitions_state(home, project)
    with _lock:
        kept = _catalogs.get(key)
    if kept is not None and kept[0] == state:
        return kept[1]
    catalog = catalog_with_builtins(home, project)
    with _lock:
        if len(_catalogs) >= _KEPT and key not in _catalogs:
            _catalogs.pop(next(iter(_catalogs)))
        _catalogs[key] = (state, catalog)
    return catalog
