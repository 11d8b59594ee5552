"""Unit tests of the shell server's bounded output capture."""

from __future__ import annotations

import pytest

from servers.shell._capture import HeadTailBuffer


def test_output_within_the_limit_is_kept_whole() -> None:
    buffer = HeadTailBuffer(10)
    for chunk in (b"ab", b"cdefgh", b"ij"):
        buffer.feed(chunk)
    assert (buffer.text(), buffer.truncated, buffer.dropped, buffer.total) == ("abcdefghij", False, 0, 10)


def test_long_output_keeps_head_and_tail_with_a_marker() -> None:
    buffer = HeadTailBuffer(10)
    for number in range(1000):
        buffer.feed(f"{number}\n".encode())
    assert buffer.truncated
    assert buffer.dropped == buffer.total - 10
    assert buffer.text() == f"0\n1\n2\n[... {buffer.dropped} bytes dropped ...]\n999\n"


def test_a_cut_never_splits_a_utf8_character() -> None:
    buffer = HeadTailBuffer(10)
    buffer.feed("é".encode() * 20)
    assert buffer.text() == "éé\n[... 30 bytes dropped ...]\néé"


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        HeadTailBuffer(0)
