"""Keep-alive connections for the streaming client, read with arrival instants.

A read returns whatever bytes have arrived, and ``at``: when they arrived. On
Linux over plain TCP that is the kernel's receive timestamp of the data
(``SO_TIMESTAMPNS``, realtime clock, converted to the monotonic
``perf_counter_ns`` clock), so a client busy with other streams still times an
event by its arrival, not by when it got round to reading it; elsewhere, and
over TLS, the instant the read returned.

Two ways to read. ``read`` waits in the calling greenlet (the headers, TLS,
the end of a body): every read waits on the connection's own io watcher first
(no EAGAIN round trip; a socket with bytes ready returns at once, after one
pass of the event loop), and the wait arms no timer. ``follow`` reads an event
stream from the event loop's own callback, so an event costs no greenlet
switch: at one event per read the two switches of a read in the user's
greenlet, and the cache misses of hopping between hundreds of greenlet stacks,
were most of the client's CPU per event (docs/benchmarks-history.md, "Hot path"). Deadlines
are enforced by one watchdog greenlet per pool that wakes every
``WATCHDOG_S`` and throws ``TimeoutError`` into reads and followings past
theirs, so a timeout fires up to that much late.
"""

from __future__ import annotations

import select
import socket
import ssl as ssl_module
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.lock
import gevent.socket
from gevent.hub import Waiter
from gevent.monkey import get_original

from slogate.client import kernel_time

__all__ = ["READ_SIZE", "ConnectError", "Connection", "Pool"]

READ_SIZE = 65536
WATCHDOG_S = 0.05
_NEVER = 1 << 62
# The kernel's poll, not gevent's: gevent's cooperative poll yields to the
# loop even with a zero timeout, so checking an idle connection cost a whole
# turn of the loop (0.1 to 0.8 ms), and a burst's sends each paid it in turn.
# A zero timeout never blocks, so the kernel's is safe under gevent.
_POLL = get_original("select", "poll")
# what getaddrinfo gives to open a socket: family, type, protocol, address
Address = tuple[socket.AddressFamily, socket.SocketKind, int, Any]


