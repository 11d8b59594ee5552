r"""A printable, lossless spelling of file names that are not valid UTF-8.

Linux file names are bytes. Python decodes them with ``surrogateescape``, so a byte that is not part of valid UTF-8
(``b"bad\xff.txt"``) becomes a lone surrogate (``"bad\udcff.txt"``), which a JSON encoder or SQLite refuses later,
far from the tool that produced it. Every name or path the fs tools show goes through `escape` instead:

- each such byte is shown as the four characters ``\xHH`` (``bad\xff.txt``), lower-case hex;
- since that makes the backslash special, a literal backslash in a name is shown as ``\x5c``;
- everything else, including valid non-ASCII UTF-8 such as ``é``, is shown as it is.

Tools accept that spelling back as a path (`unescape`), so a name seen in a listing can be read, written or
deleted by passing it exactly as shown. Only ``\xHH`` with ``HH`` = ``5c`` or ``80``-``ff`` is understood: an escape
can never spell ``/``, ``.`` or NUL, and any other backslash in a path is still refused, so a Windows-style
``src\main.py`` is reported as a mistake rather than taken for a strange name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

__all__ = ["ESCAPES_NOTE", "any_escaped", "escape", "is_escaped", "unescape"]

ESCAPES_NOTE = (
    "names containing \\xHH are shown escaped: each \\xHH is one byte that is not valid UTF-8 (\\x5c is a "
    "literal backslash); pass such a name back exactly as shown"
)
"""The note a result carries when any name in it is escaped."""

_ESCAPE = re.compile(r"\\x(5[cC]|[89a-fA-F][0-9a-fA-F])")
_FIRST_SURROGATE_ESCAPE = 0xDC80  # surrogateescape maps byte 0x80 + n to U+DC80 + n
_SURROGATE_BASE = 0xDC00


def escape(name: str) -> str:
    r"""Spell a name (or a path) decoded with ``surrogateescape`` so that it is valid, printable Unicode.

    Args:
        name: A name as ``os`` functions return it, possibly with lone surrogates.

    Returns:
        The name with each undecodable byte as ``\xHH`` and each backslash as ``\x5c``.
    """
    if "\\" not in name and _encodable(name):
        return name
    return "".join(_escape_char(char) for char in name)


def is_escaped(shown: str) -> bool:
    r"""Whether a name returned by `escape` contains an escape.

    Args:
        shown: A name as `escape` returned it.

    Returns:
        True if the name contains an ``\xHH`` escape.
    """
    return "\\x" in shown


def any_escaped(names: Iterable[str]) -> bool:
    """Whether any of the shown names contains an escape.

    Args:
        names: Names as `escape` returned them.

    Returns:
        True if at least one is escaped.
    """
    return any(is_escaped(name) for name in names)


def unescape(raw: str) -> str:
    r"""Turn the spelling `escape` produces back into the name ``os`` functions take.

    Args:
        raw: A path as the model sent it.

    Returns:
        The path with each ``\xHH`` replaced by that byte (as ``os.fsdecode`` would have decoded it).

    Raises:
        ValueError: If the path has a backslash that is not part of a ``\x5c`` or ``\x80``-``\xff`` escape.
    """
    if "\\" not in raw:
        return raw
    if "\\" in _ESCAPE.sub("", raw):
        raise ValueError("backslash outside a \\xHH escape")
    decoded = _ESCAPE.sub(lambda match: _byte_char(int(match[1], 16)), raw)
    # Escaped bytes that happen to form valid UTF-8 (\xc3\xa9) name the same file as the character itself (é).
    return os.fsdecode(os.fsencode(decoded))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escape_char(char: str) -> str:
    if char == "\\":
        return "\\x5c"
    code = ord(char)
    if _FIRST_SURROGATE_ESCAPE <= code <= _FIRST_SURROGATE_ESCAPE + 0x7F:
        return f"\\x{code - _SURROGATE_BASE:02x}"
    if 0xD800 <= code <= 0xDFFF:
        # Not a byte surrogateescape produces, so not part of any real name; never let it reach a result.
        return "\ufffd"
    return char


def _byte_char(byte: int) -> str:
    return "\\" if byte == 0x5C else chr(_SURROGATE_BASE + byte)
