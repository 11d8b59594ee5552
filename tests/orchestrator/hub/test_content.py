"""What the model is given of each kind of content a real server returns over stdio."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from orchestrator.config import ServerConfig
from orchestrator.hub.pool import Hub
from tests.orchestrator.hub.content_test_server import CHART, b64, png

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
SERVER = str(Path(__file__).with_name("content_test_server.py"))


def content_server() -> ServerConfig:
    return ServerConfig(
        name="content",
        transport="stdio",
        command=sys.executable,
        args=(SERVER,),
        env={"PYTHONPATH": str(REPO)},
        startup_timeout_s=20,
        call_timeout_s=20,
    )


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    async with Hub({}, [content_server()], log_dir=tmp_path) as hub:
        yield hub


async def test_an_image_is_kept_with_its_real_type_unless_too_big_or_not_an_image(hub: Hub) -> None:
    chart = await hub.call("content__chart", {})
    [image] = chart.attachments
    # The server said JPEG; the bytes are PNG, and an API rejects an image whose stated type is wrong.
    assert (image.kind, image.mime_type, image.width, image.height) == ("image", "image/png", 64, 48)
    assert image.data == b64(CHART) and image.size == len(CHART)
    assert chart.content == f"the chart of last week\n[image 64×48 png, {len(CHART)} B]"

    huge = await hub.call("content__huge_image", {})
    [image] = huge.attachments
    assert image.data == "" and (image.width, image.height) == (640, 480)
    assert huge.content == "[image 640×480 png, 4.0 MB: left out, over the 5.0 MB a model is shown per image]"

    # A server's bad image would otherwise sit in the history and fail every later model call.
    fake = await hub.call("content__not_an_image", {})
    assert [a.data for a in fake.attachments] == [""]
    assert "left out, its data is not a PNG, JPEG, GIF, WebP image (the server said image/png)" in fake.content


async def test_audio_is_described_and_a_resource_link_keeps_all_its_metadata(hub: Hub) -> None:
    outcome = await hub.call("content__sound", {})
    [sound] = outcome.attachments
    assert (sound.kind, sound.mime_type, sound.data) == ("audio", "audio/wav", "")
    assert outcome.content == "[audio wav, 2 KB: not shown, no model here takes audio]"

    outcome = await hub.call("content__link", {})
    assert outcome.content.startswith("[resource link {") and outcome.attachments == ()
    assert json.loads(outcome.content.removeprefix("[resource link ").removesuffix("]")) == {
        "uri": "file:///reports/q3.pdf",
        "name": "q3.pdf",
        "title": "Q3 report",
        "description": "Revenue by region, third quarter",
        "mimeType": "application/pdf",
        "size": 48213,
    }


async def test_embedded_resources_text_inline_an_image_kept_other_binaries_described(hub: Hub) -> None:
    outcome = await hub.call("content__embedded", {})
    logo = png(16, 16)
    assert outcome.content.splitlines() == [
        "[resource file:///notes.md (text/markdown)]",
        "# Notes",
        "ship it",
        f"[resource file:///logo.png: image 16×16 png, {len(logo)} B]",
        "[resource file:///a.pdf: application/pdf, 1 KB: binary, not shown]",
    ]
    image, pdf = outcome.attachments
    assert (image.uri, image.data, pdf.kind, pdf.data) == ("file:///logo.png", b64(logo), "blob", "")


async def test_structured_content_follows_a_text_that_does_not_carry_it_and_is_not_repeated(hub: Hub) -> None:
    outcome = await hub.call("content__search", {})
    text, marker, dumped = outcome.content.split("\n")
    assert (text, marker) == ("found 2 results", "[structured content]")
    assert json.loads(dumped) == {"results": [{"id": 7, "title": "alpha"}, {"id": 9, "title": "beta"}]}

    outcome = await hub.call("content__point", {})  # the SDK's text block is the same JSON
    assert json.loads(outcome.content) == {"x": 1, "y": 2} and "[structured content]" not in outcome.content

    outcome = await hub.call("content__tags", {})
    assert outcome.content == "red\ngreen" and outcome.structured == {"result": ["red", "green"]}


async def test_loom_s_own_servers_rendered_text_is_what_the_model_reads() -> None:
    """An in-process server's text is its rendering of the structured result for the model: not doubled."""
    own = MCPServer("own", log_level="WARNING")

    @own.tool()
    def read() -> CallToolResult:
        """A rendering and the data it renders."""
        return CallToolResult(
            content=[TextContent(type="text", text="1 | hello")], structured_content={"lines": ["hello"]}
        )

    async with Hub({"own": own}) as hub:
        outcome = await hub.call("own__read", {})
    assert outcome.content == "1 | hello" and outcome.structured == {"lines": ["hello"]}
