"""One writer per ``LOOM_HOME``: an open embedded runtime holds ``runtime.lock``; a second one refuses.

The daemon's side (``loom serve`` holds it too) and the CLI's messages are tested in
``tests/clients/test_cli_newuser_one_writer.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.lock import LOCK_FILE, HomeInUse, RuntimeLock
from orchestrator.store.interface import StoreError
from tests.clients.cli_support import REPO_ROOT

pytestmark = pytest.mark.anyio

_HOLD = """
import sys, time
from pathlib import Path
from orchestrator.runtime.lock import RuntimeLock
with RuntimeLock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


async def test_a_second_runtime_on_the_same_home_refuses_until_the_first_closes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with embedded_runtime(home):
        with pytest.raises(HomeInUse) as refused:
            async with embedded_runtime(home):
                pass
        mode = os.stat(home / LOCK_FILE).st_mode & 0o777
    async with embedded_runtime(home) as again:
        assert again.home == home
    assert refused.value.pid == os.getpid() and isinstance(refused.value, StoreError)
    assert "`loom serve`" in str(refused.value) and str(home) in str(refused.value)
    assert mode == 0o600 and os.stat(home).st_mode & 0o777 == 0o700


def test_a_killed_holder_leaves_the_home_free(tmp_path: Path) -> None:
    home = tmp_path / "home"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(home)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(HomeInUse) as refused, RuntimeLock(home):
            pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()
    assert refused.value.pid == holder.pid
    with RuntimeLock(home) as taken:  # the kernel dropped the killed process's lock at once
        assert (home / LOCK_FILE).read_text().startswith(f'{{"pid": {os.getpid()},')
    assert taken.path == home / LOCK_FILE


def test_a_home_that_cannot_hold_the_lock_is_a_store_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="cannot open"), RuntimeLock(home):
        pass