class ConnectError(Exception):
    """No connection: ``timed_out`` tells a timeout from a refusal or other failure."""

    def __init__(self, message: str, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Connection:
    """One connection. ``read`` leaves the arrival instant of its bytes in ``at``."""

    __slots__ = (
        "_following",
        "_full",
        "_offset",
        "_recv",
        "_recvmsg",
        "at",
        "deadline",
        "kernel_timestamps",
        "sock",
        "tls",
        "watcher",
    )

    def __init__(self, sock: gevent.socket.socket, tls: bool, kernel_timestamps: bool) -> None:
        self.sock = sock
        self.tls = tls
        self.kernel_timestamps = kernel_timestamps and not tls
        self.watcher = gevent.get_hub().loop.io(sock.fileno(), 1)
        self.deadline = _NEVER
        self.at = 0
        self._full = False
        self._offset = 0
        self._following: tuple[Callable[[], int], Waiter] | None = None
        raw = getattr(sock, "_sock", sock)  # gevent's wrapper only adds a wait we never need
        self._recv = raw.recv
        self._recvmsg = raw.recvmsg

    def send(self, data: bytes, deadline_ns: int) -> None:
        """Send all of ``data`` by ``deadline_ns`` (TimeoutError past it)."""
        remaining = deadline_ns - time.perf_counter_ns()
        if remaining <= 0:
            raise TimeoutError("deadline passed before sending")
        self.sock.settimeout(remaining / 1e9)
        self.sock.sendall(data)
        if not self.tls:
            self.sock.settimeout(0.0)  # plain reads wait on the watcher, never in the socket
        self._full = False
        self._offset = kernel_time.realtime_offset_ns() if self.kernel_timestamps else 0

    def read(self, deadline_ns: int) -> bytes:
        """The bytes that have arrived, waiting for some until ``deadline_ns``
        (TimeoutError past it); ``b""`` once the server closed.

        Every read checks the deadline and passes through the event loop, also
        when the last one filled the buffer: a server that always has bytes ready
        (a flood of keep-alives, one endless line) must not keep this greenlet
        reading while timers, timeouts, signals and every other user wait."""
        if self.tls:
            return self._read_tls(deadline_ns)
        while True:
            if deadline_ns <= time.perf_counter_ns():
                raise TimeoutError("deadline passed")
            self.deadline = deadline_ns
            gevent.socket.wait(self.watcher)
            try:
                return self.receive()
            except BlockingIOError:
                continue

    def receive(self) -> bytes:
        """The bytes that have arrived on a plain connection, without waiting
        (BlockingIOError when there are none), their arrival instant in ``at``."""
        data: bytes
        if self.kernel_timestamps:
            data, ancillary, _, _ = self._recvmsg(READ_SIZE, kernel_time.ANCILLARY_SIZE)
        else:
            data, ancillary = self._recv(READ_SIZE), None
        now = time.perf_counter_ns()
        self.at = kernel_time.arrival_ns(ancillary, self._offset, now) if ancillary else now
        return data

    def follow(self, take: Callable[[bytes], bool], deadline: Callable[[], int]) -> None:
        """Read a plain connection from the event loop itself until ``take``, given
        each read's bytes (``b""``: the server closed), says the stream is over;
        raise here what reading or ``take`` raised, or TimeoutError once
        ``deadline()`` (checked by the pool's watchdog) has passed.

        The calling greenlet sleeps meanwhile: each arrival is read and taken in
        the loop's own callback, once per pass of the loop (bounded work: the
        other users, timers and signals run between passes), without the two
        greenlet switches a read in the caller costs. ``take`` must not wait."""
        waiter = Waiter()
        self._following = (deadline, waiter)
        self.watcher.start(self._arrived, take, waiter)
        try:
            error = waiter.get()
        finally:
            self.watcher.stop()
            self._following = None
        if error is not None:
            raise error

    def _arrived(self, take: Callable[[bytes], bool], waiter: Waiter) -> None:
        """The loop's callback while following: one read, one take."""
        try:
            over = take(self.receive())
        except BlockingIOError:
            return
        except Exception as exc:  # whatever it is, the following greenlet raises it
            self._stop_following(waiter, exc)
            return
        if over:
            self._stop_following(waiter, None)

    def _stop_following(self, waiter: Waiter, error: Exception | None) -> None:
        """Wake the following greenlet (from the hub, at once) with ``error`` or None."""
        self.watcher.stop()
        self._following = None
        waiter.switch(error)

    def expire(self, now_ns: int) -> None:
        """The pool watchdog's check: a read or a following past its deadline ends
        in TimeoutError."""
        following = self._following
        if following is not None:
            deadline, waiter = following
            if deadline() <= now_ns:
                self.watcher.stop()
                self._following = None
                gevent.get_hub().loop.run_callback(waiter.switch, TimeoutError("deadline passed"))
        elif self.deadline <= now_ns and self.watcher.callback is not None:
            self.deadline = _NEVER
            gevent.socket.cancel_wait(self.watcher, TimeoutError("deadline passed"))

    def _read_tls(self, deadline_ns: int) -> bytes:
        if self._full:
            gevent.sleep(0)  # bytes are waiting; let the rest of the loop run first
        remaining = deadline_ns - time.perf_counter_ns()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        self.sock.settimeout(remaining / 1e9)
        data: bytes = self.sock.recv(READ_SIZE)
        self.at = time.perf_counter_ns()
        self._full = len(data) == READ_SIZE
        return data

    def idle_and_open(self) -> bool:
        """An idle keep-alive connection is not readable; readable means the server
        closed it (or sent junk)."""
        poller = _POLL()  # select() cannot watch descriptors past 1023
        try:
            poller.register(self.sock.fileno(), select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        self.watcher.close()
        self.sock.close()


class Pool:
    """Keep-alive connections to one host, at most ``size`` in use at once
    (``slots``, held by the caller for the whole request)."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: ssl_module.SSLContext | None,
        size: int,
        connect_s: float,
        kernel_timestamps: bool,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.connect_s = connect_s
        self.kernel_timestamps = kernel_timestamps and kernel_time.AVAILABLE and tls is None
        self.size = size
        self.slots = gevent.lock.BoundedSemaphore(size)
        self._idle: list[Connection] = []
        self._busy: set[Connection] = set()
        self._address: Address | None = None
        self._watchdog: gevent.Greenlet | None = None

    def resolve(self) -> Address:
        """Look the host up once; a lookup is no part of the server's latency."""
        if self._address is not None:
            return self._address
        try:
            infos = gevent.socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectError(f"cannot resolve {self.host}: {exc}", timed_out=False) from exc
        family, kind, proto, _, address = infos[0]
        self._address = (family, kind, proto, address)
        return self._address

    def idle(self) -> Connection | None:
        """A live idle connection, if there is one, now marked busy."""
        while self._idle:
            conn = self._idle.pop()
            if conn.idle_and_open():
                self._mark_busy(conn)
                return conn
            conn.close()
        return None

    def connect(self) -> Connection:
        """A new connection, marked busy (ConnectError when there is none)."""
        conn = self._open()
        self._mark_busy(conn)
        return conn

    def open_ahead(self, wanted: int) -> None:
        """Open connections until ``wanted`` are idle, within the pool's size, so
        the requests about to be sent find one waiting: a connect at a
        request's instant makes it late, and a burst of them makes the whole
        burst late. A failure opens no more; each request then meets it itself."""
        try:
            self.resolve()
            while len(self._idle) < wanted and len(self._idle) + len(self._busy) < self.size:
                self._idle.append(self._open())
        except ConnectError:
            return

    def _open(self) -> Connection:
        family, kind, proto, address = self.resolve()
        sock = gevent.socket.socket(family, kind, proto)
        where = f"{self.host}:{self.port}"
        try:
            sock.settimeout(self.connect_s)
            sock.connect(address)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.kernel_timestamps:
                kernel_time.enable(sock)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except TimeoutError as exc:
            sock.close()
            raise ConnectError(
                f"no connection to {where} within {self.connect_s:g} s", True
            ) from exc
        except OSError as exc:
            sock.close()
            raise ConnectError(f"{where}: {exc}", timed_out=False) from exc
        return Connection(sock, self.tls is not None, self.kernel_timestamps)

    def give_back(self, conn: Connection, reusable: bool) -> None:
        self._busy.discard(conn)
        conn.deadline = _NEVER
        if reusable:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
        if self._watchdog is not None:
            self._watchdog.kill(block=False)
            self._watchdog = None

    def _mark_busy(self, conn: Connection) -> None:
        self._busy.add(conn)
        if self._watchdog is None:
            self._watchdog = gevent.spawn(self._watch)

    def _watch(self) -> None:
        """Throw TimeoutError into every read waiting past its deadline; ends when
        no connection is busy (the next busy one starts it again)."""
        try:
            while self._busy:
                gevent.sleep(WATCHDOG_S)
                now = time.perf_counter_ns()
                for conn in list(self._busy):
                    conn.expire(now)
        finally:
            self._watchdog = None
