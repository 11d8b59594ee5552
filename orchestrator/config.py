"""Loom's configuration: where its state lives and which external MCP servers to connect.

External servers use the standard ``mcpServers`` format shared by Claude Code, Cursor and Gemini CLI:
``{"mcpServers": {"name": {"command": ..., "args": [...], "env": {...}}}}`` for stdio servers and
``{"name": {"url": ..., "headers": {...}}}`` for streamable HTTP. Values may reference environment
variables as ``${VAR}`` so that secrets stay out of the file. An entry's ``"type"`` (``"stdio"``, ``"http"``
(also ``"streamable-http"``), or ``"sse"`` for the legacy HTTP+SSE transport) says how to reach it; without one,
``command`` means stdio and ``url`` streamable HTTP. ``"disabled": true`` keeps an entry in the file without
starting it (it is listed as stopped).

Supervision: each external server's idle connection is checked every ``healthInterval`` seconds (default
:data:`DEFAULT_HEALTH_INTERVAL_S`), each check bounded by ``healthTimeout`` seconds (default
:data:`DEFAULT_HEALTH_TIMEOUT_S`); see :mod:`orchestrator.hub.supervisor`.

Time limits: ``timeout`` (seconds per call) and ``toolTimeouts`` (``{"remote tool name": seconds}``)
in an ``mcpServers`` entry, and a top-level ``toolTimeouts`` keyed by namespaced tool name or server
name that also covers Loom's built-in servers (``{"fs__grep": 30, "shell": 600}``). Which one wins
is described in :mod:`orchestrator.hub.timeouts`.

Open sessions: the top-level ``sessions`` object bounds what a long-lived runtime (the daemon) keeps
open, ``{"sessions": {"idleCloseAfter": 600, "maxOpen": 16}}``: a session with no run in progress and no
approval waiting is closed (its tools disconnected, its memory released) once it has been idle for
``idleCloseAfter`` seconds, or, least recently used first, while more than ``maxOpen`` sessions are open. A
closed session is reopened from the store when it is next used (see :mod:`orchestrator.runtime.host`).

The advisor: the top-level ``advisor`` is a mode, ``"off"`` (the default), ``"lightweight"`` or ``"full"``, or an
object ``{"mode": "full", "model": "anthropic:claude-haiku-4-5", "timeout": 30}`` (``model`` defaults to the
session's own model, ``timeout`` to 60 seconds); see :mod:`orchestrator.loop.advisor`.

Loop detection: the top-level ``loop`` is ``{"noticeAfter": 3, "stopAfter": 5}`` (those are the defaults), ``true``
(the defaults) or ``false`` (off); see :mod:`orchestrator.loop.repeats`. An untrusted project may make it stricter,
never turn it off or loosen it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from orchestrator.engine.settings import EngineSettings, EngineSettingsError, parse_engine
from orchestrator.home import loom_home

# The hub's own list (names.py imports nothing of Loom's, so no cycle): a second list here drifted once already.
from orchestrator.hub.names import BUILT_IN_SERVERS, sanitize
from orchestrator.models.profiles import ProfileSettings

__all__ = [
    "ADVISOR_MODES",
    "BUILT_IN_SERVERS",
    "AdvisorSettings",
    "ConfigError",
    "LoomConfig",
    "LoopSettings",
    "ServerConfig",
    "SessionLimits",
    "ShellOptions",
    "load_config",
    "load_config_file",
    "loom_home",
    "loosens",
    "parse_config",
    "parse_server",
]

DEFAULT_CALL_TIMEOUT_S = 600.0
DEFAULT_STARTUP_TIMEOUT_S = 30.0
DEFAULT_HEALTH_INTERVAL_S = 30.0
"""Seconds between health checks of an external server's idle connection."""
DEFAULT_HEALTH_TIMEOUT_S = 10.0
"""Seconds a health check (a ping, or a cheap listing where the era has no ping) may take."""

Transport = Literal["stdio", "http", "sse"]
"""How an external server is reached: a child process, streamable HTTP, or the legacy HTTP+SSE transport."""
_TYPES: dict[str, Transport] = {"stdio": "stdio", "http": "http", "streamable-http": "http", "sse": "sse"}


