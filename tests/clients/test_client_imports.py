"""Clients reach Loom through one path: the client library, the protocol types and the in-process face's factory.

Every import of Loom's own packages anywhere under ``clients/`` (at module level or inside a function) must
be one of :data:`ALLOWED`; a client that imports the host, the event log, the store, policy, resume or a
model provider would be driving the runtime around its face.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

CLIENTS = Path(__file__).resolve().parents[2] / "clients"

ALLOWED: dict[str, frozenset[str] | None] = {
    # The protocol: what the face's tools return, and the events.
    "orchestrator.protocol": None,
    "orchestrator.protocol_commands": None,  # the results of the tools behind a client's commands
    "orchestrator.protocol_review": None,  # what the review tools return
    "orchestrator.protocol_servers": None,  # what list_servers and list_models return
    "orchestrator.protocol_questions": None,  # what list_questions and answer_question return
    "orchestrator.protocol_long": None,  # what the goal and handoff tools return
    "orchestrator.agents.report": frozenset({"Report"}),  # what the orchestration tools return
    "orchestrator.events": None,
    "orchestrator.event_base": None,  # what every event has
    "orchestrator.events_long": None,  # the events of long work (in the same union)
    "orchestrator.messages": None,  # the conversation messages events carry
    # A goal's budget as `loom goal --budget` writes it and `loom goals` shows it (standard library only).
    "orchestrator.goals.budget": frozenset({"BudgetError", "format_budget", "parse_budget"}),
    # The configuration loader: the files, the home, which project files are trusted.
    "orchestrator.config": None,
    "orchestrator.home": None,
    "orchestrator.trust": None,
    # The one rule for which model a new session uses, which the face follows too.
    "orchestrator.models": frozenset({"choose_model_spec"}),
    # The one factory that builds an in-process face.
    "orchestrator.face.local": None,
    # The daemon's address book (where it listens, its token) and, for `loom serve`, its entry point.
    "orchestrator.daemon": None,
    "orchestrator.daemon.discovery": None,
    "orchestrator.daemon.auth": None,
    "orchestrator.daemon.runner": frozenset({"run_daemon", "DaemonError", "StoreFailed"}),
    # A read-only view of the database file for `loom runs`, `trace` and `export`, which must answer in tens of
    # milliseconds without importing the MCP SDK (a second); see its docstring.
    "orchestrator.store.peek": None,
    # How a session is shown to a person (its status words, a title made safe for a terminal), shared by the face,
    # the peek and the clients that print titles; standard library only.
    "orchestrator.store.session_view": frozenset({"MAX_TITLE_CHARS", "NEEDS_YOU", "clean_title"}),
    # `loom worker` runs the engine in-process (as `loom serve` runs the daemon); `loom workers` reads the pool.
    "orchestrator.engine.worker": frozenset({"run_worker"}),
    "orchestrator.engine.pool": frozenset({"PoolError", "PoolUnreachable", "WorkerIdInUse"}),
    "orchestrator.engine.pool_listing": frozenset({"WorkerInfo", "list_workers"}),
    "orchestrator.engine.settings": frozenset({"default_worker_id"}),
    "orchestrator.store.interface": frozenset({"StoreError"}),  # how `loom worker` tells a store failure apart
    # Loom's version, as every Loom server and client declares it.
    "servers._version": None,
    # The stdio transport Loom's servers and `loom mcp` share (the wire waited on by the event loop).
    "servers._stdio": frozenset({"stdio_wire"}),
    # The built-in servers' entry points, which `loom server NAME` hands the process to.
    "servers": frozenset({"checkpoints", "fs", "memory", "shell", "subagents"}),
}
"""Module → the names a client may import from it (None: any)."""

OURS = ("orchestrator", "servers")


def imports(path: Path) -> Iterator[tuple[str, str | None, int]]:
    """(module, name or None for ``import module``, line) for every import of our packages in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.module, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno


def violations() -> list[str]:
    """Every import under ``clients/`` that :data:`ALLOWED` does not allow."""
    found = []
    for path in sorted(CLIENTS.rglob("*.py")):
        for module, name, line in imports(path):
            if module.split(".")[0] not in OURS:
                continue
            where = f"{path.relative_to(CLIENTS.parent)}:{line}"
            if module not in ALLOWED:
                # `from orchestrator.store import peek` names the module as an attribute of its package.
                if name is not None and f"{module}.{name}" in ALLOWED:
                    continue
                found.append(f"{where}: {module}")
                continue
            names = ALLOWED[module]
            if names is not None and (name is None or name not in names):
                found.append(f"{where}: {module}.{name}")
    return found


def test_clients_import_only_the_library_the_protocol_and_the_in_process_face() -> None:
    assert violations() == []


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        "def f():\n    from orchestrator.runtime.host import SessionHost\n    import orchestrator.store.eventlog\n"
    )

    assert [(m, n) for m, n, _ in imports(source)] == [
        ("orchestrator.runtime.host", "SessionHost"),
        ("orchestrator.store.eventlog", None),
    ]
