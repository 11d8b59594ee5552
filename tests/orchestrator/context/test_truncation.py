from __future__ import annotations

import re

import pytest

from orchestrator.context.truncation import DEFAULT_LIMIT, FULL_OUTPUT_TOOL, clip_result

NOTE = re.compile(r"\[Loom cut this output: [^\n]*\]$")
CUT_AT = re.compile(r"the cut starts at offset (\d+)")


def numbered(count: int, width: int = 30) -> list[str]:
    return [f"{i:06d} compiling module ok".ljust(width, ".") for i in range(count)]


def note_of(result: str) -> str:
    match = NOTE.search(result)
    assert match is not None, result[-500:]
    return match.group(0)


def cut_at(result: str) -> int:
    match = CUT_AT.search(note_of(result))
    assert match is not None
    return int(match.group(1))


def test_output_within_the_limit_is_returned_as_it_is() -> None:
    content = "a\n" * 50
    assert clip_result(content, "toolu_01", limit=100) is content
    assert clip_result("", "toolu_01") == ""


def test_one_character_over_the_limit_is_cut() -> None:
    content = "\n".join(numbered(400))
    result = clip_result(content, "toolu_01", limit=len(content) - 1)
    assert result != content
    assert FULL_OUTPUT_TOOL in result


def test_head_and_tail_are_exact_first_and_last_lines() -> None:
    lines = numbered(20_000)
    content = "\n".join(lines) + "\n"
    result = clip_result(content, "toolu_01")
    assert result.startswith(lines[0] + "\n" + lines[1] + "\n")
    body = result[: result.rindex("[Loom cut")]
    assert body.endswith("\n" + lines[-2] + "\n" + lines[-1] + "\n")
    # Whole lines only: every line shown is a line of the content or a marker.
    for line in body.splitlines():
        assert line in lines or line.startswith("[…"), line


def test_note_names_the_call_and_the_tool_and_where_the_cut_starts() -> None:
    content = "\n".join(numbered(20_000))
    result = clip_result(content, "toolu_01ABC")
    note = note_of(result)
    assert 'call_id="toolu_01ABC"' in note
    assert FULL_OUTPUT_TOOL in note
    assert len(note) < 400
    assert f"of {len(content):,} characters" in note
    assert "of 20,000 omitted" in note
    # The offset is where the shown head stops, so paging from it reads exactly what was left out.
    offset = cut_at(result)
    assert result[:offset] == content[:offset]
    assert result[offset:].startswith("[… lines ")


def test_omitted_line_range_is_reported() -> None:
    content = "\n".join(numbered(1_000)) + "\n"
    result = clip_result(content, "c", limit=4_000)
    shown = result.splitlines()
    marker = next(i for i, line in enumerate(shown) if line.startswith("[… lines "))
    last_in_head, first_in_tail = int(shown[marker - 1][:6]), int(shown[marker + 1][:6])
    tail = result[result.index("\n", cut_at(result)) + 1 : result.rindex("[Loom cut")]
    assert content.endswith(tail)
    omitted = len(content) - cut_at(result) - len(tail)
    # Line numbers are 1-based; the numbered lines count from 0.
    assert shown[marker] == f"[… lines {last_in_head + 2:,}–{first_in_tail:,} omitted ({omitted:,} characters) …]"


def test_error_lines_from_the_middle_are_kept_with_their_line_numbers() -> None:
    lines = numbered(20_000)
    errors = {
        3_000: "ERROR: disk full while writing /var/log/app.log",
        5_000: "Traceback (most recent call last):",
        5_003: "ValueError: invalid literal for int() with base 10: 'x'",
        7_000: "E   assert 1 == 2",
        9_000: "src/main.c:12:5: error: expected ';' before '}' token",
        11_000: "Segmentation fault (core dumped)",
        12_000: "bash: /etc/shadow: Permission denied",
        13_000: "panic: runtime error: index out of range [3] with length 3",
        14_000: "FAILED tests/test_x.py::test_y - AssertionError",
        15_000: "fatal: not a git repository (or any of the parent directories): .git",
        16_000: 'Exception in thread "main" java.lang.NullPointerException',
    }
    for index, text in errors.items():
        lines[index] = text
    result = clip_result("\n".join(lines), "toolu_01")
    for index, text in errors.items():
        assert f"line {index + 1:,}: {text}\n" in result
    assert f"{len(errors)} error lines from them kept" in note_of(result)
    # Listed in the order they occur.
    positions = [result.index(f"line {index + 1:,}: ") for index in sorted(errors)]
    assert positions == sorted(positions)


def test_lines_that_only_mention_error_words_are_not_taken_for_errors() -> None:
    lines = numbered(20_000)
    harmless = [
        "using the default configuration",
        "build finished: 0 errors, 0 warnings",
        "no failures",
        "errors: 0",
        "failed=0",
        '{"error": null, "status": "ok"}',
        "on_error handler registered; error_count unchanged",
        "failover node ready",
        "an exceptional result",
    ]
    for offset, text in enumerate(harmless):
        lines[8_000 + offset * 100] = text
    result = clip_result("\n".join(lines), "toolu_01")
    assert "error lines" not in result
    assert "line 8,001" not in result


def test_output_without_error_lines_has_no_error_section() -> None:
    result = clip_result("\n".join(numbered(20_000)), "toolu_01")
    assert "error lines" not in result
    assert "[… end of the omitted part" not in result


