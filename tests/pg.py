"""Pytest fixtures for a private PostgreSQL cluster: ``postgres_url`` (one per pytest process) and ``fresh_database``.

Each pytest process (each xdist worker) runs its own throwaway cluster: ``initdb`` into a temp directory, started
with ``pg_ctl`` on a free loopback port, trust authentication on 127.0.0.1 only, the Unix socket inside the temp
directory, durability switched off (a test cluster dies with the session). Postgres refuses to run as root, so
as root the cluster belongs to Debian's ``postgres`` user (``runuser -u postgres``). ``LOOM_TEST_POSTGRES`` set to a
``postgresql://`` URL uses that server instead. Without the binaries the tests that need Postgres skip, saying
how to install it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

NOT_INSTALLED = "Postgres is not installed (apt-get install postgresql); the Postgres store tests need it"
ENV_URL = "LOOM_TEST_POSTGRES"
SUPERUSER = "loom"


def postgres_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: from PATH, else Debian's newest ``/usr/lib/postgresql``."""
    found = shutil.which("initdb")
    if found is not None:
        directory = Path(found).resolve().parent
        if (directory / "pg_ctl").exists():
            return directory
    candidates = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    for directory in reversed(candidates):
        if (directory / "pg_ctl").exists():
            return directory
    return None


_WATCHDOG = """
import os, shutil, subprocess, sys, time
pid, root, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
subprocess.run(stop, cwd=root, capture_output=True, timeout=60, check=False)
shutil.rmtree(root, ignore_errors=True)
"""
"""Stops the cluster and removes its directory once the pytest process is gone without its teardown (killed)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Cluster:
    """A throwaway cluster in a directory of its own; ``start`` and ``stop`` run its binaries as its owner."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="loom-pg-"))
        self.data = self.root / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.root)
                pytest.skip("running as root without a 'postgres' user; the Postgres store tests need one")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        os.chmod(self.root, 0o700)
        self.port = 0
        self._watchdog: subprocess.Popen[bytes] | None = None

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, *args], cwd=self.root, capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}{tail}")

    def start(self) -> None:
        # A session of its own: a timeout that kills pytest's process group leaves the watchdog to clean up.
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.root), *self._stop_command()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--no-sync",
            "--encoding=UTF8",
            "--locale=C",
        )
        # A free port can be taken between the probe and the bind: try a few.
        for attempt in range(5):
            self.port = _free_port()
            options = " ".join(
                [
                    f"-p {self.port}",
                    "-c listen_addresses=127.0.0.1",
                    f"-c unix_socket_directories={self.root}",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    "-c max_connections=200",
                ]
            )
            try:
                self._run(
                    str(self.bin_dir / "pg_ctl"),
                    "start",
                    "-w",
                    "-t",
                    "30",
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.root / "server.log"),
                    "-o",
                    options,
                )
                break
            except RuntimeError:
                if attempt == 4:
                    raise

    def _stop_command(self) -> list[str]:
        return [*self.as_user, str(self.bin_dir / "pg_ctl"), "stop", "-m", "immediate", "-D", str(self.data)]

    def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()
        with contextlib.suppress(Exception):
            subprocess.run(self._stop_command(), cwd=self.root, capture_output=True, timeout=60, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"


def with_database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a Postgres server's maintenance database: this process's own cluster, or ``LOOM_TEST_POSTGRES``."""
    existing = os.environ.get(ENV_URL)
    if existing:
        yield existing
        return
    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        pytest.skip(NOT_INSTALLED)
    cluster = _Cluster(bin_dir)
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.stop()


@contextlib.contextmanager
def created_database(server_url: str) -> Iterator[str]:
    """A new database with a unique name on ``server_url``'s server, dropped on exit; yields its URL."""
    import psycopg  # here, not at the top: every pytest run loads this plugin, Postgres tests or not

    name = f"loom_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        # FILE_COPY (Postgres 15+): copying template1's files beats WAL-logging them on a cluster without fsync.
        strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
        conn.execute(f'CREATE DATABASE "{name}"{strategy}')
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_database(postgres_url: str) -> Iterator[str]:
    """The URL of an empty database of this test's own on the ``postgres_url`` server, dropped afterwards."""
    with created_database(postgres_url) as url:
        yield url


@pytest.fixture(scope="module")
def module_database(postgres_url: str) -> Iterator[str]:
    """Like ``fresh_database``, shared by one test module's tests (for tests that do not interfere)."""
    with created_database(postgres_url) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a test's store is, once per backend: a SQLite file in ``tmp_path``, then a fresh Postgres database."""
    if request.param == "sqlite":
        return tmp_path / "loom.db"
    url: str = request.getfixturevalue("fresh_database")
    return url
