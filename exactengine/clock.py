"""Nanosecond timing for the server: a timerfd to wake at an exact instant, and
the kernel's receive timestamp of a read, on the monotonic clock.

``time.perf_counter_ns()`` is CLOCK_MONOTONIC on Linux, shared by every process
of the machine, so the instants this server logs compare with a client's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import struct
import time

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1
# Python does not export SO_TIMESTAMPNS; 35 is its value on Linux (asm-generic).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ANCILLARY_SIZE = socket.CMSG_SPACE(16)
_TIMESPEC = struct.Struct("@qq")


class _Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


class _Itimerspec(ctypes.Structure):
    _fields_ = (("it_interval", _Timespec), ("it_value", _Timespec))


class TimerFd:
    """A CLOCK_MONOTONIC timerfd, readable from an absolute nanosecond instant on.

    ``epoll``'s own timeout has millisecond resolution (rounded up), so timers
    built on it fire up to 1 ms late; a timerfd wakes within the scheduler's
    latency."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self._libc.timerfd_create(_CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self._spec = _Itimerspec()

    def arm(self, at_ns: int) -> None:
        value = self._spec.it_value
        value.tv_sec, value.tv_nsec = divmod(max(at_ns, 1), 1_000_000_000)  # 0 would disarm
        if self._libc.timerfd_settime(self.fd, _TFD_TIMER_ABSTIME, ctypes.byref(self._spec), None):
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def clear(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            return

    def close(self) -> None:
        os.close(self.fd)


def realtime_offset_ns() -> int:
    """CLOCK_REALTIME minus the monotonic clock, read back to back."""
    before = time.perf_counter_ns()
    real = time.time_ns()
    after = time.perf_counter_ns()
    return real - (before + after) // 2


def arrival_ns(ancillary: list[tuple[int, int, bytes]], now_ns: int) -> int:
    """When the kernel received the bytes of a ``recvmsg`` (monotonic clock);
    ``now_ns`` when it did not say or the clocks disagree."""
    if ancillary:
        seconds, nanos = _TIMESPEC.unpack_from(ancillary[0][2])
        at = seconds * 1_000_000_000 + nanos - realtime_offset_ns()
        if now_ns - 10_000_000_000 < at <= now_ns:
            return at
    return now_ns
