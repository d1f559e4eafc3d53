"""Distributed runs across hosts, played on one machine: a master and workers
as separate processes, each worker in an empty folder of its own (no scenario
file: the master ships it), against the exact-schedule server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from loadruns import (
    ROOT,
    RUN_LOCUSTFILE,
    assert_every_request_accounted,
    free_port,
    stop_workers,
    summary,
    wait_until_served,
)

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.histograms import HistogramSet
from slogate.analysis.measurement.recorder import OVERALL
from slogate.engines.exact import ExactEngine

pytestmark = pytest.mark.slow

SCENARIO = "exact-chat"


@pytest.fixture
def engine():
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as server:
        yield server


def scenario_with_data(folder: Path) -> Path:
    """tests/data/exact-chat.yaml with its prompt lengths read from a CSV file
    beside it: a file the workers can only have from the master."""
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "lengths.csv").write_text("n\n60\n64\n70\n")
    text = (ROOT / "tests" / "data" / f"{SCENARIO}.yaml").read_text()
    empirical = "input_tokens: {dist: empirical, file: data/lengths.csv, column: n}"
    path = folder / "chat-lengths.yaml"
    path.write_text(text.replace("input_tokens: 64", empirical))
    return path


def start_master(folder: Path, engine, port: int, *extra: str) -> subprocess.Popen:
    scenario = scenario_with_data(folder / "scenario")
    cmd = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", engine.url,
           "--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1",
           "--master-bind-port", str(port), "--users", "6", "--out", "out", "--save-requests",
           *extra]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def start_worker(folder: Path, port: int, plain: bool = False, **env: str) -> subprocess.Popen:
    """A worker in an empty folder: `slogate worker`, or plain Locust (its own
    pid then is the load process's)."""
    folder.mkdir()
    if plain:
        cmd = [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), "--worker"]
    else:
        cmd = [sys.executable, "-m", "slogate.cli", "worker"]
    cmd += ["--master-host", "127.0.0.1", "--master-port", str(port)]
    return subprocess.Popen(
        cmd, cwd=folder, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def finish(master: subprocess.Popen, workers: list[subprocess.Popen]) -> tuple[str, str]:
    try:
        out, err = master.communicate(timeout=180)
    finally:
        stop_workers(workers)
    return out, err


def saved(folder: Path) -> list[dict]:
    """A worker's requests.jsonl, written under its own working folder."""
    path = folder / "out" / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def ttft_merge(lines: list[dict]) -> HistogramSet:
    """One process's merge of the workers' TTFTs: what the master's should equal."""
    merged = HistogramSet()
    for line in lines:
        if not line["warmup"] and line["ttft_ms"] is not None:
            merged.record_ns("ttft", line["ttft_ms"] * 1e6)
    return merged


def test_workers_in_empty_folders_run_the_shipped_scenario(engine, tmp_path):
    port = free_port()
    workers = [start_worker(tmp_path / f"w{i}", port) for i in range(2)]
    master = start_master(tmp_path / "m", engine, port, "--duration", "8s")
    _, err = finish(master, workers)
    assert master.returncode == 0, err[-3000:]
    assert all(w.returncode == 0 for w in workers), [w.stderr.read()[-2000:] for w in workers]
    run = tmp_path / "m" / "out"
    assert_every_request_accounted(run, engine, users=6, at_least=50)
    generator = summary(run)["generator"]
    assert generator["processes_reason"] == "--master, 2 workers expected"
    accepted = generator["workers"].values()
    assert len({w["pid"] for w in accepted}) == 2
    assert all(abs(w["clock"]["offset_ms"]) < 50 for w in accepted)  # one machine, one clock
    # each worker logged its own requests in its own folder; their merge is the master's
    lines = [saved(tmp_path / f"w{i}") for i in range(2)]
    assert all(lines), "each worker measured requests"
    assert {line["intended_input_tokens"] for line in lines[0] + lines[1]} <= {60, 64, 70}
    expected = ttft_merge(lines[0] + lines[1]).histogram("ttft")
    ttft = RunData.load(run).buckets[(SCENARIO, OVERALL)].histograms.histogram("ttft")
    assert ttft.get_total_count() == expected.get_total_count()
    for p in (50, 90, 99, 99.9, 100):
        assert ttft.get_value_at_percentile(p) == expected.get_value_at_percentile(p), p


def measured(lines: list[dict]) -> list[dict]:
    return [line for line in lines if not line["warmup"]]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "silent"])
def test_a_worker_lost_mid_run_is_named_and_the_others_data_kept(engine, tmp_path, how):
    """A worker killed (SIGKILL) or silent (SIGSTOP): the master stops waiting
    for it within Locust's heartbeat, keeps what it had shipped and everything
    the other measured, and marks the run incomplete naming it."""
    port = free_port()
    workers = [start_worker(tmp_path / f"w{i}", port, plain=True) for i in range(2)]
    victim = workers[0]
    started = time.monotonic()
    master = start_master(tmp_path / "m", engine, port, "--duration", "20s")
    wait_until_served(engine, 40)
    time.sleep(4)  # a worker reports every 3 s: the victim has shipped some data
    victim.send_signal(how)
    try:
        _, err = master.communicate(timeout=180)
    finally:
        victim.kill()  # a silent one too, now that its master is done
        stop_workers(workers)
    took = time.monotonic() - started
    assert master.returncode == 3, err[-3000:]
    assert took < 20 + 30, f"the run took {took:.0f} s"  # start-up is a few seconds of it
    run = summary(tmp_path / "m" / "out")["run"]
    assert run["complete"] is False
    reason = run["incomplete_reason"]
    assert f"pid {victim.pid}" in reason and "requests" in reason and "s of its load" in reason
    r = summary(tmp_path / "m" / "out")["scenarios"][SCENARIO]["requests"]
    counted = r["ok"] + r["failed"]
    kept = len(measured(saved(tmp_path / "w1")))
    lost_worker_lines = len(measured(saved(tmp_path / "w0")))
    assert kept < counted <= kept + lost_worker_lines, (kept, counted, lost_worker_lines)


