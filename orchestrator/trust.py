"""Trusting a project's own Loom configuration before it may loosen anything.

A project's ``.loom/config.json``, ``.loom/policy.toml`` and ``.loom/hooks.json`` travel with its files: a cloned
repository, or a model that wrote them during an earlier run, can put them there. What in them could widen what runs —
``mcpServers`` (commands Loom would start), ``shell`` options that loosen the sandbox, ``allow`` rules, hooks
(commands Loom would run on every tool call) — takes
effect only once a person has trusted the project (``loom trust``, or the prompt ``loom run`` shows at a
terminal). Everything that only tightens (deny and ask rules, a sandbox without network) applies at once.

What was trusted is a SHA-256 of the files' bytes, stored per project directory in ``$LOOM_HOME/trusted.json``
(0600). A change to any of them is a different digest, so the project is asked about again: trusting
yesterday's config is not trusting today's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from orchestrator.policy.rules import Rule

__all__ = [
    "TRUST_FILE",
    "ProjectConfig",
    "TrustState",
    "forget",
    "load_trusted_rules",
    "project_files",
    "read_project",
    "trust",
    "trust_state",
    "trusted_digest",
    "untrusted_notes",
]

TRUST_FILE = "trusted.json"
"""Where trusted projects are recorded, under ``$LOOM_HOME``."""

TrustState = Literal["trusted", "untrusted", "changed"]
"""``changed``: trusted once, but a file changed since."""


def project_files(project: Path) -> list[Path]:
    """A project's Loom configuration files, whether or not they exist."""
    return [project / ".loom" / "config.json", project / ".loom" / "policy.toml", project / ".loom" / "hooks.json"]


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A project's config files as read once: the bytes that are parsed are the bytes that were hashed.

    Reading a file to hash it and again to parse it would let a process swap the file in between.
    """

    project: Path
    config: bytes | None
    """``.loom/config.json``, or None when there is none."""
    policy: bytes | None
    """``.loom/policy.toml``, or None when there is none."""
    digest: str | None
    """SHA-256 over the files that exist (None when none does)."""
    hooks: bytes | None = None
    """``.loom/hooks.json``, or None when there is none."""

    @property
    def config_path(self) -> Path:
        """Where ``config`` was read from."""
        return project_files(self.project)[0]

    @property
    def policy_path(self) -> Path:
        """Where ``policy`` was read from."""
        return project_files(self.project)[1]

    @property
    def hooks_path(self) -> Path:
        """Where ``hooks`` was read from."""
        return project_files(self.project)[2]

    def shown(self) -> list[tuple[Path, bytes]]:
        """Each file that exists and its bytes: what a person is shown before trusting the project."""
        found = zip(project_files(self.project), (self.config, self.policy, self.hooks), strict=True)
        return [(path, data) for path, data in found if data is not None]


def read_project(project: Path) -> ProjectConfig:
    """Read the project's config files once and hash what was read."""
    digest = hashlib.sha256()
    contents: list[bytes | None] = []
    for path in project_files(project):
        try:
            data: bytes | None = path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError:
            data = b"\0unreadable"  # whatever it holds once readable is not what was trusted
        contents.append(data)
        if data is not None:
            digest.update(path.name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    found = any(c is not None for c in contents)
    return ProjectConfig(project, contents[0], contents[1], digest.hexdigest() if found else None, contents[2])


def _key(project: Path) -> str:
    return str(project.resolve())


def _read(home: Path) -> dict[str, Any]:
    try:
        data = json.loads((home / TRUST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    projects = data.get("projects") if isinstance(data, dict) else None
    return projects if isinstance(projects, dict) else {}


def _write(home: Path, projects: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / TRUST_FILE
    temp = path.with_name(f".{TRUST_FILE}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"projects": projects}, handle, indent=2, sort_keys=True)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def trusted_digest(home: Path, project: Path) -> str | None:
    """The digest recorded when the project was last trusted, or None."""
    entry = _read(home).get(_key(project))
    digest = entry.get("sha256") if isinstance(entry, dict) else None
    return digest if isinstance(digest, str) else None


def trust_state(home: Path, project: Path, digest: str | None) -> TrustState:
    """Whether config files with ``digest`` (from :func:`read_project`) are the ones a person trusted."""
    recorded = trusted_digest(home, project)
    if recorded is None:
        return "untrusted"
    return "trusted" if recorded == digest else "changed"


def trust(home: Path, project: Path, digest: str | None) -> None:
    """Record config files with ``digest`` (what the person was shown) as trusted for ``project``."""
    projects = _read(home)
    if digest is None:
        projects.pop(_key(project), None)
    else:
        projects[_key(project)] = {"sha256": digest, "trusted_at": round(time.time())}
    _write(home, projects)


def forget(home: Path, project: Path) -> bool:
    """Withdraw trust from a project; True if it was trusted."""
    projects = _read(home)
    if projects.pop(_key(project), None) is None:
        return False
    _write(home, projects)
    return True


def load_trusted_rules(home: Path, project: Path) -> tuple[list[Rule], list[str]]:
    """The user's rules and the project's, less the project's ``allow`` rules while the project is untrusted.

    Deny and ask rules only tighten, so they apply whether or not the project is trusted.

    Returns:
        The rules, and a sentence for each project rule left out (empty when nothing was).

    Raises:
        orchestrator.policy.PolicyError: a rule file is invalid (the message names the file and rule).
    """
    from orchestrator.policy.rules import PolicyError, load_file, parse_rules

    rules = load_file(home / "policy.toml")
    snapshot = read_project(project)
    if snapshot.policy is None:
        return rules, []
    try:
        text = snapshot.policy.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{snapshot.policy_path}: cannot read rule file: not UTF-8 text ({exc.reason})") from None
    found = parse_rules(text, str(snapshot.policy_path))
    state = trust_state(home, project, snapshot.digest)
    if state == "trusted":
        return rules + found, []
    allows = [rule for rule in found if rule.action == "allow"]
    if not allows:
        return rules + found, []
    why = "it changed since you trusted it" if state == "changed" else "the project is not trusted"
    listed = "; ".join(rule.describe() for rule in allows)
    note = f"ignoring {len(allows)} allow rule(s) of {snapshot.policy_path} ({listed}): {why}; review them and run "
    note += f"`loom trust` in {project} to use them"
    return rules + [rule for rule in found if rule.action != "allow"], [note]


def untrusted_notes(home: Path, project: Path, extra: Path | None = None) -> list[str]:
    """What the project's config and rules ask for and do not get until it is trusted (empty: nothing).

    Args:
        home: the Loom home (the user's configuration and ``trusted.json``).
        project: the project directory.
        extra: one more configuration file, as ``load_config`` takes it (``loom run --config``).

    Raises:
        orchestrator.config.ConfigError: the config file or a rule file is invalid (the message names it).
    """
    from orchestrator.config import ConfigError, load_config
    from orchestrator.hooks.config import load_hooks
    from orchestrator.policy.rules import PolicyError

    ignored = list(load_config(home, project, extra).ignored)
    try:
        return ignored + load_trusted_rules(home, project)[1] + load_hooks(home, project)[1]
    except PolicyError as exc:
        raise ConfigError(str(exc)) from exc
