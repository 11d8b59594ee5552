"""docs/protocol.md is generated from the event union and the real MCP face, and must not drift from them."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from orchestrator.event_base import _EventBase
from orchestrator.face import protocol_doc
from orchestrator.face.protocol_doc import DOC_PATH, EVENT_TYPES, main, read_face, render

STALE = "docs/protocol.md is out of date; run python -m orchestrator.face.protocol_doc"


class _EventForTheTest(_EventBase):
    """An event that only this test declares."""

    type: Literal["for_the_test"] = "for_the_test"
    depth: int = 3
    """How deep the test goes."""


@pytest.mark.anyio
async def test_the_committed_doc_matches_the_models_and_the_face() -> None:
    text = render(await read_face())
    assert DOC_PATH.read_text(encoding="utf-8") == text, STALE


@pytest.mark.anyio
async def test_every_event_type_and_every_tool_is_in_the_doc() -> None:
    face = await read_face()
    doc = DOC_PATH.read_text(encoding="utf-8")
    types = [str(e.model_fields["type"].default) for e in EVENT_TYPES]
    assert len(types) >= 20 and "text_delta" in types
    missing_events = [t for t in types if f"#### `{t}`" not in doc]
    missing_tools = [t.name for t in face.tools if f"#### `{t.name}`" not in doc]
    assert missing_events == [] and missing_tools == []
    assert {"read_events", "create_session", "send_message"} <= {t.name for t in face.tools}


@pytest.mark.anyio
async def test_the_generator_notices_a_changed_event_list() -> None:
    face = await read_face()
    committed = DOC_PATH.read_text(encoding="utf-8")
    dropped = render(face, EVENT_TYPES[:-1])
    added = render(face, [*EVENT_TYPES, _EventForTheTest])
    assert dropped != committed and added != committed
    last = str(EVENT_TYPES[-1].model_fields["type"].default)
    assert f"#### `{last}`" in committed and f"#### `{last}`" not in dropped
    extra = added[added.index("#### `for_the_test`") :]
    assert "An event that only this test declares." in extra
    assert "| `depth` | `integer` | default `3` | How deep the test goes. |" in extra
    assert "### Other" in added and "### Other" not in committed


@pytest.mark.anyio
async def test_the_doc_is_deterministic_and_names_no_local_path() -> None:
    first = render(await read_face())
    second = render(await read_face())
    assert first == second
    for local in (str(Path.home()), str(DOC_PATH.parents[1]), "/tmp/", "loom-protocol-"):
        assert local not in first


def test_check_exits_1_with_one_line_when_the_file_is_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "protocol.md"
    assert main(["--check"], path=path) == 1
    path.write_text("# old\n", encoding="utf-8")
    assert main(["--check"], path=path) == 1
    assert capsys.readouterr().err.splitlines() == [STALE, STALE]
    assert main([], path=path) == 0
    assert main(["--check"], path=path) == 0
    assert capsys.readouterr().err == ""
    assert path.read_text(encoding="utf-8") == protocol_doc.generate()