def test_a_killed_master_leaves_the_workers_data_it_had_in_its_journal(engine, tmp_path):
    """The master assembles the run's data, so it journals them: SIGKILL to it
    leaves every worker report it had absorbed, judged incomplete (exit 3)."""
    port = free_port()
    workers = [start_worker(tmp_path / f"w{i}", port, plain=True) for i in range(2)]
    master = start_master(tmp_path / "m", engine, port, "--duration", "30s")
    wait_until_served(engine, 40)
    time.sleep(4)  # each worker has reported (every 3 s) and the master flushed
    try:
        locust = psutil.Process(master.pid).children()[0]
        locust.kill()
        _, err = master.communicate(timeout=60)
    finally:
        stop_workers(workers)
    assert master.returncode == 3, err[-3000:]
    assert "the Locust process was killed by signal 9" in err
    out = tmp_path / "m" / "out"
    assert not (out / "data" / "run.json").exists()
    doc = summary(out)
    assert doc["run"]["complete"] is False and "killed" in doc["run"]["incomplete_reason"]
    r = doc["scenarios"][SCENARIO]["requests"]
    logged = sum(len(measured(saved(tmp_path / f"w{i}"))) for i in range(2))
    assert 0 < r["ok"] + r["failed"] <= logged


def test_a_worker_clock_off_by_seconds_is_measured_and_corrected(engine, tmp_path):
    """A worker whose wall clock is 30 s ahead: its offset is measured, and its
    requests land in the run's own windows, not 30 s past its end."""
    port = free_port()
    workers = [
        start_worker(tmp_path / "w0", port),
        start_worker(tmp_path / "w1", port, SLOGATE_CLOCK_SHIFT_S="30"),
    ]
    master = start_master(tmp_path / "m", engine, port, "--duration", "8s")
    _, err = finish(master, workers)
    assert master.returncode == 0, err[-3000:]
    offsets = sorted(
        w["clock"]["offset_ms"]
        for w in summary(tmp_path / "m" / "out")["generator"]["workers"].values()
    )
    assert offsets[0] == pytest.approx(0, abs=50)
    assert offsets[1] == pytest.approx(30_000, abs=50)
    rows = RunData.load(tmp_path / "m" / "out").timeseries
    assert rows and max(row["t_s"] for row in rows) < 8
    assert (
        sum(row["requests_ok"] for row in rows)
        == summary(tmp_path / "m" / "out")["scenarios"][SCENARIO]["requests"]["ok"]
    )
    assert all(measured(saved(tmp_path / f"w{i}")) for i in range(2))
    report = (tmp_path / "m" / "out" / "report.html").read_text()
    assert "generator workers" in report and "offset_ms" in report  # the report shows them


def handshake_peer(port: int, version: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "handshake_peer.py"), str(port), version],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def terminated(master: subprocess.Popen) -> str:
    """SIGTERM to the master; its log once it has ended (killed if it outlasts 60 s)."""
    master.terminate()
    try:
        return master.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        master.kill()
        raise


def test_a_worker_of_another_version_is_refused_naming_both(engine, tmp_path):
    """A peer speaking the handshake by hand gets the scenario's files, then,
    claiming another version, a refusal naming both (so does the master's log)."""
    port = free_port()
    master = start_master(tmp_path / "m", engine, port, "--duration", "8s")
    try:
        peer = handshake_peer(port, "0.0.0-other")
    finally:
        err = terminated(master)
    assert peer.returncode == 0, peer.stderr[-2000:]
    got = json.loads(peer.stdout)
    assert set(got["files"]) == {"chat-lengths.yaml", "data/lengths.csv"}
    assert got["files"]["data/lengths.csv"] == "n\n60\n64\n70\n"
    assert "0.0.0-other" in got["reason"] and got["version"] in got["reason"]
    assert "pid" in err and "peer-host" in err and got["reason"] in err  # the master's log
    assert master.returncode == 3  # stopped while waiting for workers: no load was sent


def test_sigterm_ends_a_master_whose_worker_went_silent_before_the_load(engine, tmp_path):
    """A worker that connects and goes silent makes Locust "stop the test"
    while the master still waits for workers: SIGTERM must end that wait too
    (a CI run once found such a master still waiting 60 s after it)."""
    port = free_port()
    master = start_master(tmp_path / "m", engine, port, "--duration", "8s")
    try:
        peer = handshake_peer(port, "--silent")
        deadline = time.monotonic() + 60
        for line in master.stderr:  # the master logs each second while it waits
            if "went missing" in line:
                break
            assert time.monotonic() < deadline, "the silent worker was never marked missing"
    finally:
        err = terminated(master)
    assert peer.returncode == 0, peer.stderr[-2000:]
    assert master.returncode == 3, err[-3000:]
    assert "SIGTERM while waiting for workers: no load was sent" in err
