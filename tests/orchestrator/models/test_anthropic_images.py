"""A tool's image reaches the model: on the real ``anthropic`` SDK as an image block, on OpenAI-compatible chat as a
placeholder; a reopened session sends the same.

Real parts: the content test server over stdio, the checkpoints store on SQLite, the provider clients against the
fake APIs (real uvicorn, the providers' streaming wire formats).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config import ServerConfig
from orchestrator.context.history import rebuild_history
from orchestrator.context.tokens import estimate_message
from orchestrator.messages import Attachment, Message, TextBlock, ToolResultBlock, ToolUseBlock
from orchestrator.models.anthropic import MAX_REQUEST_IMAGES, AnthropicModel, to_wire_messages
from orchestrator.models.base import Model
from orchestrator.models.openai_compat import OpenAICompatModel
from orchestrator.runtime.runtime import Runtime
from orchestrator.store.checkpoints import CheckpointStore
from orchestrator.store.eventlog import EventLog
from tests.orchestrator.hub.content_test_server import CHART, b64
from tests.orchestrator.models.fake_anthropic import FakeAnthropic
from tests.orchestrator.models.fake_common import ToolCall, text_reply, tool_reply
from tests.orchestrator.models.fake_openai import FakeOpenAI

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[3]
SERVER = str(REPO / "tests" / "orchestrator" / "hub" / "content_test_server.py")
CHART_LINE = f"[image 64×48 png, {len(CHART)} B]"


@contextlib.asynccontextmanager
async def runtime(home: Path) -> AsyncIterator[Runtime]:
    server = ServerConfig(
        name="content",
        transport="stdio",
        command=sys.executable,
        args=(SERVER,),
        env={"PYTHONPATH": str(REPO)},
        startup_timeout_s=20,
        call_timeout_s=20,
    )
    async with CheckpointStore(home / "loom.db") as store:
        yield Runtime(EventLog(store), home=home, servers=[server])


def workspace(tmp_path: Path) -> tuple[Path, Path]:
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    return work, home


def tool_result(body: dict[str, Any]) -> dict[str, Any]:
    """The tool_result block that opens the last message of an Anthropic request."""
    block: dict[str, Any] = body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result"
    return block


async def show_chart(work: Path, home: Path, model: Model) -> tuple[str, list[Message]]:
    async with runtime(home) as rt, rt.open_session(work, model) as session:
        result = await session.run("show me last week's chart")
        assert result.status == "completed", result
        return session.id, list(session.history)


async def test_anthropic_receives_the_image_as_an_image_block_and_again_after_a_reopen(
    tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    work, home = workspace(tmp_path)
    model = AnthropicModel("claude-fake", api_key="k", base_url=fake_anthropic.base_url)
    fake_anthropic.script(tool_reply(ToolCall("content__chart", id="toolu_1")), text_reply("a grey square"))
    session_id, held = await show_chart(work, home, model)

    sent = tool_result(fake_anthropic.requests[1].body)
    assert sent["content"] == [
        {"type": "text", "text": f"the chart of last week\n{CHART_LINE}"},
        # The server called it JPEG; the API would reject a PNG sent as one.
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(CHART)}},
    ]

    fake_anthropic.script(text_reply("still grey"))
    async with runtime(home) as rt, rt.open_session(work, model, session_id=session_id) as again:
        assert again.history == held
        assert again.history == rebuild_history(await rt.log.store.read_events(session_id))
        assert again.history == rebuild_history(await rt.log.store.read_context_events(session_id))
        assert (await again.run("and now?")).status == "completed"
    assert tool_result({"messages": fake_anthropic.requests[2].body["messages"][:3]}) == sent


async def test_an_openai_compatible_model_is_told_what_was_left_out(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    work, home = workspace(tmp_path)
    model = OpenAICompatModel("gpt-fake", api_key="k", base_url=fake_openai.base_url)
    fake_openai.script(tool_reply(ToolCall("content__chart", id="call_1")), text_reply("I cannot see it"))
    await show_chart(work, home, model)

    [tool] = [m for m in fake_openai.requests[1].body["messages"] if m["role"] == "tool"]
    assert tool["content"] == (
        f"the chart of last week\n{CHART_LINE}\n"
        f"[image 64×48 png, {len(CHART)} B: left out, tool results reach this model as text only]"
    )
    assert b64(CHART) not in str(fake_openai.requests[1].body)


def image_turn(n: int) -> list[Message]:
    data = b64(CHART)
    image = Attachment(kind="image", mime_type="image/png", size=len(CHART), width=64, height=48, data=data)
    return [
        Message(role="assistant", content=[ToolUseBlock(id=f"t{n}", name="content__chart", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id=f"t{n}", content=CHART_LINE, attachments=[image])]),
    ]


def test_a_long_session_of_images_sends_only_the_newest_within_the_api_s_limits() -> None:
    history = [Message(role="user", content=[TextBlock(text="watch")])]
    for n in range(MAX_REQUEST_IMAGES + 5):
        history.extend(image_turn(n))
    wire = to_wire_messages(history)
    kinds = [
        [part["type"] for part in msg["content"][0]["content"]]  # type: ignore[index]
        for msg in wire
        if msg["role"] == "user" and msg["content"][0]["type"] == "tool_result"  # type: ignore[index]
    ]
    assert kinds == [["text", "text"]] * 5 + [["text", "image"]] * MAX_REQUEST_IMAGES
    oldest = wire[2]["content"][0]["content"][1]  # type: ignore[index]
    assert "shown earlier, left out of this request" in oldest["text"]  # type: ignore[index]


def test_each_image_follows_the_line_that_names_it() -> None:
    def image(side: int) -> Attachment:
        return Attachment(kind="image", mime_type="image/png", size=99, width=side, height=side, data=f"DATA{side}")

    text = "page one\n[image 10×10 png, 99 B]\npage two\n[image 20×20 png, 99 B]\nend"
    result = ToolResultBlock(tool_use_id="t", content=text, attachments=[image(10), image(20), image(30)])
    [wire] = to_wire_messages([Message(role="user", content=[result])])
    parts = wire["content"][0]["content"]  # type: ignore[index]
    assert [p.get("text") or p["source"]["data"] for p in parts] == [  # type: ignore[union-attr,index]
        "page one\n[image 10×10 png, 99 B]",
        "DATA10",
        "\npage two\n[image 20×20 png, 99 B]",
        "DATA20",
        "\nend",
        "DATA30",  # its line was cut from the text: after all of it
    ]


def test_an_image_counts_by_its_pixels_not_its_base64() -> None:
    shown = image_turn(0)[1]
    block = shown.content[0]
    assert isinstance(block, ToolResultBlock)
    bare = Message(role="user", content=[block.model_copy(update={"attachments": []})])
    assert estimate_message(shown) - estimate_message(bare) == 5  # 64 × 48 / 750, rounded up
    big = Attachment(kind="image", mime_type="image/png", size=3_900_000, width=4000, height=3000, data="A" * 5_200_000)
    huge = Message(role="user", content=[ToolResultBlock(tool_use_id="t", content="", attachments=[big])])
    assert estimate_message(huge) < 1700  # a provider scales it down; its data as text would be 1.3 million
