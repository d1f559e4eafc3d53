"""The kernel receive-timestamp conversion the client and the exact server share."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from slogate.client import kernel_time

SECOND = 1_000_000_000


def ancillary(seconds: int, nanos: int) -> list[tuple[int, int, bytes]]:
    return [(socket.SOL_SOCKET, 35, struct.pack("@qq", seconds, nanos))]


def test_a_realtime_stamp_becomes_a_monotonic_instant() -> None:
    # realtime 1_700_000_000.250000000 s, realtime runs 1_699_999_000 s ahead of monotonic:
    # the bytes arrived at monotonic 1000.25 s, 0.75 s before now (1001 s)
    offset = 1_699_999_000 * SECOND
    at = kernel_time.arrival_ns(ancillary(1_700_000_000, 250_000_000), offset, 1001 * SECOND)
    assert at == 1000 * SECOND + 250_000_000


@pytest.mark.parametrize(
    ("seconds", "why"),
    [(1_700_000_002, "after now: the clock stepped"), (1_699_999_990, "10 s before now or more")],
)
def test_an_implausible_stamp_falls_back_to_now(seconds: int, why: str) -> None:
    offset = 1_699_999_000 * SECOND
    assert kernel_time.arrival_ns(ancillary(seconds, 0), offset, 1001 * SECOND) == 1001 * SECOND


def test_a_read_without_a_stamp_is_timed_now() -> None:
    assert kernel_time.arrival_ns([], 12345, 777) == 777


def stamped_read(peer: socket.socket, client: socket.socket) -> tuple[int, int, int]:
    """(sent, arrival, read) instants of one byte read 200 ms after it was sent.

    The kernel turns stamping on for the whole machine from a work queue a
    moment after the first socket asks (net_enable_timestamp), so bytes sent
    right after the first ``enable`` may arrive unstamped: send again then."""
    for _ in range(20):
        sent = time.perf_counter_ns()
        client.sendall(b"x")
        time.sleep(0.2)
        data, anc, _, _ = peer.recvmsg(64, kernel_time.ANCILLARY_SIZE)
        now = time.perf_counter_ns()
        assert data == b"x"
        if anc:
            return sent, kernel_time.arrival_ns(anc, kernel_time.realtime_offset_ns(), now), now
    raise AssertionError("the kernel attached no timestamp to 20 reads in 4 s")


@pytest.mark.skipif(not kernel_time.AVAILABLE, reason="kernel receive timestamps are Linux's")
def test_bytes_read_late_are_timed_by_their_arrival_on_a_real_socket() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        with client, peer:
            kernel_time.enable(peer)
            sent, at, now = stamped_read(peer, client)
    # arrived within 50 ms of sending, though read 200 ms later
    assert sent - 5_000_000 <= at <= sent + 50_000_000 < now
