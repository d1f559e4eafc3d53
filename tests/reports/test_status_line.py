"""The headless progress line: what a person watching a run sees every few seconds."""

from __future__ import annotations

import time
from pathlib import Path

import gevent
from reportdata import read_together, request

from slogate import scenarios
from slogate.client.engine_info import EngineInfo
from slogate.locustfiles.context import LoadContext
from slogate.locustfiles.session import RunSession
from slogate.reports.progress import progress_line

SCENARIO = "exact-chat"


def session(tmp_path: Path) -> RunSession:
    loaded = scenarios.load("tests/data/exact-chat.yaml")
    origin = time.time()
    ctx = LoadContext(loaded, "http://127.0.0.1:9", "m", seed=1, shards=1, window_s=5.0,
                      origin_s=origin)  # fmt: skip
    run = RunSession(ctx, EngineInfo("m", "test", ("m",)), tmp_path, host=ctx.host,
                     command="test", max_lag_ms=50.0)  # fmt: skip
    run.start(origin)
    return run


def status_line(run: RunSession) -> str:
    return progress_line(run.progress())


def test_status_line_warns_while_chunks_are_read_together(tmp_path: Path) -> None:
    run = session(tmp_path)
    for _ in range(8):
        run.collector.record(request(50, scenario=SCENARIO), wall_s=time.time())
    line = status_line(run)
    assert line.startswith("[slogate]") and "err 0 | SLO " in line and "ttft_ms p50" in line
    assert "blurred" not in line
    for _ in range(2):  # 6 of 310 gaps (1.9%) now 0
        record = read_together(request(50, scenario=SCENARIO), 3)
        run.collector.record(record, wall_s=time.time())
    assert "ITL blurred 1.9%" in status_line(run)


def test_status_line_names_the_generators_own_stalls(tmp_path: Path) -> None:
    run = session(tmp_path)
    run.collector.record(request(50, scenario=SCENARIO), wall_s=time.time())
    assert "generator" not in status_line(run)  # not measured yet
    watch = run.ctx.watch
    run.ctx.in_flight = 1  # the loop stalls count while a request is in flight
    watch.start()
    gevent.sleep(0.05)
    start = time.perf_counter_ns()
    while time.perf_counter_ns() - start < 40_000_000:  # hold the loop 40 ms
        pass
    gevent.sleep(0.02)
    watch.stop()
    line = status_line(run)
    assert "generator stalls p99" in line
