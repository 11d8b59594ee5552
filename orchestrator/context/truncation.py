"""Cutting a long tool result down to its head, its tail and the error lines in between.

A model has a finite context window, and every character of a tool result stays in it for the rest
of the session. One ``cat`` of a 5 MB log would crowd out the conversation, the system prompt and
every later result, so a result longer than a limit is cut before the model sees it.

What survives the cut is chosen for what the model most needs to act on:

* the **head**, where commands print what they are doing and column headers live;
* the **tail**, where they print the summary, the exit status and usually the failure;
* every **error line** from the omitted middle, with its line number, because a compiler error or a
  traceback buried at line 9,000 of 20,000 is exactly what the model was running the tool to find;
* a short **note** saying what was cut and how to read the rest: the full output stays in Loom's
  store and the model-visible tool :data:`FULL_OUTPUT_TOOL` pages through it, so nothing is lost.

Speed matters because this runs on every tool result: the middle of a 5 MB output is searched with
a handful of literal scans over a lower-cased copy (C-speed ``str``/``bytes``/``re`` work) rather
than one case-insensitive alternation, which Python's ``re`` runs an order of magnitude slower, and
no more error lines are collected than could ever be shown. Text that is not ASCII is scanned as
UTF-8 bytes, because ``str.lower()`` on it is many times slower; it still clips noticeably slower
than ASCII text (tens of milliseconds for 5 MB).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import AnyStr

FULL_OUTPUT_TOOL = "loom__tool_output"
"""The model-visible tool that returns a call's full output by ``call_id``, ``offset`` and ``limit``."""
DEFAULT_LIMIT = 16_000
"""Characters of a tool result the model sees before it is cut (about 4,000 tokens)."""

_HEAD_SHARE = 0.45
"""Share of the limit given to the head; the tail gets what the head and the error lines leave."""
_ERROR_SHARE = 0.20
"""Most of the limit the error lines may take, so a wall of errors cannot squeeze out the tail."""
_MAX_ERROR_LINE = 300
"""Characters kept of one error line; a longer line is shown as a window around its error word."""
_ERROR_CONTEXT_BEFORE = 100
"""Characters kept before the error word when a long error line is windowed."""
_MARKER_RESERVE = 160
"""Characters of the limit kept back for the marker lines around the omitted part."""
_SECTION_RESERVE = 120
"""Characters of the error share kept back for the section's heading and its count of lines not shown."""
_MIN_ENTRY = 10
"""Fewest characters one shown error line takes ("line 9: E\\n"), bounding how many can be shown."""

# Candidate lines are found by scanning a lower-cased copy once per word below. A literal ``find`` runs
# at C speed; a pattern is used only where it beats that (a shared prefix, or a rare first character
# before common ones), because ``re`` scans for a pattern's literal prefix as fast. One
# case-insensitive alternation of all the words would be simpler but is ten times slower in ``re``.
# Each entry is the needle and how far past a match's start the error line's text begins.
_NEEDLES: tuple[tuple[str | re.Pattern[str], int], ...] = (
    ("error", 0),  # error, errors, Error:, ERROR, ValueError, error[E0308], make's "Error 1"
    (re.compile(r"fa(?:il|tal)"), 0),  # fail, failed, failure, FAILED, git's "fatal:"
    ("exception", 0),  # Exception, NullPointerException, "Exception in thread"
    ("traceback", 0),  # Python's "Traceback (most recent call last):"
    ("panic", 0),  # Go's "panic:", Rust's "panicked at"
    ("denied", 0),  # "Permission denied", "Access denied"
    ("segmentation fault", 0),  # "Segmentation fault (core dumped)"
    (re.compile(r"\ne   "), 1),  # pytest's "E   assert 1 == 2", found by the newline before it
)
# The same needles for text that is not ASCII, which is searched as UTF-8 bytes: bytes.lower() only
# touches ASCII and so keeps every offset, and it is many times faster than str.lower() on such text.
_BYTE_NEEDLES: tuple[tuple[bytes | re.Pattern[bytes], int], ...] = tuple(
    (needle.encode() if isinstance(needle, str) else re.compile(needle.pattern.encode()), skip)
    for needle, skip in _NEEDLES
)

