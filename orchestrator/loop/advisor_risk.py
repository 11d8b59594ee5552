"""Which tool calls are risky enough for a ``lightweight`` advisor to review.

A lightweight advisor looks only at batches with at least one call that :func:`risks` flags:

- a shell command (a call with a ``command`` string) that runs a destructive program (``rm``, ``dd``, ``chmod``,
  ``kill``, ``sudo`` ...) or a destructive git subcommand (``reset --hard``, ``clean``, ``push --force`` ...),
  through any wrapper the policy sees through (:mod:`orchestrator.policy.programs`); one using a write or exec form
  of an otherwise harmless program (:mod:`orchestrator.policy.risky`: ``find -delete``, ``sed -i`` ...); one whose
  programs cannot be known for sure, or that is more than plain commands (redirections, expansions, subshells);
  one run in a directory outside the working directory;
- a call that is not read-only and names a path outside the working directory (or one that cannot be resolved);
- a tool of an external server that has no MCP annotations, or whose annotations say it is destructive.

Like the policy's tables, this lists *known* dangers; it proves nothing harmless. Whatever it lets pass unreviewed
still goes to policy, which decides as it always does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.hub.names import BUILT_IN_SERVERS
from orchestrator.hub.pool import HubTool
from orchestrator.policy.paths import argument_paths, realpath, resolve
from orchestrator.policy.programs import resolve as resolve_command
from orchestrator.policy.risky import findings
from orchestrator.policy.shellwords import parse

__all__ = ["DESTRUCTIVE_PROGRAMS", "risks"]

DESTRUCTIVE_PROGRAMS = frozenset(
    {
        *("rm", "rmdir", "unlink", "shred", "srm", "wipe", "truncate", "dd", "mv"),
        *("mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "wipefs", "blkdiscard", "losetup", "mount"),
        *("umount", "chmod", "chown", "chgrp", "chattr", "setfacl", "kill", "pkill", "killall", "reboot"),
        *("shutdown", "halt", "poweroff", "systemctl", "service", "crontab", "iptables", "nft", "useradd"),
        *("userdel", "usermod", "passwd", "sudo", "doas", "su", "pkexec"),
    }
)
"""Programs whose every use can destroy data, change permissions or the system, or gain privileges."""

# Git subcommands that discard work or rewrite what others see, with the words that make them do it
# (an empty tuple: the subcommand itself is enough).
_GIT_DESTRUCTIVE: Mapping[str, tuple[str, ...]] = {
    "clean": (),
    "filter-branch": (),
    "filter-repo": (),
    "update-ref": (),
    "rm": (),
    "restore": (),
    "reset": ("--hard", "--merge", "--keep"),
    "push": ("-f", "--force", "--force-with-lease", "--force-if-includes", "-d", "--delete", "--mirror", "--prune"),
    "branch": ("-D", "-d", "--delete", "-f", "--force", "-M"),
    "checkout": ("-f", "--force", "--", ".", "-B"),
    "switch": ("-f", "--force", "--discard-changes", "-C"),
    "stash": ("drop", "clear"),
    "reflog": ("expire", "delete"),
    "gc": ("--prune", "--prune=now"),
    "tag": ("-d", "--delete", "-f", "--force"),
    "worktree": ("remove", "prune"),
}

_PLAIN_LIST = "it is more than one command"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _git_risk(form: Sequence[str]) -> str:
    if len(form) < 2:
        return ""
    sub = form[1]
    words = _GIT_DESTRUCTIVE.get(sub)
    if words is None:
        return ""
    if not words:
        return f"`git {sub}` discards or rewrites work"
    hit = next((w for w in form[2:] if w in words or (w.startswith("+") and sub == "push")), None)
    return f"`git {sub} {hit}` discards or rewrites work" if hit else ""


def _command_risks(command: str, arguments: Mapping[str, Any], root: str) -> list[str]:
    found: list[str] = []
    line = parse(command)
    if line.line_reason and line.line_reason != _PLAIN_LIST:
        found.append(f"the command is not plain commands only ({line.line_reason})")
    for simple in line.commands:
        resolution = resolve_command(simple.words)
        if resolution.doubt:
            found.append(f"what the command runs cannot be known for sure ({resolution.doubt})")
        for form in resolution.forms:
            name = form[0].casefold()
            if name in DESTRUCTIVE_PROGRAMS or name.startswith("mkfs."):
                found.append(f"it runs `{form[0]}`, which can destroy data or change the system")
            elif name == "git" and (why := _git_risk(form)):
                found.append(why)
        found.extend(f"`{simple.words[f.index]}`: {f.reason}" for f in findings(simple.words))
    where = arguments.get("cwd")
    if isinstance(where, str):
        try:
            outside = not _inside(resolve(where, root), root)
        except OSError:
            outside = True
        if outside:
            found.append(f"it runs in {where!r}, outside the working directory")
    return found


def risks(tool: HubTool | None, arguments: Mapping[str, Any], cwd: str) -> list[str]:
    """Why a call is risky, one phrase each; empty when nothing known makes it so.

    Args:
        tool: The tool called (None for an unknown tool, which nothing runs anyway).
        arguments: The call's arguments.
        cwd: The session's working directory.
    """
    if tool is None:
        return []
    try:
        root = realpath(cwd)
    except OSError:
        root = os.path.abspath(cwd)
    found: list[str] = []
    annotations = tool.annotations
    command = arguments.get("command")
    if isinstance(command, str):
        found.extend(_command_risks(command, arguments, root))
    read_only = annotations is not None and annotations.read_only_hint is True
    if not read_only:
        paths = argument_paths(arguments, cwd)
        found.extend(f"it names {raw!r}, which cannot be resolved ({why})" for raw, why in paths.unresolved)
        found.extend(
            f"it may write {path}, outside the working directory" for path in paths.resolved if not _inside(path, root)
        )
    if tool.server not in BUILT_IN_SERVERS:
        if annotations is None:
            found.append(f"{tool.name} is a tool of the external server {tool.server!r} and has no MCP annotations")
        elif annotations.destructive_hint is True and not read_only:
            found.append(f"{tool.name} is marked destructive by its server {tool.server!r}")
    return found
