"""The simulated engine's TTFT split, checked against what it simulates.

The engine knows its own queue and prefill exactly: a prompt's prefill is the
step its profile computes for it (``Scheduler.schedule().duration``), whether
the request waited first or not, and a request that waited for the only slot
has that wait as its queue, not its prefill. What is left of the client's TTFT
(outside) holds at least the profile's front-end cost, which runs before the
request joins the engine's queue.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts
from slogate.simengine.config import build_config
from slogate.simengine.scheduler import Scheduler, Sequence

PROFILE = "llama-3.1-8b@h100"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# one slot, no prefix cache: every prompt is prefilled whole, one at a time
SETTINGS = {"enable_prefix_caching": False, "max_num_seqs": 1}
TURN = PlannedTurn("s", 0, 0, "a question of some length " * 100, 16, 500, 16)
# the engine reports milliseconds to 3 decimals
RESOLUTION_MS = 0.001


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine(PROFILE, speedup=1, **SETTINGS)
    try:
        yield running
    finally:
        running.stop()


def client(engine: EngineProcess) -> StreamClient:
    return StreamClient(engine.url, "chat", MODEL, RequestOptions(ignore_eos=True), Timeouts(), 1)


def prefill_ms(prompt_tokens: int) -> float:
    """The profile's prefill of a lone prompt: one step's duration."""
    scheduler = Scheduler(build_config(PROFILE, **SETTINGS).profile)
    scheduler.add(Sequence("x", prompt_tokens, TURN.max_tokens))
    return scheduler.schedule().duration * 1000.0


def sent(engine: EngineProcess, records: list[RequestRecord]) -> None:
    c = client(engine)
    try:
        records.append(c.send(TURN).record)
    finally:
        c.close()


def test_a_lone_requests_prefill_is_its_simulated_step(engine: EngineProcess) -> None:
    c = client(engine)
    try:
        c.send(TURN)  # connects; the code paths warm
        record = c.send(TURN).record
    finally:
        c.close()
    assert record.ok, record.error_message
    assert record.engine_prompt_tokens == record.input_tokens  # nothing from a cache
    expected = prefill_ms(record.input_tokens)
    assert record.engine_prefill_ms == pytest.approx(expected, abs=RESOLUTION_MS)
    split = request_metrics(record).ttft_split
    assert split is not None and split.queue_ns is not None and split.queue_ns >= 0
    overhead_ms = build_config(PROFILE).profile.efficiency.request_overhead_s * 1000.0
    assert split.outside_ns / 1e6 >= overhead_ms - 2 * RESOLUTION_MS, split
    assert split.outside_ns + split.queue_ns + split.prefill_ns == request_metrics(record).ttft_ns


def test_a_request_that_waited_for_the_slot_has_it_as_queue_not_prefill(
    engine: EngineProcess,
) -> None:
    records: list[RequestRecord] = []
    threads = [threading.Thread(target=sent, args=(engine, records)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(records) == 2 and all(r.ok for r in records), records
    expected = prefill_ms(records[0].input_tokens)
    for r in records:
        assert r.engine_prefill_ms == pytest.approx(expected, abs=RESOLUTION_MS)
    waited = max(records, key=lambda r: r.engine_queue_ms or 0.0)
    # the other's whole stream (prefill and 15 decode steps) went first
    assert waited.engine_queue_ms is not None and waited.engine_queue_ms > expected
