"""Nanosecond timing for the server: a timerfd to wake at an exact instant (the
kernel's receive timestamp of a read is :mod:`slogate.client.kernel_time`'s).

``time.perf_counter_ns()`` is CLOCK_MONOTONIC on Linux, shared by every process
of the machine, so the instants this server logs compare with a client's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_CLOCK_MONOTONIC = 1
_TFD_TIMER_ABSTIME = 1


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
