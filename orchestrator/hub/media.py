"""The parts of a tool result that are not text: images checked and bounded, audio and binaries described.

A server's image goes into the session's history and is sent again with every later request, so what is kept
must be something every provider that takes images accepts, or one bad image would fail each call that follows.
So an image is kept only when its bytes are one of the four formats vision APIs take (PNG, JPEG, GIF, WebP; the
type is read from the bytes' signature, not the server's claim, because a mismatch is rejected by the API), its
base64 is within :data:`MAX_IMAGE_B64` (Anthropic's 5 MB per image), its sides within :data:`MAX_IMAGE_SIDE`,
and the result holds no more than :data:`MAX_IMAGES` such images in :data:`MAX_RESULT_B64`. Anything else is
left out, and the result's text says what it was and why. Audio and other binary data are never kept: no
provider Loom speaks takes them in a tool result, so the text says what they were.
"""

from __future__ import annotations

import binascii
import struct

from orchestrator.messages import Attachment, size_text

MAX_IMAGE_B64 = 5 * 1024 * 1024
"""Most base64 characters of one image (Anthropic's limit of 5 MB per image is on the encoded data)."""
MAX_IMAGE_SIDE = 8000
"""Most pixels on either side (Anthropic rejects larger images)."""
MAX_IMAGES = 20
"""Most images kept from one result (past 20 images in a request Anthropic limits each to 2000 px)."""
MAX_RESULT_B64 = 20 * 1024 * 1024
"""Most base64 characters of the images kept from one result (a request may carry 32 MB in all)."""
_SNIFF_B64 = 256 * 1024
"""Base64 characters decoded to find an image's size when the whole is not needed (JPEG headers may follow EXIF)."""

_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}


class MediaReader:
    """Turns the non-text blocks of one result into attachments and the lines that stand for them in its text."""

    def __init__(self) -> None:
        self._images = 0
        self._b64 = 0

    def image(self, data: str, claimed: str, uri: str = "") -> tuple[Attachment, str]:
        """An image block (or an embedded image resource): kept if a model can be shown it, else described."""
        data = _unwrapped(data)
        size = _decoded_size(data)
        head = _decode(data[:_SNIFF_B64] if len(data) > _SNIFF_B64 else data, partial=len(data) > _SNIFF_B64)
        found = sniff(head) if head is not None else None
        mime = found[0] if found else claimed or "application/octet-stream"
        width, height = found[1] if found else (None, None)
        bare = Attachment(kind="image", mime_type=mime, size=size, width=width, height=height, uri=uri)
        if head is None:
            return bare, _line(bare, "left out, its base64 data is corrupt")
        if found is None:
            kinds = ", ".join(_NAMES.values())
            return bare, _line(bare, f"left out, its data is not a {kinds} image (the server said {claimed or '?'})")
        if len(data) > MAX_IMAGE_B64:
            return bare, _line(bare, f"left out, over the {size_text(MAX_IMAGE_B64)} a model is shown per image")
        if width is not None and height is not None and max(width, height) > MAX_IMAGE_SIDE:
            return bare, _line(bare, f"left out, over the {MAX_IMAGE_SIDE} px a side a model is shown")
        if self._images >= MAX_IMAGES or self._b64 + len(data) > MAX_RESULT_B64:
            return bare, _line(
                bare, f"left out, past the {MAX_IMAGES} images or {size_text(MAX_RESULT_B64)} kept of one result"
            )
        if len(data) > _SNIFF_B64 and _decode(data, partial=False) is None:
            return bare, _line(bare, "left out, its base64 data is corrupt")
        self._images += 1
        self._b64 += len(data)
        return bare.model_copy(update={"data": data}), _line(bare, "")

    def audio(self, data: str, mime: str) -> tuple[Attachment, str]:
        """An audio block: described, never kept (no provider here takes audio in a tool result)."""
        part = Attachment(kind="audio", mime_type=mime or "audio/unknown", size=_decoded_size(_unwrapped(data)))
        return part, _line(part, "not shown, no model here takes audio")

    def blob(self, data: str, mime: str | None, uri: str) -> tuple[Attachment, str]:
        """An embedded binary resource: an image if it is one, otherwise described."""
        if (mime or "").startswith("image/"):
            return self.image(data, mime or "", uri)
        if mime and mime.startswith("audio/"):
            part = Attachment(kind="audio", mime_type=mime, size=_decoded_size(_unwrapped(data)), uri=uri)
            return part, _line(part, "not shown, no model here takes audio")
        size = _decoded_size(_unwrapped(data))
        part = Attachment(kind="blob", mime_type=mime or "application/octet-stream", size=size, uri=uri)
        return part, _line(part, "binary, not shown")


def _line(part: Attachment, note: str) -> str:
    return f"[{part.label}{': ' + note if note else ''}]"


def _unwrapped(data: str) -> str:
    # Wrapped base64 is still base64; the API takes it unwrapped. Checking first spares copying megabytes.
    return "".join(data.split()) if any(c in data for c in " \n\r\t") else data


def _decoded_size(data: str) -> int:
    return max(0, len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))))


def _decode(data: str, *, partial: bool) -> bytes | None:
    if partial:
        data = data[: len(data) - len(data) % 4]
    try:
        return binascii.a2b_base64(data, strict_mode=True)  # about 40 ms for 5 MB on a loaded machine
    except (binascii.Error, ValueError):
        return None


def sniff(head: bytes) -> tuple[str, tuple[int | None, int | None]] | None:
    """The image type an image's first bytes show, with its width and height where the header gives them."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return "image/png", (width, height)
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return "image/gif", (width, height)
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg", _jpeg_size(head)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp", _webp_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int | None, int | None]:
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            return None, None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]
    return None, None


def _webp_size(data: bytes) -> tuple[int | None, int | None]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None, None
