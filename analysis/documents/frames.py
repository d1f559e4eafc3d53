"""Length-prefixed, checksummed frames: the framing of an append-only file.

A frame is ``length (4 bytes) | crc32 (4 bytes) | kind (1 byte) | body``, the
length and the CRC covering kind and body, both big-endian. A process killed
in the middle of a write (SIGKILL, out of memory) leaves at most its last
frame torn: the reader sees a length running past the end of the file or a CRC
that does not match, stops there and keeps every frame before it. A frame is
never half read as another: a torn or corrupt one ends the readable part.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

_HEAD = struct.Struct(">II")
# A frame longer than this is a length field read from garbage, not a frame:
# the largest a writer makes (every histogram of a run changed at once) is far
# below it.
MAX_FRAME_BYTES = 1 << 30


def frame(kind: bytes, body: bytes) -> bytes:
    """One frame of ``kind`` (a single byte) holding ``body``."""
    if len(kind) != 1:
        raise ValueError(f"a frame kind is one byte, not {kind!r}")
    payload = kind + body
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


@dataclass(frozen=True, slots=True)
class Frames:
    """The whole frames read from a file, and why reading stopped before its end
    (None when every byte was a whole frame)."""

    frames: list[tuple[bytes, bytes]]
    stopped: str | None


def read_frames(data: bytes) -> Frames:
    """Every whole frame of ``data`` as ``(kind, body)``, in order, up to the
    first torn or corrupt one."""
    frames: list[tuple[bytes, bytes]] = []
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        problem = _problem(data, offset)
        if problem is not None:
            return Frames(frames, f"at byte {offset}: {problem}")
        length = _HEAD.unpack_from(data, offset)[0]
        start = offset + _HEAD.size
        frames.append((bytes(view[start : start + 1]), bytes(view[start + 1 : start + length])))
        offset = start + length
    return Frames(frames, None)


def _problem(data: bytes, offset: int) -> str | None:
    """Why the frame at ``offset`` is not whole and sound; None when it is."""
    if len(data) - offset < _HEAD.size:
        return "a torn frame header"
    length, crc = _HEAD.unpack_from(data, offset)
    start = offset + _HEAD.size
    if length < 1 or length > MAX_FRAME_BYTES:
        return f"a frame length of {length} bytes"
    if start + length > len(data):
        return "a torn frame (the file ends inside it)"
    if zlib.crc32(memoryview(data)[start : start + length]) != crc:
        return "a frame whose checksum does not match"
    return None