class ConfigError(Exception):
    """A configuration file is unusable; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One external MCP server."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict[str, str])
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict[str, str])
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    tool_timeouts_s: dict[str, float] = field(default_factory=dict[str, float])
    """Per-tool limits from the entry's ``toolTimeouts``, keyed by the server's own tool name."""
    source: str = ""
    """The file this entry came from, for error messages."""
    disabled: bool = False
    """``"disabled": true``: listed (as stopped) but never started."""
    health_interval_s: float = DEFAULT_HEALTH_INTERVAL_S
    """``healthInterval``: seconds between health checks of the idle connection."""
    health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S
    """``healthTimeout``: seconds one health check may take before it counts as failed."""


@dataclass(frozen=True, slots=True)
class ShellOptions:
    """How Loom's built-in shell server runs commands (top-level ``shell`` key)."""

    sandbox: Literal["auto", "bwrap", "off"] = "auto"
    """``auto``: in a bwrap sandbox where bwrap works; ``bwrap``: always (an error where it cannot); ``off``."""
    network: bool = True
    """False cuts commands off the network; it needs the sandbox."""
    env: tuple[str, ...] = ()
    """Names of variables of Loom's environment that commands get besides the basic ones (``PATH``, ``HOME``...):
    secrets reach commands only when named here."""


AdvisorMode = Literal["off", "lightweight", "full"]
ADVISOR_MODES: tuple[AdvisorMode, ...] = ("off", "lightweight", "full")
DEFAULT_ADVISOR_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class AdvisorSettings:
    """Whether an advisor model reviews the model's tool calls before policy decides them (top-level ``advisor``)."""

    mode: AdvisorMode = "off"
    """``off``; ``lightweight``: only batches with a risky call; ``full``: every batch."""
    model: str | None = None
    """The advisor's model spec (``provider:name``); None uses the session's own model."""
    timeout_s: float = DEFAULT_ADVISOR_TIMEOUT_S
    """``timeout``: seconds the advisor may take before the batch goes on to policy without its review."""


DEFAULT_LOOP_NOTICE_AFTER = 3
DEFAULT_LOOP_STOP_AFTER = 5


@dataclass(frozen=True, slots=True)
class LoopSettings:
    """When a run that keeps repeating itself is told so, and when it is stopped (top-level ``loop``)."""

    enabled: bool = True
    """``"loop": false`` turns loop detection off: no notices, no stops."""
    notice_after: int = DEFAULT_LOOP_NOTICE_AFTER
    """``noticeAfter``: the model is told once the same step (or cycle) has come round this many times in a row."""
    stop_after: int = DEFAULT_LOOP_STOP_AFTER
    """``stopAfter``: the run ends ``failed`` (reason ``loop: ...``) when it has come round this many times."""


