"""Loom's version, as every Loom MCP server declares it in ``serverInfo``.

The installed package's metadata says it; a source tree that was never installed reads it from
``pyproject.toml`` next to the packages. Only the standard library is imported here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from pathlib import Path

PACKAGE = "loom-agent"
UNKNOWN = "0+unknown"
"""What is declared when neither the metadata nor ``pyproject.toml`` can be read."""


@functools.cache
def loom_version() -> str:
    """The ``loom-agent`` package version, e.g. ``0.1.0``."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        with (Path(__file__).resolve().parents[1] / "pyproject.toml").open("rb") as project:
            version = tomllib.load(project).get("project", {}).get("version")
    except (OSError, tomllib.TOMLDecodeError):
        return UNKNOWN
    return version if isinstance(version, str) and version else UNKNOWN
