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
from collections.abc import Iterator
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
    for offset, found in _scan(data):
        if isinstance(found, str):
            return Frames(frames, f"at byte {offset}: {found}")
        frames.append(found)
    return Frames(frames, None)


def _scan(data: bytes) -> Iterator[tuple[int, tuple[bytes, bytes] | str]]:
    offset = 0
    view = memoryview(data)
    while offset < len(data):
        if len(data) - offset < _HEAD.size:
            yield offset, "a torn frame header"
            return
        length, crc = _HEAD.unpack_from(data, offset)
        start = offset + _HEAD.size
        if length < 1 or length > MAX_FRAME_BYTES:
            yield offset, f"a frame length of {length} bytes"
            return
        if start + length > len(data):
            yield offset, "a torn frame (the file ends inside it)"
            return
        payload = view[start : start + length]
        if zlib.crc32(payload) != crc:
            yield offset, "a frame whose checksum does not match"
            return
        yield offset, (bytes(payload[:1]), bytes(payload[1:]))
        offset = start + length
