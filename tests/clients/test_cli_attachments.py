"""A tool call's line in the terminal says what its result held besides text: an image's size, a sound."""

from __future__ import annotations

import io

from clients.cli.render import TerminalRenderer
from orchestrator.events import ToolCallFinished
from orchestrator.messages import Attachment


def test_a_result_s_images_and_sounds_are_named_on_its_line() -> None:
    image = Attachment(kind="image", mime_type="image/png", size=12_300, width=640, height=480, data="iVBORw0K")
    sound = Attachment(kind="audio", mime_type="audio/wav", size=48_000)
    event = ToolCallFinished(
        session_id="s", run_id="r", step=1, call_id="c", tool="shots__take", is_error=False,
        content="the page\n[image 640×480 png, 12 KB]\n[audio wav, 47 KB: not shown]", duration_ms=12.0,
        attachments=[image, sound],
    )  # fmt: skip
    out = io.StringIO()
    TerminalRenderer(out=out, err=io.StringIO())(event)
    assert out.getvalue() == "  ✓ shots__take (12 ms) [image 640×480 png, 12 KB] [audio wav, 47 KB]\n"
