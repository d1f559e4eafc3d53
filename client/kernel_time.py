"""The kernel's receive timestamp of a socket read, on the monotonic clock.

A reader busy elsewhere times bytes by when they arrived, not by when it got
round to reading them: with ``SO_TIMESTAMPNS`` set, each ``recvmsg`` carries
the kernel's receive instant on CLOCK_REALTIME, converted here to
``time.perf_counter_ns()`` (CLOCK_MONOTONIC on Linux, shared by every process
of the machine). The streaming client and the exact-schedule server both time
arrivals this way, so their instants compare.
"""

from __future__ import annotations

import socket
import struct
import sys
import time

__all__ = ["ANCILLARY_SIZE", "AVAILABLE", "arrival_ns", "enable", "realtime_offset_ns"]

# Python does not export SO_TIMESTAMPNS; 35 is its value on Linux (asm-generic).
_SO_TIMESTAMPNS: int | None = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None
)
_TIMESPEC = struct.Struct("@qq")
# A kernel instant further back than this is a clock step, not an arrival.
_PLAUSIBLE_NS = 10_000_000_000

AVAILABLE = _SO_TIMESTAMPNS is not None
ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)


def enable(sock: socket.socket) -> None:
    """Ask the kernel to timestamp every read of ``sock`` (Linux only: see AVAILABLE)."""
    if _SO_TIMESTAMPNS is None:
        raise OSError(f"kernel receive timestamps are not available on {sys.platform}")
    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME minus the monotonic perf_counter clock, read back to back."""
    before = time.perf_counter_ns()
    real = time.time_ns()
    after = time.perf_counter_ns()
    return real - (before + after) // 2


def arrival_ns(ancillary: list[tuple[int, int, bytes]], offset_ns: int, now_ns: int) -> int:
    """When the kernel received a ``recvmsg``'s bytes, on the monotonic clock
    (``offset_ns`` from :func:`realtime_offset_ns`); ``now_ns`` when the read
    carried no timestamp or the converted one is not in the 10 s before now."""
    if ancillary:
        seconds, nanos = _TIMESPEC.unpack_from(ancillary[0][2])
        at: int = seconds * 1_000_000_000 + nanos - offset_ns
        if now_ns - _PLAUSIBLE_NS < at <= now_ns:
            return at
    return now_ns
