"""The daemon token: created private in one step, reused, refused when others can read it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.daemon.auth import StaticTokenVerifier, TokenError, ensure_home, ensure_token, load_token

pytestmark = pytest.mark.anyio


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """umask 0, so that only the mode passed at creation can make a file private."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
def test_the_home_and_the_token_are_created_owner_only(tmp_path: Path) -> None:
    home = tmp_path / "a" / "home"
    ensure_home(home)
    token = ensure_token(home)
    assert mode(home) == 0o700
    assert mode(home / "daemon.token") == 0o600
    assert len(token) >= 43 and token == load_token(home)


def test_the_token_is_reused_on_later_starts(tmp_path: Path) -> None:
    first = ensure_token(tmp_path)
    assert ensure_token(tmp_path) == first


def test_a_token_readable_by_others_is_refused(tmp_path: Path) -> None:
    ensure_token(tmp_path)
    (tmp_path / "daemon.token").chmod(0o644)
    with pytest.raises(TokenError, match="readable by others.*delete it"):
        ensure_token(tmp_path)


def test_an_empty_token_file_left_by_a_crash_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "daemon.token").touch(mode=0o600)
    token = ensure_token(tmp_path)
    assert token and load_token(tmp_path) == token


def test_a_symlinked_token_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("stolen\n")
    (tmp_path / "daemon.token").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TokenError, match="cannot read"):
        load_token(tmp_path)


def test_a_client_without_a_token_is_told_to_start_the_daemon(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="loom serve"):
        load_token(tmp_path)


async def test_the_verifier_accepts_only_the_token() -> None:
    verifier = StaticTokenVerifier("s3cret")
    accepted = await verifier.verify_token("s3cret")
    assert accepted is not None and accepted.client_id == "loom"
    for wrong in ("", "s3cre", "s3cret ", "S3CRET", "s3crét"):
        assert await verifier.verify_token(wrong) is None


@pytest.mark.parametrize("loose", [0o640, 0o604, 0o644, 0o666])
def test_a_client_refuses_a_token_others_can_read(tmp_path: Path, loose: int) -> None:
    # Someone loosened the file while the daemon runs: a client must not use a token others can copy.
    ensure_token(tmp_path)
    (tmp_path / "daemon.token").chmod(loose)
    with pytest.raises(TokenError, match="readable by others.*stop the daemon"):
        load_token(tmp_path)