DEFAULT_IDLE_CLOSE_S = 600.0
DEFAULT_MAX_OPEN_SESSIONS = 16


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How many sessions a long-lived runtime keeps open, and for how long (top-level ``sessions`` key)."""

    idle_close_s: float = DEFAULT_IDLE_CLOSE_S
    """``idleCloseAfter``: seconds a session may sit idle (no run, no approval waiting) before it is closed."""
    max_open: int = DEFAULT_MAX_OPEN_SESSIONS
    """``maxOpen``: past this many open sessions, the least recently used idle ones are closed."""


@dataclass(frozen=True, slots=True)
class LoomConfig:
    """Everything read from config files."""

    model: str | None = None
    servers: tuple[ServerConfig, ...] = ()
    tool_timeouts_s: dict[str, float] = field(default_factory=dict[str, float])
    """Top-level ``toolTimeouts``: seconds keyed by namespaced tool name (``fs__grep``) or server name."""
    shell: ShellOptions | None = None
    """The top-level ``shell`` options, or None when the file does not set them."""
    profiles: dict[str, ProfileSettings] = field(default_factory=dict[str, ProfileSettings])
    """The top-level ``models``: context window and compaction threshold by model pattern."""
    ignored: tuple[str, ...] = ()
    """What an untrusted project's config asked for and did not get, one sentence each (see ``loom trust``)."""
    sessions: SessionLimits | None = None
    """The top-level ``sessions`` limits, or None when the file does not set them."""
    advisor: AdvisorSettings | None = None
    """The top-level ``advisor``, or None when the file does not set it (then it is off)."""
    loop: LoopSettings | None = None
    """The top-level ``loop``, or None when the file does not set it (then the defaults apply)."""
    engine: EngineSettings | None = None
    """The top-level ``engine`` (:mod:`orchestrator.engine.settings`), or None when the file does not set it (then
    the embedded default). Only the home's file and ``--config`` may set it, never a project's."""


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: str, where: str) -> str:
    def repl(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable ${{{name}}} is not set")

    return _VAR.sub(repl, value)


def _str_map(raw: object, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise ConfigError(f"{where} must be an object of strings")
    return {str(k): _expand(v, f"{where}.{k}") for k, v in raw.items()}


def _number(raw: object, where: str, default: float) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        raise ConfigError(f"{where} must be a positive number of seconds")
    return float(raw)


def _timeouts(raw: object, where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object mapping tool names to seconds")
    limits: dict[str, float] = {}
    for key, value in raw.items():
        if value is None:  # ``_number`` would take null for "use the default"; here there is none
            raise ConfigError(f"{where}.{key} must be a positive number of seconds")
        limits[str(key)] = _number(value, f"{where}.{key}", DEFAULT_CALL_TIMEOUT_S)
    return limits


def parse_server(name: str, raw: object, source: str) -> ServerConfig:
    """Validate one ``mcpServers`` entry.

    Raises:
        ConfigError: the entry is not a usable stdio, streamable HTTP or SSE server description.
    """
    where = f"{source}: mcpServers.{name}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object with 'command' (stdio) or 'url' (HTTP)")
    entry: dict[str, Any] = raw
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ConfigError(f"{where}.disabled must be true or false, not {disabled!r}")
    common: dict[str, Any] = {
        "name": name,
        "source": source,
        "disabled": disabled,
        "startup_timeout_s": _number(entry.get("startupTimeout"), f"{where}.startupTimeout", DEFAULT_STARTUP_TIMEOUT_S),
        "call_timeout_s": _number(entry.get("timeout"), f"{where}.timeout", DEFAULT_CALL_TIMEOUT_S),
        "tool_timeouts_s": _timeouts(entry.get("toolTimeouts"), f"{where}.toolTimeouts"),
        "health_interval_s": _number(entry.get("healthInterval"), f"{where}.healthInterval", DEFAULT_HEALTH_INTERVAL_S),
        "health_timeout_s": _number(entry.get("healthTimeout"), f"{where}.healthTimeout", DEFAULT_HEALTH_TIMEOUT_S),
    }
    kind = _transport(entry, where)
    if kind == "stdio":
        command, args = entry.get("command"), entry.get("args", [])
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{where}.command must be a non-empty string")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}.args must be a list of strings")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError(f"{where}.cwd must be a string")
        return ServerConfig(
            transport="stdio",
            command=_expand(command, f"{where}.command"),
            args=tuple(_expand(a, f"{where}.args") for a in args),
            env=_str_map(entry.get("env"), f"{where}.env"),
            cwd=cwd,
            **common,
        )
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url must be an http:// or https:// URL")
    return ServerConfig(
        transport=kind,
        url=_expand(url, f"{where}.url"),
        headers=_str_map(entry.get("headers"), f"{where}.headers"),
        **common,
    )


def _transport(entry: dict[str, Any], where: str) -> Transport:
    """The entry's transport: its ``type`` when it has one (checked against what it gives), else guessed."""
    kind = entry.get("type")
    if kind is None:
        if "command" in entry:
            return "stdio"
        if "url" in entry:
            return "http"
        raise ConfigError(f"{where} needs 'command' (a stdio server) or 'url' (a streamable HTTP server)")
    if not isinstance(kind, str) or kind not in _TYPES:
        raise ConfigError(f"{where}.type must be 'stdio', 'http' (streamable HTTP) or 'sse' (legacy SSE), not {kind!r}")
    transport = _TYPES[kind]
    if transport == "stdio" and "command" not in entry:
        raise ConfigError(f"{where} has type 'stdio' but no 'command' to run")
    if transport != "stdio" and "url" not in entry:
        raise ConfigError(f"{where} has type {kind!r} but no 'url' to connect to")
    return transport


def load_config_file(path: Path) -> LoomConfig:
    """Read one JSON config file (``model``, ``mcpServers`` and ``toolTimeouts``).

    Raises:
        ConfigError: unreadable file, invalid JSON (with line and column) or an invalid entry.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse_config(text, path)


def parse_config(text: str, path: Path) -> LoomConfig:
    """Parse the text of a config file read from ``path`` (named in errors).

    Raises:
        ConfigError: invalid JSON (with line and column) or an invalid entry.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{path}: 'model' must be a string like 'anthropic:claude-sonnet-4-5'")
    servers_raw = data.get("mcpServers", {})
    if not isinstance(servers_raw, dict):
        raise ConfigError(f"{path}: 'mcpServers' must be an object mapping names to servers")
    # Any spelling that sanitises to a built-in's name would share its tools' namespace (``mcp.access__*``
    # is ``mcp_access__*``), which the hub refuses later with less to go on; refuse it here, naming the file.
    taken = sorted(str(name) for name in servers_raw if sanitize(str(name)) in BUILT_IN_SERVERS)
    if taken:
        name = taken[0]
        builtin = sanitize(name)
        spelled = "" if builtin == name else f" (as a tool name it is spelled {builtin!r})"
        raise ConfigError(
            f"{path}: mcpServers.{name}: the name {name!r}{spelled} is taken by Loom's built-in server "
            f"{builtin!r} (built-in: {', '.join(sorted(BUILT_IN_SERVERS))}); rename this entry in {path}"
        )
    servers = tuple(parse_server(str(name), raw, str(path)) for name, raw in servers_raw.items())
    tool_timeouts_s = _timeouts(data.get("toolTimeouts"), f"{path}: toolTimeouts")
    shell = _shell(data["shell"], f"{path}: shell") if "shell" in data else None
    profiles = _profiles(data.get("models"), f"{path}: models")
    sessions = _sessions(data["sessions"], f"{path}: sessions") if "sessions" in data else None
    advisor = parse_advisor(data["advisor"], f"{path}: advisor") if "advisor" in data else None
    if "goals" in data:  # read by the host (orchestrator.goals.settings); checked here to be reported as the file's
        _check_goals(data["goals"], f"{path}: goals")
    loop = parse_loop(data["loop"], f"{path}: loop") if "loop" in data else None
    try:
        engine = parse_engine(data["engine"], f"{path}: engine") if "engine" in data else None
    except EngineSettingsError as exc:
        raise ConfigError(str(exc)) from None
    return LoomConfig(
        model=model,
        servers=servers,
        tool_timeouts_s=tool_timeouts_s,
        shell=shell,
        profiles=profiles,
        sessions=sessions,
        advisor=advisor,
        loop=loop,
        engine=engine,
    )


def _check_goals(raw: object, where: str) -> None:
    """Refuse a ``goals`` value the host could not use (see :mod:`orchestrator.goals.settings`)."""
    from orchestrator.goals.settings import SettingsError, parse_settings

    try:
        parse_settings(raw, where)
    except SettingsError as exc:
        raise ConfigError(str(exc)) from None


def parse_advisor(raw: object, where: str) -> AdvisorSettings:
    """Validate an ``advisor`` value: a mode, or ``{"mode": ..., "model": ..., "timeout": ...}``.

    Raises:
        ConfigError: not a known mode, or an object with unknown keys or bad values (``where`` names the file).
    """
    modes = "'off', 'lightweight' or 'full'"
    if isinstance(raw, str):
        raw = {"mode": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f'{where} must be {modes}, or an object like {{"mode": "full", "model": "PROVIDER:NAME"}}')
    unknown = sorted(set(raw) - {"mode", "model", "timeout"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are 'mode', 'model' and 'timeout'")
    mode = raw.get("mode", "off")
    if mode not in ADVISOR_MODES:
        raise ConfigError(f"{where}: the mode must be {modes}, not {mode!r}")
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or ":" not in model or model.endswith(":")):
        raise ConfigError(f"{where}.model must be a model like 'anthropic:claude-haiku-4-5', not {model!r}")
    timeout = _number(raw.get("timeout"), f"{where}.timeout", DEFAULT_ADVISOR_TIMEOUT_S)
    return AdvisorSettings(mode=mode, model=model, timeout_s=timeout)


def parse_loop(raw: object, where: str) -> LoopSettings:
    """Validate a ``loop`` value: ``true``, ``false`` or ``{"noticeAfter": N, "stopAfter": M}`` with 2 <= N < M.

    Raises:
        ConfigError: another kind of value, an unknown key, a count that is not a whole number of at least 2, or a
            ``stopAfter`` that does not exceed ``noticeAfter`` (``where`` names the file).
    """
    shape = '{"noticeAfter": 3, "stopAfter": 5}'
    if isinstance(raw, bool):
        return LoopSettings(enabled=raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be an object like {shape}, or false to turn loop detection off")
    unknown = sorted(set(raw) - {"noticeAfter", "stopAfter"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are 'noticeAfter' and 'stopAfter'")
    counts: dict[str, int] = {}
    for key, default in (("noticeAfter", DEFAULT_LOOP_NOTICE_AFTER), ("stopAfter", DEFAULT_LOOP_STOP_AFTER)):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            off = ' (to turn loop detection off, write "loop": false)' if value in (0, False, None) else ""
            raise ConfigError(
                f"{where}.{key} must be a whole number of repeats, at least 2, not {json.dumps(value)}{off}"
            )
        counts[key] = value
    notice, stop = counts["noticeAfter"], counts["stopAfter"]
    if stop <= notice:
        said = {k: "" if k in raw else ", the default" for k in counts}
        raise ConfigError(
            f"{where}.stopAfter ({stop}{said['stopAfter']}) must be more than noticeAfter ({notice}"
            f"{said['noticeAfter']}): the model is told of the loop first, and the run stops if it goes on"
        )
    return LoopSettings(notice_after=notice, stop_after=stop)


def _sessions(raw: object, where: str) -> SessionLimits:
    if not isinstance(raw, dict):
        raise ConfigError(f'{where} must be an object like {{"idleCloseAfter": 600, "maxOpen": 16}}')
    unknown = sorted(set(raw) - {"idleCloseAfter", "maxOpen"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are 'idleCloseAfter' and 'maxOpen'")
    idle = _number(raw.get("idleCloseAfter"), f"{where}.idleCloseAfter", DEFAULT_IDLE_CLOSE_S)
    most = raw.get("maxOpen", DEFAULT_MAX_OPEN_SESSIONS)
    if isinstance(most, bool) or not isinstance(most, int) or most < 1:
        raise ConfigError(f"{where}.maxOpen must be a whole number of sessions, at least 1")
    return SessionLimits(idle_close_s=idle, max_open=most)


def _profiles(raw: object, where: str) -> dict[str, ProfileSettings]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f'{where} must be an object like {{"openai:my-model": {{"contextWindow": 32000}}}}')
    profiles: dict[str, ProfileSettings] = {}
    for pattern, entry in raw.items():
        here = f"{where}.{pattern}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{here} must be an object with 'contextWindow' and/or 'compactAt'")
        unknown = sorted(set(entry) - {"contextWindow", "compactAt"})
        if unknown:
            raise ConfigError(f"{here}: unknown key {unknown[0]!r}; the keys are 'contextWindow' and 'compactAt'")
        window = entry.get("contextWindow")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1000):
            raise ConfigError(f"{here}.contextWindow must be a whole number of tokens, at least 1000")
        at = entry.get("compactAt")
        if at is not None and (isinstance(at, bool) or not isinstance(at, int | float) or not 0.1 <= at < 1):
            raise ConfigError(f"{here}.compactAt must be a ratio between 0.1 and 1 (0.8 compacts at 80%)")
        profiles[str(pattern)] = ProfileSettings(window, None if at is None else float(at))
    return profiles


def _shell(raw: object, where: str) -> ShellOptions:
    if not isinstance(raw, dict):
        raise ConfigError(f'{where} must be an object like {{"sandbox": "auto", "network": true}}')
    unknown = sorted(set(raw) - {"sandbox", "network", "env"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are 'sandbox', 'network' and 'env'")
    sandbox = raw.get("sandbox", "auto")
    if sandbox not in ("auto", "bwrap", "off"):
        raise ConfigError(f"{where}.sandbox must be 'auto', 'bwrap' or 'off', not {sandbox!r}")
    network = raw.get("network", True)
    if not isinstance(network, bool):
        raise ConfigError(f"{where}.network must be true or false, not {network!r}")
    env = raw.get("env", [])
    if not isinstance(env, list) or not all(isinstance(n, str) and _ENV_NAME.fullmatch(n) for n in env):
        raise ConfigError(f'{where}.env must be a list of variable names, like ["GITHUB_TOKEN", "JAVA_HOME"]')
    return ShellOptions(sandbox=sandbox, network=network, env=tuple(env))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def load_config(home: Path, project: Path, extra: Path | None = None) -> LoomConfig:
    """Merge ``$LOOM_HOME/config.json``, ``PROJECT/.loom/config.json`` and ``extra`` (later wins per key).

    Servers merge by name (a later entry replaces the whole earlier one) and ``toolTimeouts`` by key. What the
    project's file adds that could widen what runs — its ``mcpServers``, ``shell`` options looser than the
    user's — is left out until a person trusts the project (:mod:`orchestrator.trust`); the result's
    ``ignored`` says what was left out and how to trust it. ``extra`` is the user's own choice and always applies.

    Raises:
        ConfigError: any of the existing files is invalid; missing files are simply skipped.
    """
    from orchestrator.trust import read_project, trust_state

    if extra is not None and not extra.is_file():
        raise ConfigError(f"{extra}: no such config file")
    layers: list[LoomConfig] = []
    user = home / "config.json"
    if user.is_file():
        layers.append(load_config_file(user))
    snapshot = read_project(project)
    ignored: list[str] = []
    if snapshot.config is not None:
        try:
            text = snapshot.config.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{snapshot.config_path}: cannot read: not UTF-8 text ({exc.reason})") from exc
        found = parse_config(text, snapshot.config_path)
        state = trust_state(home, project, snapshot.digest)
        if state != "trusted":
            base = next((layer.shell for layer in reversed(layers) if layer.shell is not None), ShellOptions())
            found, ignored = _untrusted(found, base, snapshot.config_path, state)
            user_advisor = next((la.advisor for la in reversed(layers) if la.advisor is not None), AdvisorSettings())
            found, ignored = _untrusted_advisor(found, user_advisor, snapshot.config_path, state, ignored)
            user_loop = next((la.loop for la in reversed(layers) if la.loop is not None), LoopSettings())
            found, ignored = _untrusted_loop(found, user_loop, snapshot.config_path, state, ignored)
        if found.engine is not None:  # where runs execute and which database holds them is the home's choice
            ignored.append(
                f"{snapshot.config_path}: 'engine' is ignored: a project cannot choose the engine; "
                "set it in $LOOM_HOME/config.json"
            )
            found = replace(found, engine=None)
        layers.append(found)
    if extra is not None:
        layers.append(load_config_file(extra))
    model: str | None = None
    servers: dict[str, ServerConfig] = {}
    tool_timeouts_s: dict[str, float] = {}
    shell: ShellOptions | None = None
    profiles: dict[str, ProfileSettings] = {}
    sessions: SessionLimits | None = None
    advisor: AdvisorSettings | None = None
    loop: LoopSettings | None = None
    engine: EngineSettings | None = None
    for cfg in layers:
        model = cfg.model or model
        servers.update({s.name: s for s in cfg.servers})
        tool_timeouts_s.update(cfg.tool_timeouts_s)
        shell = cfg.shell or shell
        profiles.update(cfg.profiles)
        sessions = cfg.sessions or sessions
        advisor = cfg.advisor or advisor
        loop = cfg.loop or loop
        engine = cfg.engine or engine
    return LoomConfig(
        model=model,
        servers=tuple(servers.values()),
        tool_timeouts_s=tool_timeouts_s,
        shell=shell,
        profiles=profiles,
        ignored=tuple(ignored),
        sessions=sessions,
        advisor=advisor,
        loop=loop,
        engine=engine,
    )


_SANDBOX_STRENGTH = {"off": 0, "auto": 1, "bwrap": 2}


def loosens(shell: ShellOptions, base: ShellOptions) -> bool:
    """Whether ``shell`` confines commands less than ``base`` does (a weaker sandbox, the network, more variables)."""
    weaker = _SANDBOX_STRENGTH[shell.sandbox] < _SANDBOX_STRENGTH[base.sandbox]
    return weaker or (shell.network and not base.network) or not set(shell.env) <= set(base.env)


def _untrusted(found: LoomConfig, base: ShellOptions, path: Path, state: str) -> tuple[LoomConfig, list[str]]:
    """``found`` without what an untrusted project may not do, and a sentence for each thing left out."""
    why = "it changed since you trusted it" if state == "changed" else "the project is not trusted"
    how = f"review it and run `loom trust` in {path.parent.parent} to use it"
    ignored: list[str] = []
    servers = found.servers
    if servers:
        names = ", ".join(f"{s.name} ({s.command or s.url})" for s in servers)
        ignored.append(f"{path}: ignoring its mcpServers {names}: {why}; {how}")
        servers = ()
    shell = found.shell
    if shell is not None and loosens(shell, base):
        ignored.append(
            f"{path}: ignoring its shell options (sandbox {shell.sandbox!r}, network {str(shell.network).lower()}, "
            f"env {list(shell.env)}), "
            f"which confine commands less than yours: {why}; {how}"
        )
        shell = None
    return replace(found, servers=servers, shell=shell), ignored


def _untrusted_advisor(
    found: LoomConfig, base: AdvisorSettings, path: Path, state: str, ignored: list[str]
) -> tuple[LoomConfig, list[str]]:
    """``found`` without an advisor that reviews less than the user's: a weaker mode, another model, less time.

    An untrusted project may ask for more review, never for less (a timeout it shortens would let every batch
    through unreviewed) nor for a model of its choosing to read the conversation.
    """
    advisor = found.advisor
    if advisor is None:
        return found, ignored
    rank = {mode: i for i, mode in enumerate(ADVISOR_MODES)}
    weaker = rank[advisor.mode] < rank[base.mode] or advisor.timeout_s < base.timeout_s
    if not weaker and advisor.model in (None, base.model):
        return found, ignored
    why = "it changed since you trusted it" if state == "changed" else "the project is not trusted"
    sentence = (
        f"{path}: ignoring its advisor (mode {advisor.mode!r}, model {advisor.model or 'the session model'!r}, "
        f"timeout {advisor.timeout_s:g} s), which reviews less than yours or names its own model: {why}; "
        f"review it and run `loom trust` in {path.parent.parent} to use it"
    )
    return replace(found, advisor=None), [*ignored, sentence]


def _untrusted_loop(
    found: LoomConfig, base: LoopSettings, path: Path, state: str, ignored: list[str]
) -> tuple[LoomConfig, list[str]]:
    """``found`` without loop settings looser than the user's: off, or a notice or a stop that comes later.

    A repository's config is written by whoever wrote the repository; letting it turn loop detection off would let
    it run a session's budget down unnoticed. It may make detection stricter (earlier notices and stops).
    """
    loop = found.loop
    if loop is None or not base.enabled:
        return found, ignored
    if loop.enabled and loop.notice_after <= base.notice_after and loop.stop_after <= base.stop_after:
        return found, ignored
    why = "it changed since you trusted it" if state == "changed" else "the project is not trusted"
    asked = "off" if not loop.enabled else f"noticeAfter {loop.notice_after}, stopAfter {loop.stop_after}"
    sentence = (
        f"{path}: ignoring its loop settings ({asked}), which detect loops less than yours (noticeAfter "
        f"{base.notice_after}, stopAfter {base.stop_after}): {why}; review it and run `loom trust` in "
        f"{path.parent.parent} to use it"
    )
    return replace(found, loop=None), [*ignored, sentence]
