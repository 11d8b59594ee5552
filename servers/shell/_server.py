"""Assembly of the shell server: the ``run`` tool and its result."""

from __future__ import annotations

import inspect
import os
import signal
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from servers._tools import Binding, DeferredServer
from servers._version import loom_version
from servers.shell._environment import CommandEnvironment
from servers.shell._process import Completed, StartError, run_in_process_group
from servers.shell._protect import ProtectedPaths, ProtectMounts
from servers.shell._sandbox import Sandbox, SandboxMode, host_hiding, resolve_sandbox

__all__ = ["MAX_TIMEOUT_S", "RunResult", "ShellTools", "build_server", "prepare_server"]

MAX_TIMEOUT_S = 3600.0
"""Longest timeout a call may ask for."""

_PIPE_GRACE_S = 1.0
_RUN = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)


class RunResult(BaseModel):
    """The outcome of one shell command."""

    exit_code: int | None = Field(
        description=(
            "Exit status of the shell; negative -N when signal N ended it (sandboxed: 128+N if the signal reached "
            "only the shell); null if it was not collected."
        )
    )
    stdout: str = Field(description="Standard output (head and tail kept when long, with a marker between).")
    stderr: str = Field(description="Standard error (head and tail kept when long, with a marker between).")
    timed_out: bool = Field(description="True if the command hit its timeout and its process group was killed.")
    duration_ms: int = Field(description="Wall-clock run time in milliseconds.")
    stdout_truncated: bool = Field(description="True if the middle of stdout was dropped.")
    stderr_truncated: bool = Field(description="True if the middle of stderr was dropped.")
    background_killed: bool = Field(
        description="True if a background process kept the output open after the shell exited and was killed."
    )
    sandboxed: bool = Field(
        description="True if the command ran in the bwrap sandbox (read-only outside the root, private /tmp)."
    )


