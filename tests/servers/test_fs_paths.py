"""Unit tests of the fs server's path confinement and glob translation (no MCP involved)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from servers.fs._paths import MAX_COMPONENT_BYTES, MAX_PATH_CHARS, Roots
from servers.fs._search import glob_regex


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A root with a file and a sibling directory outside it."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "a.txt").write_text("a")
    (outside / "secret.txt").write_text("secret")
    return root, outside


def test_relative_paths_resolve_against_the_first_root(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    roots = Roots([root])
    assert roots.resolve("sub/a.txt") == root / "sub" / "a.txt"
    assert roots.resolve(".") == root
    assert roots.resolve("sub/../sub/./a.txt") == root / "sub" / "a.txt"


def test_a_path_that_does_not_exist_yet_resolves_through_its_existing_parents(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(root / "sub", root / "link")
    roots = Roots([root])
    assert roots.resolve("link/new/deeper.txt") == root / "sub" / "new" / "deeper.txt"
    with pytest.raises(ToolError, match="resolves outside the allowed roots"):
        roots.resolve("new/../../outside/x.txt")


@pytest.mark.parametrize("raw", ["..", "../outside/secret.txt", "sub/../../outside/secret.txt"])
def test_dotdot_escapes_are_refused_with_an_actionable_message(layout: tuple[Path, Path], raw: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError) as caught:
        Roots([root]).resolve(raw)
    assert str(caught.value) == f"path {raw!r} resolves outside the allowed roots ({root}); use a path inside them"


def test_absolute_paths_are_allowed_inside_and_refused_outside(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    roots = Roots([root])
    assert roots.resolve(str(root / "sub" / "a.txt")) == root / "sub" / "a.txt"
    with pytest.raises(ToolError, match="resolves outside the allowed roots"):
        roots.resolve(str(outside / "secret.txt"))
    with pytest.raises(ToolError, match="resolves outside the allowed roots"):
        roots.resolve("/etc/passwd")


def test_symlinks_are_resolved_before_the_check(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    os.symlink(outside, root / "out_dir")
    os.symlink(outside / "secret.txt", root / "out_file")
    roots = Roots([root])
    for raw in ("out_dir/secret.txt", "out_file", "out_dir/not-yet.txt"):
        with pytest.raises(ToolError, match=r"resolves outside the allowed roots .*\(it resolves to "):
            roots.resolve(raw)


def test_symlink_chains_are_followed_to_their_end(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    # inner -> hop -> outside: each hop looks harmless, the end of the chain does not.
    os.symlink(outside, root / "hop")
    os.symlink(root / "hop", root / "inner")
    os.symlink("sub", root / "ok1")
    os.symlink("ok1/a.txt", root / "ok2")
    roots = Roots([root])
    with pytest.raises(ToolError, match="resolves outside the allowed roots"):
        roots.resolve("inner/secret.txt")
    assert roots.resolve("ok2") == root / "sub" / "a.txt"


def test_a_symlink_loop_is_reported_not_followed_forever(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "loop_a", root / "loop_b")
    with pytest.raises(ToolError, match="cannot be resolved"):
        Roots([root]).resolve("loop_a/x")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "path is empty"),
        ("   ", "path is empty"),
        ("sub/a\x00.txt", "contains a NUL byte"),
        ("a/" * (MAX_PATH_CHARS // 2 + 1), f"the limit is {MAX_PATH_CHARS}"),
        ("x" * (MAX_COMPONENT_BYTES + 1), f"limited to {MAX_COMPONENT_BYTES} bytes"),
        ("bad\ud800", "cannot be encoded"),
    ],
)
def test_malformed_paths_are_refused_with_a_clear_message(layout: tuple[Path, Path], raw: str, message: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError, match=message):
        Roots([root]).resolve(raw)


def test_every_root_is_allowed_and_display_round_trips(tmp_path: Path) -> None:
    first = tmp_path / "first"
    second = tmp_path / "second"
    first.mkdir()
    second.mkdir()
    roots = Roots([first, second, first])
    assert roots.all == (first, second)
    assert roots.resolve(str(second / "x")) == second / "x"
    assert roots.display(first) == "."
    assert roots.display(first / "a" / "b.txt") == "a/b.txt"
    # Relative to its own root, "x" would resolve against the primary root when sent back, so it stays absolute.
    assert roots.display(second / "x") == str(second / "x")


def test_roots_must_be_existing_directories(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="at least one root"):
        Roots([])
    with pytest.raises(ValueError, match="not an existing directory"):
        Roots([tmp_path / "missing"])
    with pytest.raises(ValueError, match="not an existing directory"):
        Roots([tmp_path / "file"])


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("*.py", ["a.py", ".hidden.py"], ["src/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "src/a.py", "src/deep/er/a.py"], ["a.txt", "src/a.pyc"]),
        ("src/**", ["src/a", "src/b/c"], ["src", "other/a"]),
        ("src/*/x.?", ["src/a/x.c"], ["src/x.c", "src/a/b/x.c", "src/a/x.cc"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt", "/.txt"]),
        ("a+b(1).txt", ["a+b(1).txt"], ["aab1.txt"]),
        ("[.txt", ["[.txt"], ["a.txt"]),
    ],
)
def test_glob_translation(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    regex = glob_regex(pattern)
    for path in matching:
        assert regex.match(path), path
    for path in not_matching:
        assert not regex.match(path), path