def test_an_error_line_in_the_tail_is_shown_there_once() -> None:
    lines = numbered(20_000)
    lines[-3] = "ERROR: shutdown failed"
    result = clip_result("\n".join(lines), "toolu_01")
    assert result.count("ERROR: shutdown failed") == 1
    assert "line 19,998" not in result


def test_error_line_right_after_the_head_is_kept() -> None:
    lines = numbered(5_000)
    first_omitted = clip_result("\n".join(lines), "c")[: cut_at(clip_result("\n".join(lines), "c"))].count("\n")
    lines[first_omitted] = "E   assert response.status == 200"
    result = clip_result("\n".join(lines), "c")
    assert f"line {first_omitted + 1:,}: E   assert response.status == 200\n" in result


def test_a_long_error_line_is_shown_as_a_window_around_the_error() -> None:
    lines = numbered(20_000)
    lines[10_000] = "x" * 2_500 + " Error: the thing broke " + "y" * 2_500
    result = clip_result("\n".join(lines), "toolu_01")
    entry = next(line for line in result.splitlines() if line.startswith("line 10,001: "))
    assert "Error: the thing broke" in entry
    assert len(entry) <= 320
    assert entry.startswith("line 10,001: …") and entry.endswith("…")


def test_many_error_lines_take_a_bounded_share_and_the_rest_are_counted() -> None:
    lines = [f"src/file{i}.c:1:1: error: unknown type name 'foo{i}'" for i in range(20_000)]
    result = clip_result("\n".join(lines), "toolu_01")
    entries = [line for line in result.splitlines() if re.match(r"line [\d,]+: ", line)]
    assert entries
    assert sum(len(entry) + 1 for entry in entries) <= DEFAULT_LIMIT * 0.2
    assert re.search(r"\[… and more than [\d,]+ further error lines not shown …\]", result)
    assert lines[-1] in result


def test_a_few_hundred_error_lines_are_counted_exactly() -> None:
    lines = numbered(20_000)
    for index in range(5_000, 5_250):
        lines[index] = f"ERROR: item {index} rejected"
    result = clip_result("\n".join(lines), "toolu_01")
    shown = len([line for line in result.splitlines() if re.match(r"line [\d,]+: ERROR", line)])
    assert 0 < shown < 250
    assert f"[… and {250 - shown:,} more error lines not shown …]" in result


def test_one_giant_line_is_cut_by_characters() -> None:
    content = '{"items": [' + ", ".join(f'{{"id": {i}, "name": "item{i}"}}' for i in range(100_000)) + "]}"
    result = clip_result(content, "toolu_01", limit=10_000)
    body = result[: result.rindex("\n[Loom cut")]
    assert result.startswith(content[:4_000])
    assert body.endswith(content[-3_000:])
    assert "part of line 1 of 1 omitted" in note_of(result)


def test_crlf_error_lines_are_shown_without_the_carriage_return() -> None:
    lines = numbered(20_000)
    lines[10_000] = "ERROR: cannot open COM1"
    result = clip_result("\r\n".join(lines), "toolu_01")
    assert "line 10,001: ERROR: cannot open COM1\n" in result


def test_unicode_output_keeps_exact_lines_and_line_numbers() -> None:
    lines = [f"{i} Ünïcødé 行 İstanbul ✓ 😀" for i in range(20_000)]
    lines[9_999] = "İ 😀 Fehler: error while reading 行 ✗"
    content = "\n".join(lines)
    result = clip_result(content, "toolu_01")
    assert result.startswith(lines[0] + "\n")
    assert result[: result.rindex("[Loom cut")].endswith(lines[-1] + "\n")
    assert "line 10,000: İ 😀 Fehler: error while reading 行 ✗\n" in result
    offset = cut_at(result)
    assert result[:offset] == content[:offset]


SHAPES = {
    "many short lines": "\n".join(f"{i}" for i in range(200_000)),
    "few huge lines": "\n".join(chr(97 + i) * 60_000 for i in range(5)),
    "one giant line": "0123456789" * 50_000,
    "every line an error": "\n".join(f"Traceback {i}: error failed fatal" for i in range(50_000)),
    "huge error lines": "\n".join(f"ERROR {i} " + "z" * 5_000 for i in range(200)),
    "unicode": "\n".join(f"行 İ 😀 {i} ünï error" if i % 7 == 0 else f"行 {i}" for i in range(100_000)),
    "crlf": "\r\n".join(f"line {i} Exception" for i in range(100_000)),
    "no newline at all but errors": "error " * 100_000,
}


@pytest.mark.parametrize("limit", [1_000, 4_000, DEFAULT_LIMIT])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_result_length_stays_near_the_limit(shape: str, limit: int) -> None:
    content = SHAPES[shape]
    result = clip_result(content, "toolu_01", limit=limit)
    assert len(result) <= limit + 400
    # The budget is used, not thrown away: at least half of it shows the content itself.
    shown = len(result) - len(note_of(result))
    assert shown >= limit // 2
    assert result[:10] == content[:10]
    assert note_of(result)


def test_a_five_megabyte_output_is_clipped() -> None:
    lines = [f"{i:07d} INFO request handled in 3ms path=/api/items status=200" for i in range(85_000)]
    lines[42_000] = "2026-11-29 12:00:00 ERROR database connection lost"
    content = "\n".join(lines)
    assert len(content) > 5_000_000
    result = clip_result(content, "toolu_01")
    assert len(result) <= DEFAULT_LIMIT + 400
    assert "line 42,001: 2026-11-29 12:00:00 ERROR database connection lost\n" in result
    assert result.startswith(lines[0])


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        clip_result("x", "c", limit=-1)
