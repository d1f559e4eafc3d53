"""Each request's timeline row keeps its identity (analysis/measurement/timelines.py):
request, trace and span ids packed, the engine's ids kept once each."""

from __future__ import annotations

import json

import pytest

from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.analysis.measurement.timelines import Timelines


def sent(request_id: str, engine_id: str | None) -> RequestRecord:
    record = RequestRecord("chat", 1_000_000, 9_000_000, chunk_ns=[5_000_000])
    record.request_id, record.trace_id, record.span_id = request_id, "ab" * 16, "cd" * 8
    record.engine_request_id = engine_id
    return record


def test_timelines_keep_each_rows_ids_through_merging_and_saving() -> None:
    rid = [f"{n:032x}" for n in range(1, 5)]
    worker = Timelines()
    for record in (sent(rid[0], f"chatcmpl-{rid[0]}"), sent(rid[1], "llama-7")):
        worker.add(record, request_metrics(record), 100.0, warmup=False)
    master = Timelines()
    master.add(sent(rid[2], None), request_metrics(sent(rid[2], None)), 99.0, warmup=False)
    master.add(sent(rid[3], f"chatcmpl-{rid[3]}"), request_metrics(sent(rid[3], "")), 99.0, False)
    master.extend(worker)
    saved = Timelines.decode(json.loads(json.dumps(master.encode())))
    engine_ids = [(ids.request_id, ids.engine_id) for ids in map(saved.row_ids, range(4)) if ids]
    assert engine_ids == [
        (rid[2], ""),
        (rid[3], f"chatcmpl-{rid[3]}"),
        (rid[0], f"chatcmpl-{rid[0]}"),
        (rid[1], "llama-7"),
    ]
    assert saved.engine_ids == ["chatcmpl-", "llama-7"]  # vLLM's form: one entry for the run
    assert saved.row_ids(0) is not None and saved.row_ids(0).trace_id == "ab" * 16
    older = master.encode()
    for key in ("ids", "engine_ids", "engine_id", "engine_tail"):
        del older[key]
    assert Timelines.decode(older).row_ids(0) is None  # saved before ids were kept
    with pytest.raises(ValueError, match="the ids cover 3 rows, not 4"):
        Timelines.decode({**master.encode(), "ids": master.ids[: 3 * 40].hex()})
