"""Whole runs with ``--otlp-endpoint`` against the simulated engine: an OTLP
receiver on loopback gets the run's histograms and one span per request, their
counts those of summary.json, once whatever the number of load processes; a
collector that cannot be reached costs a warning, never the run."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loadruns import slogate, summary, unreachable_host
from otlpreceiver import Received, otlp_receiver

pytestmark = pytest.mark.slow
EXIT = {"pass": 0, "fail": 1, "invalid": 3, "inconclusive": 4}
HISTOGRAMS = {"slogate.ttft": "ttft_ms", "slogate.itl": "itl_ms", "slogate.e2e": "e2e_ms"}


def run(tmp_path: Path, endpoint: str, duration: str, *flags: str) -> tuple[dict, str]:
    out = tmp_path / "out"
    done = slogate(
        "run", "chat", "--duration", duration, "--warmup", "0s", "--out", str(out),
        "--otlp-endpoint", endpoint, "--otlp-traces", *flags,
    )  # fmt: skip
    s = summary(out)
    assert done.returncode == EXIT[s["verdict"]], done.stderr[-3000:]
    return s, done.stderr


@pytest.mark.parametrize("processes", ["1", "2"])
def test_the_receiver_gets_the_summarys_counts_once(tmp_path: Path, processes: str) -> None:
    with otlp_receiver() as received:
        s, _ = run(tmp_path, received.url, "7s", "--processes", processes)
    assert received.refused == []
    chat = s["scenarios"]["chat"]
    assert chat["requests"]["ok"] >= 5 and s["generator"]["processes"] == int(processes)
    # live pushes while it ran (every 5 s), then the last one with the verdict
    assert len(received.metrics) >= 2
    assert all(len(request.resource_metrics) == 1 for request in received.metrics)
    final = received.last_metrics()
    for name, metric in HISTOGRAMS.items():
        [point] = final[name].exponential_histogram.data_points
        assert point.count == chat["metrics"][metric]["count"], name
        assert sum(point.positive.bucket_counts) + point.zero_count == point.count
    ok = [
        p.as_int
        for p in final["slogate.requests"].sum.data_points
        if {a.key: a.value.string_value for a in p.attributes}["slogate.outcome"] == "ok"
    ]
    assert ok == [chat["requests"]["ok"]]
    verdicts = [
        {a.key: a.value.string_value for a in p.attributes}
        for p in final["slogate.verdict"].gauge.data_points
    ]
    assert {"slogate.verdict": s["verdict"]} in verdicts
    [rate] = final["slogate.throughput.requests"].gauge.data_points
    assert rate.as_double == pytest.approx(chat["throughput"]["requests_per_s"])
    # one span per request, sent by the process that sent the request
    spans = received.spans()
    assert len(spans) == chat["requests"]["total"] + chat["requests"]["cancelled"]
    assert len({span.span_id for span in spans}) == len(spans)
    assert all(span.end_time_unix_nano > span.start_time_unix_nano for span in spans)


def test_a_collector_that_cannot_be_reached_costs_a_warning_not_the_run(tmp_path: Path) -> None:
    with unreachable_host() as url:
        s, stderr = run(tmp_path, url, "3s")
    assert s["scenarios"]["chat"]["requests"]["ok"] >= 1
    assert stderr.count(f"--otlp-endpoint: metrics not accepted at {url}/v1/metrics") == 1
    assert "Traceback" not in stderr


def test_traces_without_an_endpoint_stop_the_run_before_any_load(tmp_path: Path) -> None:
    done = slogate("run", "chat", "--duration", "3s", "--otlp-traces", "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "--otlp-traces needs --otlp-endpoint URL" in done.stderr
    assert not (tmp_path / "o" / "summary.json").exists()


def pushed_ok(received: Received) -> int:
    """The requests ok in the last push (0 before any)."""
    if not received.metrics:
        return 0
    points = received.last_metrics()["slogate.requests"].sum.data_points
    return sum(p.as_int for p in points if p.attributes[1].value.string_value == "ok")


def test_a_sigterm_still_ends_with_the_last_push_and_every_span(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with otlp_receiver() as received:
        run = subprocess.Popen(
            [sys.executable, "-m", "slogate.cli", "run", "chat", "--duration", "60s",
             "--warmup", "0s", "--processes", "2", "--out", str(out),
             "--otlp-endpoint", received.url, "--otlp-traces"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while not pushed_ok(received) and time.monotonic() < deadline:  # a live push came
            time.sleep(0.2)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=90)
    assert run.returncode == 3, stderr[-3000:]
    s = summary(out)
    assert s["run"]["complete"] is False
    chat = s["scenarios"]["chat"]
    final = received.last_metrics()
    [point] = final["slogate.ttft"].exponential_histogram.data_points
    assert point.count == chat["metrics"]["ttft_ms"]["count"] >= 1
    verdicts = [
        p.attributes[0].value.string_value for p in final["slogate.verdict"].gauge.data_points
    ]
    assert "invalid" in verdicts
    assert len(received.spans()) == chat["requests"]["total"] + chat["requests"]["cancelled"]
