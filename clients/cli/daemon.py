"""``loom serve``: run the daemon in the foreground until SIGTERM or Ctrl-C.

The daemon itself is :mod:`orchestrator.daemon`; this module turns options and the environment into
its arguments, and its errors into messages and exit codes.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from clients.cli.exits import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE

DEFAULT_PORT = 7878


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    sys.stderr.write(f"loom: error: {message}\n")
    return code


def _configure_logging() -> None:
    # Before any MCPServer exists: its constructor calls logging.basicConfig, which would otherwise win.
    level = os.environ.get("LOOM_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def choose_port(option: int | None, environ: Mapping[str, str] = os.environ) -> int:
    """``--port``, else ``$LOOM_PORT``, else 7878.

    Raises:
        ValueError: the chosen value is not a port number (0 allowed: pick a free one).
    """
    if option is not None:
        port, source = option, "--port"
    elif environ.get("LOOM_PORT", "").strip():
        source = "LOOM_PORT"
        try:
            port = int(environ["LOOM_PORT"])
        except ValueError:
            raise ValueError(f"LOOM_PORT={environ['LOOM_PORT']!r} is not a port number") from None
    else:
        return DEFAULT_PORT
    if not 0 <= port <= 65535:
        raise ValueError(f"{source} {port} is not a port number (0-65535; 0 picks a free one)")
    return port


def serve(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM or Ctrl-C; 0 after a clean shutdown, 2 if it cannot start."""
    try:
        port = choose_port(args.port)
    except ValueError as exc:
        return _fail(str(exc))
    _configure_logging()

    import anyio

    from orchestrator.config import ConfigError, load_config, loom_home
    from orchestrator.daemon.auth import TokenError
    from orchestrator.daemon.discovery import AlreadyRunning, Discovery
    from orchestrator.daemon.runner import DaemonError, StoreFailed, run_daemon

    home = loom_home()
    try:
        extra = Path(args.config).expanduser() if getattr(args, "config", None) else None
        config = load_config(home, Path.cwd(), extra)
    except ConfigError as exc:
        return _fail(str(exc))
    for note in config.ignored:  # an untrusted project's servers or sandbox options: said once here, and per session
        sys.stderr.write(f"loom: warning: {note}\n")

    def ready(found: Discovery) -> None:
        sys.stderr.write(f"loom: daemon listening on {found.url} (pid {found.pid})\n")
        sys.stderr.flush()

    try:
        anyio.run(functools.partial(run_daemon, home, port, on_ready=ready, config=config))
    except StoreFailed as exc:
        return _fail(str(exc), EXIT_FAILED)
    except (AlreadyRunning, DaemonError, TokenError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C before the daemon watches signals (still starting)
        return EXIT_CANCELLED
    except OSError as exc:  # the home cannot be created or written
        return _fail(f"{home}: {exc.strerror or exc}")
    return EXIT_OK
