"""The simulated engine under structured outputs (issue 40, item 2): each
answer meets its schema, a schema's first request pays the compile and the
next ones do not, and the invalid_json_rate fault breaks answers the
client's check then catches."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from structured_cases import SCHEMA

from slogate.analysis.measurement.records import RequestRecord
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import Constraint, PlannedTurn, RequestOptions, Timeouts
from slogate.scenarios.structured import JSON_OBJECT, response_format
from slogate.simengine.grammar import COMPILE_S


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine(speedup=1)
    try:
        yield running
    finally:
        running.stop()


def send_all(engine: EngineProcess, constraints: list[Constraint]) -> list[RequestRecord]:
    client = StreamClient(
        engine.url,
        "chat",
        "meta-llama/Llama-3.1-8B-Instruct",
        RequestOptions(),
        Timeouts(first_token_s=30, stall_s=30),
        1,
    )
    turns = [
        PlannedTurn("so", i, 0, f"question {i}", 200, 32, 200, constraint=c)
        for i, c in enumerate(constraints)
    ]
    try:
        return [client.send(turn).record for turn in turns]
    finally:
        client.close()


def test_the_engine_follows_each_schema_and_compiles_it_once(engine):
    """Every answer meets its schema and ends with EOS; a schema's first
    request waits its compile, the next ones with it do not."""
    other = dict(SCHEMA, required=["color"])
    picked = [Constraint(response_format(k, s), k) for k, s in (("a", SCHEMA), ("b", other))]
    records = send_all(
        engine, [picked[0], picked[0], picked[0], picked[1], picked[1], Constraint()]
    )
    assert all(r.ok for r in records), [r.error_message for r in records]
    assert [r.schema_error for r in records] == [None] * 6
    assert [r.finish_reason for r in records[:5]] == ["stop"] * 5
    assert [r.schema_first for r in records] == [True, False, False, True, False, False]
    assert records[5].constrained is False
    ttft = [(r.chunk_ns[0] - r.start_ns) / 1e9 for r in records]
    # the compile is COMPILE_S of model time at speedup 1; the rest of TTFT is alike
    assert ttft[0] - max(ttft[1:3]) > COMPILE_S * 0.6, ttft
    assert ttft[3] - ttft[4] > COMPILE_S * 0.6, ttft


def test_a_json_object_answer_is_an_object(engine):
    records = send_all(engine, [Constraint({"type": JSON_OBJECT}, JSON_OBJECT)] * 2)
    assert [(r.ok, r.schema_error) for r in records] == [(True, None)] * 2


def test_the_fault_breaks_the_answers_and_the_check_catches_them(engine):
    engine.set_faults(invalid_json_rate=1.0)
    try:
        records = send_all(engine, [Constraint(response_format("c", SCHEMA), "c")] * 3)
    finally:
        engine.clear_faults()
    assert all(r.ok for r in records)
    assert all(
        r.schema_error is not None and r.schema_error.startswith("not JSON: ") for r in records
    )
