"""The ``engine`` setting: where runs execute — in this process (embedded) or on DBOS workers over Postgres.

``"engine": {"kind": "embedded"}`` is the default: one process, SQLite under ``LOOM_HOME``. ``"engine": {"kind":
"dbos", "database": "postgresql://USER@HOST:PORT/DB"}`` puts the store and DBOS's system tables in one Postgres
database that every worker (``loom worker``) and the face (``loom serve``) share. The setting is the home's, never
a project's: a cloned repository must not point a person's runs at a database of its choosing, so
:func:`orchestrator.config.load_config` reads it from ``$LOOM_HOME/config.json`` (and ``--config``) only.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

EngineKind = Literal["embedded", "dbos"]

DEFAULT_CONCURRENCY = 4
DEFAULT_HEARTBEAT_S = 2.0
DEFAULT_TAKEOVER_AFTER_S = 10.0
_KEYS = ("kind", "database", "concurrency", "heartbeatS", "takeoverAfterS")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class EngineSettingsError(ValueError):
    """The ``engine`` value cannot be used; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The parsed ``engine`` value."""

    kind: EngineKind = "embedded"
    database: str = ""
    """The shared Postgres database (``postgresql://...``), with ``${VAR}`` already expanded; empty when embedded."""
    concurrency: int = DEFAULT_CONCURRENCY
    """``concurrency``: how many runs one worker drives at a time."""
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    """``heartbeatS``: how often a worker records that it is alive."""
    takeover_after_s: float = DEFAULT_TAKEOVER_AFTER_S
    """``takeoverAfterS``: how long a worker may be silent before another takes over its runs."""

    @property
    def distributed(self) -> bool:
        """Whether runs execute on DBOS workers rather than in the process that accepts them."""
        return self.kind == "dbos"

    @property
    def shown_database(self) -> str:
        """The database URL fit to print: its password replaced by ``***``."""
        return mask_url(self.database)


def parse_engine(raw: object, where: str) -> EngineSettings:
    """Validate an ``engine`` value (``where`` names the file in errors).

    Raises:
        EngineSettingsError: an unknown kind or key, a missing or malformed database URL, bad numbers.
    """
    example = '{"kind": "dbos", "database": "postgresql://loom@127.0.0.1:5432/loom"}'
    if isinstance(raw, str):
        raw = {"kind": raw}
    if not isinstance(raw, dict):
        raise EngineSettingsError(f'{where} must be an object like {{"kind": "embedded"}} or {example}')
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise EngineSettingsError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(map(repr, _KEYS))}")
    kind = raw.get("kind", "embedded")
    if kind not in ("embedded", "dbos"):
        raise EngineSettingsError(f"{where}.kind must be 'embedded' or 'dbos', not {kind!r}")
    if kind == "embedded":
        extra = sorted(set(raw) - {"kind"})
        if extra:
            raise EngineSettingsError(f"{where}: {extra[0]!r} applies to the dbos engine only; remove it or set kind")
        return EngineSettings()
    database = raw.get("database")
    if not isinstance(database, str) or not database:
        raise EngineSettingsError(f"{where}.database is required for the dbos engine, like {example}")
    database = _expand(database, f"{where}.database")
    if urlsplit(database).scheme not in ("postgresql", "postgres"):
        raise EngineSettingsError(
            f"{where}.database must be a Postgres URL (postgresql://USER@HOST:PORT/DB), not {mask_url(database)!r}"
        )
    return EngineSettings(
        kind="dbos",
        database=database,
        concurrency=int(_positive(raw.get("concurrency"), f"{where}.concurrency", DEFAULT_CONCURRENCY, whole=True)),
        heartbeat_s=_positive(raw.get("heartbeatS"), f"{where}.heartbeatS", DEFAULT_HEARTBEAT_S),
        takeover_after_s=_positive(raw.get("takeoverAfterS"), f"{where}.takeoverAfterS", DEFAULT_TAKEOVER_AFTER_S),
    )


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (a URL is printed and logged; its secret never is)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def default_worker_id() -> str:
    """A worker's id when none is given: the host's name and the process id (unique on a machine, readable)."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _expand(value: str, where: str) -> str:
    # ``${PGPASSWORD}``-style references keep the secret out of the config file.
    def repl(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise EngineSettingsError(f"{where}: environment variable ${{{m.group(1)}}} is not set")
        return os.environ[m.group(1)]

    return _VAR.sub(repl, value)


def _positive(raw: object, where: str, default: float, *, whole: bool = False) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0 or (whole and not isinstance(raw, int)):
        kind = "a whole number" if whole else "a number"
        raise EngineSettingsError(f"{where} must be {kind} above 0, not {raw!r}")
    return float(raw)
