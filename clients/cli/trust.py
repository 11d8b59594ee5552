"""``loom trust``: let a project's own Loom config loosen what runs, once a person has read it.

``loom trust [DIR]`` prints the project's ``.loom/config.json`` and ``.loom/policy.toml`` as they are and
records their digest; ``--show`` only prints them and whether they are trusted; ``--revoke`` withdraws trust.
``loom run`` at a terminal asks the same question when an untrusted project wants something (see
:func:`ask_to_trust`); without a terminal it runs without what was not trusted and says so.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from orchestrator.config import ConfigError, loom_home
from orchestrator.trust import ProjectConfig, forget, read_project, trust, trust_state, untrusted_notes

__all__ = ["ask_to_trust", "trust_command"]

_SHOWN_BYTES = 20_000


def _show(snapshot: ProjectConfig, out: TextIO) -> None:
    for path, data in snapshot.shown():
        text = data[:_SHOWN_BYTES].decode("utf-8", errors="replace")
        more = f"\n... ({len(data) - _SHOWN_BYTES:,} more bytes)" if len(data) > _SHOWN_BYTES else ""
        out.write(f"--- {path}\n{text.rstrip()}{more}\n")


def ask_to_trust(home: Path, project: Path, notes: list[str]) -> bool:
    """At a terminal, show what an untrusted project's config wants and ask whether to trust it.

    Returns:
        True if the person said yes and the config is now trusted. Without a terminal nothing is asked.
    """
    if not notes or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    snapshot = read_project(project)
    sys.stderr.write(f"loom: {project} has its own Loom config, which would widen what runs:\n")
    for note in notes:
        sys.stderr.write(f"  - {note}\n")
    _show(snapshot, sys.stderr)
    sys.stderr.write("loom: trust this project's config? A model or a clone can write these files. [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline().strip().lower()
    except (OSError, KeyboardInterrupt):
        answer = ""
    if answer not in ("y", "yes"):
        sys.stderr.write("loom: not trusted; running without it\n")
        return False
    if read_project(project).digest != snapshot.digest:
        sys.stderr.write("loom: the config changed while you were reading it; not trusted (run `loom trust`)\n")
        return False
    trust(home, project, snapshot.digest)
    return True


def trust_command(args: argparse.Namespace) -> int:
    """``loom trust [DIR] [--show | --revoke]``."""
    project = Path(args.dir).expanduser() if args.dir else Path.cwd()
    if not project.is_dir():
        sys.stderr.write(f"loom: error: {project} is not a directory\n")
        return 2
    project = project.resolve()
    home = loom_home()
    if args.revoke:
        done = forget(home, project)
        sys.stdout.write(f"{project}: {'no longer trusted' if done else 'was not trusted'}\n")
        return 0
    snapshot = read_project(project)
    if snapshot.digest is None:
        sys.stdout.write(
            f"{project} has no .loom/config.json, .loom/policy.toml or .loom/hooks.json; nothing to trust\n"
        )
        return 0
    state = trust_state(home, project, snapshot.digest)
    try:
        notes = untrusted_notes(home, project) if state != "trusted" else []
    except ConfigError as exc:
        sys.stderr.write(f"loom: error: {exc}; fix it before trusting it\n")
        return 2
    _show(snapshot, sys.stdout)
    if args.show:
        label = {"trusted": "trusted", "changed": "changed since it was trusted", "untrusted": "not trusted"}[state]
        sys.stdout.write(f"{project}: {label}\n")
        for note in notes:
            sys.stdout.write(f"  - {note}\n")
        return 0
    trust(home, project, snapshot.digest)
    sys.stdout.write(f"{project}: trusted (sha256 {snapshot.digest[:12]}); a change to either file asks again\n")
    return 0
