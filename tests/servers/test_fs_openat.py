"""Opening beneath a root descriptor (no MCP involved), through openat2 and through the O_NOFOLLOW walk alike."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from servers.fs import _openat
from servers.fs._openat import kernel_path, make_dirs_beneath, open_beneath, stat_beneath


@pytest.fixture(params=["openat2", "walk"])
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(_openat, "USE_OPENAT2", False)
    elif kernel_path() != "openat2":
        pytest.skip("openat2 is not available on this kernel")
    assert kernel_path() == request.param
    return str(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/dir/file.txt, root/link_dir -> outside, root/link_in -> dir, root/link_file -> dir/file.txt."""
    root = tmp_path / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "file.txt").write_text("inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "file.txt").write_text("outside\n")
    os.symlink(tmp_path / "outside", root / "link_dir")
    os.symlink("dir", root / "link_in")
    os.symlink("dir/file.txt", root / "link_file")
    return root


@pytest.fixture
def root_fd(tree: Path) -> Iterator[int]:
    fd = os.open(tree, os.O_PATH | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_plain_paths_open(kernel: str, root_fd: int) -> None:
    assert _read(open_beneath(root_fd, b"dir/file.txt", os.O_RDONLY)) == b"inside\n"
    directory = open_beneath(root_fd, b".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sorted(os.listdir(directory)) == ["dir", "link_dir", "link_file", "link_in"]
    finally:
        os.close(directory)


@pytest.mark.parametrize("relative", [b"link_dir/file.txt", b"link_in/file.txt", b"link_file", b"link_dir"])
@pytest.mark.parametrize("flags", [os.O_RDONLY, os.O_PATH, os.O_WRONLY | os.O_CREAT, os.O_RDONLY | os.O_DIRECTORY])
def test_any_symlink_on_the_way_fails_with_eloop(kernel: str, root_fd: int, relative: bytes, flags: int) -> None:
    # Even symlinks that stay inside: callers resolve those first, so one seen here was planted after the check.
    with pytest.raises(OSError) as caught:
        os.close(open_beneath(root_fd, relative, flags))
    assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR), caught.value


def test_a_symlinked_directory_component_fails_with_eloop_exactly(kernel: str, root_fd: int) -> None:
    with pytest.raises(OSError) as caught:
        open_beneath(root_fd, b"link_dir/file.txt", os.O_RDONLY)
    assert caught.value.errno == errno.ELOOP


@pytest.mark.parametrize("relative", [b"../outside/file.txt", b"dir/../../outside/file.txt", b"/etc/passwd", b"a//b"])
def test_paths_that_could_climb_are_refused(kernel: str, root_fd: int, relative: bytes) -> None:
    with pytest.raises(OSError) as caught:
        open_beneath(root_fd, relative, os.O_RDONLY)
    assert caught.value.errno == errno.EINVAL


def test_stat_beneath_reports_missing_paths_as_none(kernel: str, root_fd: int) -> None:
    info = stat_beneath(root_fd, b"dir/file.txt")
    assert info is not None and stat.S_ISREG(info.st_mode)
    assert stat_beneath(root_fd, b"dir/missing.txt") is None
    assert stat_beneath(root_fd, b"dir/file.txt/below") is None
    with pytest.raises(OSError) as caught:
        stat_beneath(root_fd, b"link_dir/file.txt")
    assert caught.value.errno == errno.ELOOP


def test_make_dirs_creates_below_and_never_through_a_symlink(
    kernel: str, tree: Path, root_fd: int, tmp_path: Path
) -> None:
    made = make_dirs_beneath(root_fd, b"new/deeper/still")
    try:
        assert stat.S_ISDIR(os.fstat(made).st_mode)
    finally:
        os.close(made)
    assert (tree / "new" / "deeper" / "still").is_dir()
    with pytest.raises(OSError) as caught:
        make_dirs_beneath(root_fd, b"link_dir/created/here")
    assert caught.value.errno == errno.ELOOP
    assert sorted(os.listdir(tmp_path / "outside")) == ["file.txt"]
    (tree / "plain").write_text("")
    with pytest.raises(NotADirectoryError):
        make_dirs_beneath(root_fd, b"plain/sub")


def test_creating_a_file_through_a_dangling_symlink_is_refused(kernel: str, tree: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "outside" / "made.txt", tree / "dangling")
    fd = os.open(tree, os.O_PATH | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as caught:
            open_beneath(fd, b"dangling", os.O_WRONLY | os.O_CREAT)
    finally:
        os.close(fd)
    assert caught.value.errno in (errno.ELOOP, errno.EEXIST)
    assert not (tmp_path / "outside" / "made.txt").exists()