# The candidate line must then hold an error word standing on its own, which drops most false
# positives of the substring scan: "default", "failover", "fail_fast", "error_count", "terror",
# "exceptional", and summaries that report nothing wrong ("0 errors", "no failures", "errors: 0").
# CamelCase exception classes (ValueError, IOException) are matched case-sensitively so that
# snake_case names such as "on_error" are not.
_ERROR_LINE = re.compile(
    r"""
    (?<![\w-])(?<!\b0\ )(?<!\bno\ )
    (?:errors?|exceptions?|traceback|fatal|fail(?:s|ed|ures?)?|panic(?:s|ked)?|denied|segfault|segmentation\ fault)
    (?![\w-])(?!"?\s*[:=]\s*(?:0|null|none|nil|false)\b)
    | (?-i:[A-Za-z0-9]*[a-z0-9](?:Error|Exception))(?![\w-])
    | ^E\ {3}
    """,
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class _ErrorLine:
    at: int
    """Where the error word sits in the whole content, to tell the omitted middle from the tail."""
    number: int
    """The line's 1-based number in the whole content."""
    text: str
    """The line, or a window of at most :data:`_MAX_ERROR_LINE` characters around its error word."""


def clip_result(content: str, call_id: str, *, limit: int = DEFAULT_LIMIT) -> str:
    """Cut a tool result longer than ``limit`` to its head, its tail and the error lines between.

    The result is at most about ``limit`` characters plus a closing note of under 400 characters that
    names ``call_id`` and :data:`FULL_OUTPUT_TOOL`, with which the model can read the full output.
    About 45% of the limit goes to the head, up to 20% to the error lines from the omitted middle
    (each prefixed with its line number and cut to 300 characters), and the rest to the tail. Cuts
    fall on line boundaries unless that would waste more than half a part, so a single enormous line
    (minified JSON, say) is cut by characters instead.

    Args:
        content: The tool's full text output.
        call_id: The tool call's id, which the note tells the model to pass to :data:`FULL_OUTPUT_TOOL`.
        limit: The most characters of ``content`` to show.

    Returns:
        ``content`` itself when it is no longer than ``limit``; otherwise the cut text with its note.

    Raises:
        ValueError: If ``limit`` is negative.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    total = len(content)
    if total <= limit:
        return content

    head_end = _head_end(content, int(limit * _HEAD_SHARE))
    body_budget = max(0, limit - _MARKER_RESERVE)
    error_budget = int(limit * _ERROR_SHARE)
    lines = _LineCounter(content)
    # Numbered before the search, whose line numbers run forward from here.
    first = lines.number(head_end)
    # More error lines than could ever be shown need not be collected, which keeps an output that is
    # nothing but errors as quick to clip as any other.
    found, searched_until = _error_lines(content, head_end, lines, cap=error_budget // _MIN_ENTRY + 1)

    # The tail gets what the error lines leave, and the error lines are those before the tail: a
    # bigger section shrinks the tail, which can move more error lines into the middle. The section
    # only grows from round to round, so this settles within a few; should it not, the last section
    # is cut to the room the tail left, counting the rest as "not shown".
    sized_for = 0  # the section length the tail was sized for
    tail_start = _tail_start(content, body_budget - head_end, head_end)
    section = _Section.build(found, tail_start, error_budget, searched_until)
    for _ in range(8):
        if len(section.text) <= sized_for:
            break
        sized_for = len(section.text)
        tail_start = _tail_start(content, body_budget - head_end - sized_for, head_end)
        section = _Section.build(found, tail_start, error_budget, searched_until)
    if len(section.text) > sized_for:
        section = _Section.build(found, tail_start, sized_for, searched_until)

    head, tail = content[:head_end], content[tail_start:]
    last = lines.number(max(head_end, tail_start - 1))
    line_count = lines.number(total - 1) if content.endswith("\n") else lines.number(total)
    span = f"lines {first:,}–{last:,}" if first != last else f"part of line {first:,}"

    parts = [head]
    if head and not head.endswith("\n"):
        parts.append("\n")
    parts.append(f"[… {span} omitted ({tail_start - head_end:,} characters) …]\n")
    if section.text:
        parts.append(section.text)
        parts.append("[… end of the omitted part …]\n")
    parts.append(tail)
    if not tail.endswith("\n"):
        parts.append("\n")
    kept = f", {section.shown:,} error lines from them kept" if section.shown else ""
    parts.append(
        f"[Loom cut this output: showing {len(head) + len(tail):,} of {total:,} characters "
        f"({span} of {line_count:,} omitted{kept}). The full output: call {FULL_OUTPUT_TOOL} with "
        f"call_id={json.dumps(call_id)} (offset/limit page through it; the cut starts at offset {head_end}).]"
    )
    return "".join(parts)


def _head_end(content: str, budget: int) -> int:
    """Where the head ends: after the last whole line that fits, unless that wastes over half of it."""
    newline = content.rfind("\n", 0, budget)
    return newline + 1 if newline >= 0 and newline + 1 >= budget // 2 else budget


def _tail_start(content: str, budget: int, floor: int) -> int:
    """Where the tail starts: at the first whole line in its budget, unless that wastes over half of it."""
    start = len(content) - max(0, budget)
    if start <= floor:
        return floor
    if content[start - 1] == "\n":
        return start
    newline = content.find("\n", start, start + budget // 2)
    # A newline that ends the content would leave no tail at all; cut the last line by characters.
    return newline + 1 if 0 <= newline < len(content) - 1 else start


class _LineCounter:
    """1-based line numbers of positions, counting newlines incrementally from the last answer.

    Queries come mostly in increasing order, so a 5 MB content is counted through about once.
    """

    def __init__(self, content: str) -> None:
        self._content = content
        self._at = 0
        self._line = 1

    def number(self, position: int) -> int:
        """The line the character at ``position`` is on."""
        if position >= self._at:
            self._line += self._content.count("\n", self._at, position)
        else:
            self._line -= self._content.count("\n", position, self._at)
        self._at = position
        return self._line


def _error_lines(content: str, start: int, lines: _LineCounter, *, cap: int) -> tuple[list[_ErrorLine], int]:
    """The error lines at or after ``start``, in order, and the position up to which that list is complete.

    The list ends early only when one word matched on more than ``cap`` lines;
    then only the lines before the first such cap are returned, being the only ones known to be all.
    """
    if content.isascii():
        pairs, complete_until = _candidates(content.lower(), _NEEDLES, "\n", start, cap)
        complete_until = min(complete_until, len(content))
    else:
        data = content.encode("utf-8", "surrogatepass").lower()
        byte_start = len(content[:start].encode("utf-8", "surrogatepass"))
        byte_pairs, byte_until = _candidates(data, _BYTE_NEEDLES, b"\n", byte_start, cap)
        if byte_until < len(data):
            byte_pairs.append((byte_until, byte_until))
        pairs = _char_offsets(data, byte_pairs, byte_start, start)
        complete_until = pairs.pop()[0] if byte_until < len(data) else len(content)

    found: list[_ErrorLine] = []
    for line_end, hit in pairs:
        line = _error_line(content, hit, line_end, start, lines)
        if line is not None:
            found.append(line)
    return found, complete_until


def _candidates(
    text: AnyStr, needles: Sequence[tuple[AnyStr | re.Pattern[AnyStr], int]], newline: AnyStr, start: int, cap: int
) -> tuple[list[tuple[int, int]], int]:
    """Lines of lower-cased ``text`` after ``start`` holding a needle, as sorted (line end, word) offsets.

    Also returns the offset up to which the list is complete (``len(text)`` unless a needle hit its cap);
    lines after it are left out.
    """
    ends: dict[int, int] = {}
    complete_until = len(text)
    for needle, skip in needles:
        # A needle that starts before its line (the pytest one) may match from just before ``start``.
        position, matched = max(0, start - skip), 0
        while True:
            if isinstance(needle, re.Pattern):
                match = needle.search(text, position)
                hit = -1 if match is None else match.start()
            else:
                hit = text.find(needle, position)
            if hit < 0:
                break
            hit += skip
            line_end = text.find(newline, hit)
            line_end = len(text) if line_end < 0 else line_end
            if hit < ends.get(line_end, line_end + 1):
                ends[line_end] = hit
            matched += 1
            if matched >= cap:
                complete_until = min(complete_until, line_end)
                break
            # Go on from the line's newline (the pytest needle starts with one): one error word per line
            # is enough, and a giant line full of them must not cost a Python iteration per occurrence.
            position = line_end
    return sorted(item for item in ends.items() if item[0] <= complete_until), complete_until


def _char_offsets(data: bytes, pairs: list[tuple[int, int]], byte_at: int, char_at: int) -> list[tuple[int, int]]:
    """Turn sorted (line end, word) byte offsets into UTF-8 ``data`` into character offsets.

    Every offset sits on an ASCII byte, so every slice between two of them decodes on its own; the
    slices are decoded in order from ``byte_at`` (which is character ``char_at``), so the whole costs
    at most one decoding of ``data``.
    """
    converted: list[tuple[int, int]] = []
    for line_end, hit in pairs:
        hit_char = char_at + len(data[byte_at:hit].decode("utf-8", "surrogatepass"))
        char_at = hit_char + len(data[hit:line_end].decode("utf-8", "surrogatepass"))
        byte_at = line_end
        converted.append((char_at, hit_char))
    return converted


def _error_line(content: str, hit: int, line_end: int, floor: int, lines: _LineCounter) -> _ErrorLine | None:
    """The candidate line around ``hit`` if it really holds an error word, cut to a window."""
    reach = max(0, floor - 1, hit - _MAX_ERROR_LINE)
    newline = content.rfind("\n", reach, hit)
    # Only a line start found within reach is known; otherwise the line began further back (in the
    # head, when that was cut mid-line).
    line_start = newline + 1 if newline >= 0 else (0 if reach == 0 else None)
    if line_start is not None and line_end - line_start <= _MAX_ERROR_LINE:
        low, high = line_start, line_end
    else:
        low = max(hit - _ERROR_CONTEXT_BEFORE, line_start if line_start is not None else floor)
        high = min(line_end, low + _MAX_ERROR_LINE)
    if _ERROR_LINE.search(content, low, high) is None:
        return None
    text = content[low:high].rstrip("\r")
    if low != line_start:
        text = "…" + text
    if high < line_end:
        text += "…"
    return _ErrorLine(at=hit, number=lines.number(hit), text=text)


@dataclass(frozen=True, slots=True)
class _Section:
    """The error lines shown between the head and the tail."""

    text: str
    shown: int

    @classmethod
    def build(cls, found: list[_ErrorLine], before: int, budget: int, searched_until: int) -> _Section:
        """The section for the error lines before ``before``, in at most about ``budget`` characters.

        Args:
            found: The error lines after the head, in order.
            before: Where the tail starts; error lines from there on are in the tail already.
            budget: The most characters the section should take.
            searched_until: Where ``found`` stops being complete (see :func:`_error_lines`).
        """
        omitted = [line for line in found if line.at < before]
        complete = before <= searched_until
        if not omitted and complete:
            return cls(text="", shown=0)
        entries: list[str] = []
        used = 0
        for line in omitted:
            entry = f"line {line.number:,}: {line.text}\n"
            if used + len(entry) > budget - _SECTION_RESERVE:
                break
            entries.append(entry)
            used += len(entry)
        dropped = len(omitted) - len(entries)
        header = f"[{len(entries):,} error lines from the omitted part:]\n" if entries else ""
        # With too many error lines to collect them all quickly, say so rather than guess a number.
        count = f"more than {dropped:,}" if not complete else f"{dropped:,}"
        if not entries:
            more = f"[… {count} error lines in the omitted part not shown …]\n"
        elif not complete:
            more = f"[… and {count} further error lines not shown …]\n"
        elif dropped:
            more = f"[… and {count} more error lines not shown …]\n"
        else:
            more = ""
        return cls(text=header + "".join(entries) + more, shown=len(entries))
