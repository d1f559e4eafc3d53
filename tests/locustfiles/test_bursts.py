"""Bursts of same-instant arrivals leave on time: the open-loop dispatch path
(look-ahead, connections opened ahead, one greenlet per request's send) against
the exact-schedule server, judged by the server's own account of when each
request's last byte arrived (its kernel receive timestamp), never by the
client's."""

from __future__ import annotations

import os

import pytest
from gevent.pool import Pool

from slogate.client.streaming import StreamClient
from slogate.engines.exact import ExactEngine
from slogate.locustfiles.lookahead import LookAhead
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

pytestmark = pytest.mark.slow
BURSTS = 4
SIZE = 16
GAP_S = 0.3
SPREAD_MS = 30.0
PROMPT_WORDS = 8_000  # a 60 KB body: a long prompt, as a production trace's
PROMPT = " ".join(f"w{j}" for j in range(PROMPT_WORDS))


def turn(i: int) -> PlannedTurn:
    return PlannedTurn(
        scenario="bursts",
        conversation=i,
        turn=0,
        user_text=f"{i} {PROMPT}",
        max_tokens=4,
        intended_input_tokens=PROMPT_WORDS,
        intended_output_tokens=4,
        arrival_s=(i // SIZE) * GAP_S,
    )


def burst_lateness_ms(engine_cpus: set[int] | None = None) -> list[list[float]]:
    """Send ``BURSTS`` bursts of ``SIZE`` same-instant requests to the exact
    server (its process on ``engine_cpus`` when given); for each burst, how
    late (ms) each request's last byte reached the server after the burst's
    instant (the server's kernel receive timestamps).
    ``bench/bench_burst_arrivals.py`` holds these to the 2 ms target."""
    with ExactEngine({"ttft_ms": 5, "itl_ms": 2}) as engine:
        if engine_cpus is not None and engine.pid is not None:
            os.sched_setaffinity(engine.pid, engine_cpus)
        client = StreamClient(
            engine.url, "chat", engine.model, RequestOptions(), Timeouts(), BURSTS * SIZE
        )
        pool = Pool(BURSTS * SIZE)
        ahead = LookAhead(
            (turn(i) for i in range(BURSTS * SIZE)),
            offset_ns=lambda t: int(t.arrival_s * 1e9),
            prepare=client.prepare,
            until_ns=1 << 62,
            ready=client.pool.open_ahead,
        )
        results = []

        def send(due) -> None:
            results.append(client.send_prepared(due.item, due.due_ns, ahead.written, due.gate.wait))

        for due in ahead:
            pool.spawn(send, due)
        pool.join()
        client.close()
        truth = engine.truth()
    assert all(r.record.ok for r in results), [r.record.error_message for r in results]
    received = sorted(entry.received_ns for entry in truth)
    assert len(received) == BURSTS * SIZE
    late = []
    for burst in range(BURSTS):
        instant = ahead.origin_ns + int(burst * GAP_S * 1e9)
        arrived = received[burst * SIZE : (burst + 1) * SIZE]
        late.append([round((t - instant) / 1e6, 3) for t in arrived])
    return late


def test_bursts_of_16_same_instant_arrivals_reach_the_server_together_and_never_early():
    """Each burst reaches the server as a burst: never before its instant, and
    every request within ``SPREAD_MS`` of it, far less than the 16 exchanges
    (5 ms to the first token, 4 tokens 2 ms apart) one after another: a burst
    whose requests wait for a connection another one holds, or for the
    previous one's answer, fails. The 2 ms target is a speed figure, measured on a
    quiet machine by ``bench/bench_burst_arrivals.py`` (a CI runner sharing its
    two cores with another test worker put one burst 3 ms late)."""
    for burst, late_ms in enumerate(burst_lateness_ms()):
        assert all(0 <= t <= SPREAD_MS for t in late_ms), (burst, late_ms)
