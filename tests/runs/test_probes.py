"""--probes: one-token requests beside the load, outside its concurrency limit,
recorded and reported apart; on the simulated engine, probes under a load that
saturates it wait longer than probes on an idle engine, and the scenario's own
request count does not change with them."""

from __future__ import annotations

import pytest
from loadruns import cli, scenario_file, slogate, summary
from reportdata import bucket, request, run_of

from slogate.analysis.measurement.recorder import OVERALL, PROBE, Recorder
from slogate.engines.simulated import start_engine
from slogate.reports import write_results

PROFILE = "llama-3.1-8b@h100"


def test_a_probe_goes_to_its_own_bucket_alone() -> None:
    recorder = Recorder(window_s=5.0)
    recorder.origin_s = 100.0
    recorder.record(request(ttft_ms=50.0), wall_s=101.0)
    recorder.record_probe(request(ttft_ms=900.0, tokens=1), wall_s=102.0)
    probes = recorder.buckets[("chat", PROBE)]
    assert (probes.counters.ok, recorder.buckets[("chat", OVERALL)].counters.ok) == (1, 1)
    assert probes.histograms.histogram("ttft").get_value_at_percentile(50) == pytest.approx(
        900_000, rel=1e-3
    )  # us
    assert recorder.buckets[("chat", OVERALL)].histograms.histogram("ttft").get_max_value() < 60_000
    assert sum(b.counters.ok for b in recorder.windows.values()) == 1  # the scenario's request
    assert len(recorder.timelines.encode()["start_s"]) == 1


def test_probes_are_reported_apart_everywhere(tmp_path) -> None:
    chat = bucket({"ttft": [100.0] * 300, "e2e": [900.0] * 300})
    slo = {"chat": [{"metric": "ttft_ms", "stat": "p50", "limit": 200.0, "kind": "max"}]}
    run = run_of({"chat": chat}, slo=slo, probes_per_s=2.0)
    run.buckets[("chat", PROBE)] = bucket(
        {"ttft": [1500.0] * 99 + [4000.0], "e2e": [1510.0] * 99 + [4010.0]},
        failed={"timeout_first_token": 2},
    )
    outcome = write_results(tmp_path, run)
    s = outcome.summary
    assert s["verdict"] == "pass"  # the probes' 1.5 s TTFT is in no SLO
    assert s["scenarios"]["chat"]["requests"]["total"] == 300
    probes = s["probes"]
    assert (probes["scenario"], probes["rate_per_s"], s["run"]["probes_per_s"]) == (
        "chat",
        2.0,
        2.0,
    )
    assert probes["requests"]["ok"] == 100 and probes["requests"]["failed"] == 2
    assert probes["requests"]["errors"] == {"timeout_first_token": 2}
    assert probes["metrics"]["ttft_ms"]["p50"] == pytest.approx(1500.0, rel=1e-3)
    assert probes["metrics"]["ttft_ms"]["max"] == pytest.approx(4000.0, rel=1e-3)
    report = (tmp_path / "report.html").read_text()
    assert "Probes: what a new user waits under this load" in report
    assert "102 one-token requests at 2/s to chat" in report
    assert "timeout_first_token 2" in report
    md = (tmp_path / "summary.md").read_text()
    assert "Probes (one token, 2/s beside the load): 102 sent, 2 failed; TTFT p50 1,500 ms" in md
    prom = (tmp_path / "metrics.prom").read_text()
    assert (
        'slogate_probe_latency_seconds{engine="vllm",metric="ttft",model="test-model",'
        'quantile="0.5",revision="abc123",scenario="chat"} 1.50' in prom
    )
    assert (
        'slogate_probe_requests{engine="vllm",model="test-model",outcome="failed",'
        'revision="abc123",scenario="chat"} 2.0' in prom
    )


def test_a_bad_probe_rate_exits_2_before_any_load(tmp_path) -> None:
    done = cli("run", "chat", "--probes", "-1", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "--probes" in done.stderr
    assert cli("schema", "summary").stdout.count('"Probes"') >= 1


@pytest.fixture(scope="module")
def engine():
    """One request at a time (``max_num_seqs=1``): a probe waits for the whole queue."""
    with start_engine(PROFILE, max_num_seqs=1) as running:
        yield running


def open_loop(tmp_path, engine, name: str, rps: float, *extra: str):
    scenario = scenario_file(
        tmp_path,
        "exact-open",
        workload={"kind": "chat", "text": "prose", "input_tokens": 32, "output_tokens": 64,
                  "turns": 1},
        load={"rate": {"rps": rps, "arrival": "constant"}, "duration": "8s",
              "max_in_flight": 4096},
        slo={"ttft_ms": {"p50": 600000}},
    )  # fmt: skip
    out = tmp_path / name
    done = slogate("run", str(scenario), "--host", engine.url, "--out", str(out), "--warmup",
                   "0s", "--saturation", "off", *extra, timeout=240)  # fmt: skip
    assert done.returncode in (0, 4), done.stderr[-3000:]
    return summary(out)


@pytest.mark.slow
def test_probes_under_a_saturating_load_wait_longer_than_on_an_idle_engine(tmp_path, engine):
    """The engine serves a 64-token answer in about 0.5 s one at a time: 4/s
    saturates it, 0.5/s leaves it idle most of the time."""
    idle = open_loop(tmp_path, engine, "idle", 0.5, "--probes", "2")
    busy = open_loop(tmp_path, engine, "busy", 4.0, "--probes", "2")
    for s in (idle, busy):
        assert s["probes"]["requests"]["ok"] >= 8 and s["probes"]["requests"]["failed"] == 0
    idle_p50 = idle["probes"]["metrics"]["ttft_ms"]["p50"]
    busy_p50 = busy["probes"]["metrics"]["ttft_ms"]["p50"]
    assert busy_p50 > 4 * idle_p50, (idle_p50, busy_p50)
    assert busy_p50 > 1000.0  # behind seconds of queue
    plain = open_loop(tmp_path, engine, "plain", 0.5)
    assert plain.get("probes") is None
    counts = [s["scenarios"]["exact-open"]["requests"]["total"] for s in (idle, plain)]
    assert counts[0] == counts[1] == 3, counts  # at 2, 4 and 6 s, probes or not