class ShellTools:
    """The ``run`` tool, confined to a root directory.

    Args:
        root: Existing directory; commands run in it or below it.
        default_timeout_s: Timeout for calls that do not pass one.
        max_output_bytes: Most bytes kept from each of stdout and stderr.
        term_grace_s: Seconds between SIGTERM and SIGKILL when a command's group is ended.
        sandbox: ``auto``, ``bwrap`` or ``off``; see `build_server`.
        network: False to run commands without network access (needs the sandbox).
        env_pass: Names of variables passed from the server's environment on top of the default allow-list.
        env_set: Variables given fixed values.
        protect: Absolute paths sandboxed commands may not create or change; see `build_server`.
        hide: Directories sandboxed commands cannot see at all; see `build_server`.

    Raises:
        ValueError: If root is not a directory, a limit or a variable name is invalid, a protected path is not
            absolute, or the sandbox asked for cannot be had.
    """

    def __init__(
        self,
        root: Path,
        *,
        default_timeout_s: float,
        max_output_bytes: int,
        term_grace_s: float,
        sandbox: SandboxMode = "auto",
        network: bool = True,
        env_pass: Sequence[str] = (),
        env_set: Mapping[str, str] | None = None,
        protect: Sequence[Path] = (),
        hide: Sequence[Path] = (),
    ) -> None:
        self._root = Path(root).expanduser().resolve()
        if not self._root.is_dir():
            raise ValueError(f"root {str(root)!r} is not an existing directory")
        if not 0 < default_timeout_s <= MAX_TIMEOUT_S:
            raise ValueError(f"default_timeout_s must be in (0, {MAX_TIMEOUT_S:g}], got {default_timeout_s}")
        if max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be positive, got {max_output_bytes}")
        if term_grace_s < 0:
            raise ValueError(f"term_grace_s must not be negative, got {term_grace_s}")
        self._default_timeout_s = default_timeout_s
        self._max_output_bytes = max_output_bytes
        self._term_grace_s = term_grace_s
        self._protected = ProtectedPaths(protect, self._root)
        if isinstance(env_pass, str):
            raise ValueError(f"env_pass must be a list of names, got the string {env_pass!r}")
        hiding = host_hiding(os.environ, self._root, keep=set(env_pass), hide=hide)
        self._sandbox = resolve_sandbox(
            sandbox, self._root, network, hiding=hiding, protected=self._protected.inside_root
        )
        self._environment = CommandEnvironment(
            os.environ,
            env_pass=env_pass,
            env_set=env_set,
            sandbox_root=self._root if self._sandbox is not None else None,
        )
        # bash is friendlier to model-written commands (arrays, [[ ]], pipefail); sh is the POSIX fallback.
        self._shell = "/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh"

    @property
    def root(self) -> Path:
        """The resolved root directory."""
        return self._root

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox commands run in, or None when they run unsandboxed."""
        return self._sandbox

    @property
    def environment(self) -> CommandEnvironment:
        """The environment commands run with."""
        return self._environment

    async def run(
        self,
        command: Annotated[str, Field(description="Shell command line, run with bash -c (sh if bash is missing).")],
        cwd: Annotated[str, Field(description="Working directory, relative to the root; must be inside it.")] = ".",
        timeout_s: Annotated[
            float | None,
            Field(gt=0, le=MAX_TIMEOUT_S, description="Seconds before the command is killed; server default if null."),
        ] = None,
    ) -> Annotated[CallToolResult, RunResult]:
        """Run a shell command and return its exit code, stdout and stderr.

        stdin is /dev/null, so commands must not wait for input. On timeout the command and everything it started
        are killed and the partial output is returned with timed_out=true. Long output keeps its head and tail.
        """
        if not command.strip():
            raise ToolError("command is empty; pass a shell command line such as 'ls -la'")
        if "\x00" in command:
            raise ToolError("command contains a NUL byte, which cannot be passed to a program; remove it")
        workdir = self._resolve_cwd(cwd)
        timeout = self._default_timeout_s if timeout_s is None else timeout_s
        argv = [self._shell, "-c", command]
        try:
            # The placeholders for missing protected paths exist exactly while the command may run; unsandboxed
            # nothing could hold them, so none are made.
            with self._protected.hold() if self._sandbox is not None else nullcontext(ProtectMounts()) as protect:
                if self._sandbox is not None:
                    argv = self._sandbox.wrap(argv, workdir, protect)
                done = await run_in_process_group(
                    argv,
                    cwd=workdir,
                    env=self._environment.values,
                    timeout_s=timeout,
                    max_output_bytes=self._max_output_bytes,
                    term_grace_s=self._term_grace_s,
                    pipe_grace_s=_PIPE_GRACE_S,
                )
        except StartError as exc:
            raise ToolError(str(exc)) from exc
        result = RunResult(
            exit_code=done.exit_code,
            stdout=done.stdout.text(),
            stderr=done.stderr.text(),
            timed_out=done.timed_out,
            duration_ms=round(done.duration_s * 1000),
            stdout_truncated=done.stdout.truncated,
            stderr_truncated=done.stderr.truncated,
            background_killed=done.background_killed,
            sandboxed=self._sandbox is not None,
        )
        # A readable rendering rather than the default JSON dump, so a timeout or a kill is the first thing read.
        return CallToolResult(
            content=[TextContent(type="text", text=_render(result, done, timeout, self._sandbox))],
            structured_content=result.model_dump(mode="json"),
        )

    def _resolve_cwd(self, raw: str) -> Path:
        if not raw.strip() or "\x00" in raw:
            raise ToolError(f"cwd {raw!r} is not a usable path; pass a directory relative to the root, e.g. '.'")
        candidate = Path(raw) if os.path.isabs(raw) else self._root / raw
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:
            raise ToolError(f"cwd {raw!r} cannot be resolved: {exc}") from exc
        if not resolved.is_relative_to(self._root):
            raise ToolError(
                f"cwd {raw!r} resolves outside the allowed root ({self._root}); nothing was run. "
                f"Use a directory inside it"
            )
        if not resolved.is_dir():
            raise ToolError(f"cwd {raw!r} is not an existing directory under {self._root}; nothing was run")
        return resolved


def _render(result: RunResult, done: Completed, timeout_s: float, sandbox: Sandbox | None) -> str:
    lines: list[str] = []
    if result.timed_out:
        lines.append(
            f"TIMED OUT after {timeout_s:g}s: the command and its child processes were killed. "
            f"The output below is partial."
        )
    code = result.exit_code
    if code is None:
        status = "exit status unknown"
    elif code < 0:
        status = f"killed by {_signal_name(-code)} (exit_code {code})"
    else:
        status = f"exit code {code}"
    where = "" if sandbox is None else ", sandboxed" if sandbox.network else ", sandboxed without network"
    lines.append(f"{status}, {result.duration_ms} ms{where}")
    if sandbox is not None and "Read-only file system" in result.stderr:
        inside = f", and inside it for {sandbox.protected_names()}" if sandbox.protected else ""
        lines.append(f"note: the sandbox is read-only outside {sandbox.root} and /tmp{inside}; write inside the root")
    if result.background_killed and sandbox is None:
        lines.append(
            "note: a background process kept stdout/stderr open after the command finished and was killed; "
            "redirect its output (cmd > file 2>&1 &) to keep it running"
        )
    for name, text, buffer in (("stdout", result.stdout, done.stdout), ("stderr", result.stderr, done.stderr)):
        if text or name == "stdout":
            suffix = f" ({buffer.total} bytes, {buffer.dropped} dropped from the middle)" if buffer.truncated else ""
            lines.append(f"--- {name}{suffix} ---")
            lines.append(text.rstrip("\n") if text else "(empty)")
    return "\n".join(lines)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def build_server(
    root: Path,
    *,
    default_timeout_s: float = 60,
    max_output_bytes: int = 64_000,
    term_grace_s: float = 2.0,
    sandbox: SandboxMode = "auto",
    network: bool = True,
    env_pass: Sequence[str] = (),
    env_set: Mapping[str, str] | None = None,
    protect: Sequence[Path] = (),
    hide: Sequence[Path] = (),
) -> MCPServer:
    """Build the shell MCP server, whose commands run inside root.

    Args:
        root: Existing directory; commands run in it or in a directory below it.
        default_timeout_s: Timeout for calls that do not pass one (at most 3600 s).
        max_output_bytes: Most bytes kept from each of stdout and stderr.
        term_grace_s: Seconds between SIGTERM and SIGKILL when a command's process group is ended.
        sandbox: ``"auto"`` runs commands in a bwrap sandbox (read-only outside root, private /tmp) when bwrap
            works on this machine and unsandboxed otherwise; ``"bwrap"`` requires the sandbox; ``"off"`` never
            uses it.
        network: False runs commands without network access; this needs the sandbox.
        env_pass: Names of variables to pass from this process's environment on top of the default allow-list
            (see `servers.shell._environment`); secrets reach commands only this way. Naming SSH_AUTH_SOCK,
            DOCKER_HOST, XDG_RUNTIME_DIR or DBUS_SESSION_BUS_ADDRESS also keeps that socket reachable in the sandbox.
        env_set: Variables given fixed values, sandboxed or not.
        protect: Absolute paths (Loom's config: ``ROOT/.loom``, ``ROOT/AGENTS.md``, ``$LOOM_HOME``, ...) that
            sandboxed commands can neither change nor create, though inside the writable root; see
            `servers.shell._protect`. Unsandboxed commands are not held to them.
        hide: Directories outside the root that sandboxed commands cannot even read (an empty tmpfs covers each):
            Loom's home, whose daemon token would let a command drive the daemon and answer its own approvals.

    Returns:
        An MCPServer named ``"shell"`` with the tool ``run``.

    Raises:
        ValueError: If root is not a directory, a limit or a variable name is invalid, a protected path is not
            absolute, sandbox is ``"bwrap"`` and bwrap is missing or does not work here, or network is False
            without a working sandbox.
    """
    return prepare_server(
        root,
        default_timeout_s=default_timeout_s,
        max_output_bytes=max_output_bytes,
        term_grace_s=term_grace_s,
        sandbox=sandbox,
        network=network,
        env_pass=env_pass,
        env_set=env_set,
        protect=protect,
        hide=hide,
    ).build()


def prepare_server(
    root: Path,
    *,
    default_timeout_s: float = 60,
    max_output_bytes: int = 64_000,
    term_grace_s: float = 2.0,
    sandbox: SandboxMode = "auto",
    network: bool = True,
    env_pass: Sequence[str] = (),
    env_set: Mapping[str, str] | None = None,
    protect: Sequence[Path] = (),
    hide: Sequence[Path] = (),
) -> DeferredServer:
    """The shell server of `build_server`, its root, sandbox and environment settled now, built on first use.

    Raises:
        ValueError: As `build_server`.
    """
    tools = ShellTools(
        root,
        default_timeout_s=default_timeout_s,
        max_output_bytes=max_output_bytes,
        term_grace_s=term_grace_s,
        sandbox=sandbox,
        network=network,
        env_pass=env_pass,
        env_set=env_set,
        protect=protect,
        hide=hide,
    )
    description = inspect.getdoc(tools.run) or ""
    if tools.sandbox is not None:
        description += (
            " Everything a command starts, background jobs included, is killed when it ends; nothing keeps "
            "running between calls."
        )
    else:
        description += (
            " A background job started with '&' is killed when the command ends unless it redirects its output "
            "(e.g. 'server > server.log 2>&1 &')."
        )
    description += " Commands get a reduced environment: no API keys, tokens or agent sockets."

    def make(bound: list[Tool]) -> MCPServer:
        instructions = f"Runs shell commands in {tools.root} (or below it), with stdin from /dev/null."
        if tools.sandbox is not None:
            instructions += " " + tools.sandbox.describe()
        instructions += " " + tools.environment.describe()
        return MCPServer(
            "shell",
            version=loom_version(),
            instructions=instructions,
            # Bound to this server's root and sandbox; the schemas were built once for the process (servers._tools).
            tools=bound,
            # MCPServer configures root logging at INFO by default; an embedding process should not inherit that.
            log_level="WARNING",
        )

    return DeferredServer("shell", [Binding(tools.run, "run", description, _RUN)], make)
