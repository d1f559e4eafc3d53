"""Whole runs through Locust against the exact-schedule server: the CLI and plain
Locust agree, distributed runs lose nothing, the gate's exit codes, interrupts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from loadruns import (
    assert_every_request_accounted,
    free_port,
    locust_command,
    requests_by_sender,
    scenario_file,
    slogate,
    stop_workers,
    summary,
    unreachable_host,
    wait_until_served,
)

from slogate.analysis.measurement.records import USER, sender
from slogate.engines.exact import ExactEngine

pytestmark = pytest.mark.slow


@pytest.fixture
def engine():
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as server:
        yield server


def scenario_stats(out, name="exact-chat"):
    return summary(out)["scenarios"][name]


def test_plain_locust_and_slogate_run_write_equivalent_results(engine, tmp_path):
    scenario = "tests/data/exact-chat.yaml"
    via_cli = slogate("run", scenario, "--host", engine.url, "--out", str(tmp_path / "cli"))
    assert via_cli.returncode == 0, via_cli.stderr[-3000:]
    assert "[slogate]" in via_cli.stderr  # the headless status line
    via_locust = subprocess.run(
        locust_command("--headless", "-u", "4", "-r", "4", "-t", "8s", "--host", engine.url,
                       "--scenario", scenario, "--out", str(tmp_path / "locust"), "--locust-stats"),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert via_locust.returncode == 0, via_locust.stderr[-3000:]
    a, b = scenario_stats(tmp_path / "cli"), scenario_stats(tmp_path / "locust")
    assert summary(tmp_path / "cli")["verdict"] == summary(tmp_path / "locust")["verdict"] == "pass"
    for s in (a, b):
        assert s["requests"]["failed"] == 0
        assert s["tokens"]["count_method"] == "usage"
        assert s["tokens"]["output"] == 16 * s["requests"]["ok"]
    assert abs(a["requests"]["ok"] - b["requests"]["ok"]) <= 0.15 * a["requests"]["ok"]
    for run, out in ((via_cli, "cli"), (via_locust, "locust")):
        last = run.stdout.rstrip().splitlines()[-1]
        assert last == f"verdict PASS, exit 0: {tmp_path / out / 'report.html'}", run.stdout
    assert "Aggregated" not in via_cli.stderr  # Locust's own tables only when asked for
    assert "Aggregated" in via_locust.stderr
    assert "Warning" not in via_cli.stderr
    for metric, tolerance in (("ttft_ms", 3.0), ("itl_ms", 1.0), ("tpot_ms", 1.0)):
        assert abs(a["metrics"][metric]["p50"] - b["metrics"][metric]["p50"]) < tolerance, metric
    assert a["metrics"]["ttft_ms"]["p50"] == pytest.approx(50, abs=3)
    assert a["metrics"]["itl_ms"]["p50"] == pytest.approx(20, abs=1)


def test_processes_2_counts_every_request_the_server_answered(engine, tmp_path):
    done = slogate("run", "tests/data/exact-chat.yaml", "--host", engine.url, "--processes", "2",
                   "--users", "6", "--out", str(tmp_path / "out"), "--save-requests")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert_every_request_accounted(tmp_path / "out", engine, users=6, at_least=50)
    generator = summary(tmp_path / "out")["generator"]
    assert generator["processes"] == 2
    assert generator["processes_reason"] == "--processes 2"
    per_process = generator["per_process"]
    assert len(per_process) == 2 and all(p["cpu_s"] > 0 for p in per_process.values())
    assert len({p["pid"] for p in per_process.values()}) == 2
    assert_requests_saved(tmp_path / "out")
    # the users of the two processes stay distinct: 3 users each, numbered 0-2 in each
    users = requests_by_sender(tmp_path / "out")
    assert list(users) == ["user"]
    assert sorted(users["user"]) == [(w, n) for w in (0, 1) for n in range(3)]
    saved = {line["user"] for line in map(json.loads, (tmp_path / "out" / "requests.jsonl").open())}
    assert saved == {sender(USER, w, n) for w, n in users["user"]}


def assert_requests_saved(out) -> None:
    """Both processes' lines are in requests.jsonl, whole, one per finished
    request, with the server's schedule (16 tokens, none before 50 ms) and the
    same timings the histograms hold (a busy machine may delay the server's
    sends: the line then says so, as the histogram does)."""
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    measured = [line for line in lines if not line["warmup"]]
    stats = scenario_stats(out)
    r = stats["requests"]
    assert len(measured) == r["ok"] + r["failed"]
    assert sum(line["ok"] for line in measured) == r["ok"]
    ttft = stats["metrics"]["ttft_ms"]
    for line in lines:
        assert line["scenario"] == "exact-chat" and line["stage"] is not None
        assert line["output_tokens"] == 16 == len(line["chunk_ms"])
        assert line["ttft_ms"] >= 49.0  # milliseconds, never before the server's first token
        assert line["chunk_ms"][0] == line["ttft_ms"]
    for line in measured:  # the histogram's range, to its 0.1% resolution
        assert ttft["min"] * 0.998 <= line["ttft_ms"] <= ttft["max"] * 1.002


def test_master_and_two_workers_lose_nothing_at_shutdown(engine, tmp_path):
    port = free_port()
    common = ["--master-port", str(port)]
    workers = [
        subprocess.Popen(locust_command("--worker", "--master-host", "127.0.0.1", *common),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    try:
        master = subprocess.run(
            locust_command("--master", "--master-bind-port", str(port), "--expect-workers", "2",
                           "--headless", "-u", "6", "-t", "8s", "--host", engine.url,
                           "--scenario", "tests/data/exact-chat.yaml",
                           "--out", str(tmp_path / "out")),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        stop_workers(workers)
    assert master.returncode == 0, master.stderr[-3000:]
    assert_every_request_accounted(tmp_path / "out", engine, users=6, at_least=50)
    # each worker measured its own loop; the master merged them exactly
    generator = summary(tmp_path / "out")["generator"]
    processes = generator["per_process"].values()
    assert len(processes) == 2 and len({p["pid"] for p in processes}) == 2
    assert generator["loop_stall_ms"]["samples"] == sum(
        p["loop_stall_ms"]["samples"] for p in processes
    )


def test_sigterm_mid_run_leaves_a_complete_folder_marked_incomplete(engine, tmp_path):
    out = tmp_path / "out"
    run = subprocess.Popen(
        [sys.executable, "-m", "slogate.cli", "run", "tests/data/exact-chat.yaml",
         "--host", engine.url, "--duration", "60s", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = wait_until_served(engine, 20)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 3, stderr[-3000:]
    s = summary(out)
    assert s["verdict"] == "invalid"
    assert s["run"]["complete"] is False
    for name in ("report.html", "junit.xml", "percentiles.csv", "data/run.json"):
        assert (out / name).exists(), name
    assert_every_request_accounted(out, engine, users=4, at_least=10, seen=seen)


def test_unreachable_host_exits_3_with_a_clear_message(tmp_path):
    with unreachable_host() as host:
        done = slogate(
            "run", "tests/data/exact-chat.yaml", "--host", host, "--out", str(tmp_path / "out")
        )
    assert done.returncode == 3
    assert "127.0.0.1" in done.stderr and "reach" in done.stderr.lower()


def test_bad_scenario_exits_2_before_any_load(tmp_path):
    bad = scenario_file(tmp_path, "exact-chat", load={"users": -3})
    done = slogate("run", str(bad), "--host", "http://127.0.0.1:9", "--out", str(tmp_path / "o"))
    assert done.returncode == 2
    assert "load.users" in done.stderr
    assert not (tmp_path / "o").exists()


def test_web_ui_shows_hdr_percentiles_and_slo_status(engine, tmp_path):
    port = free_port()
    ui = subprocess.Popen(
        locust_command("--autostart", "-u", "2", "-t", "20s", "--host", engine.url,
                       "--scenario", "tests/data/exact-chat.yaml", "--out", str(tmp_path / "o"),
                       "--web-host", "127.0.0.1", "--web-port", str(port)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        rows = []
        # a percentile stays inconclusive until enough samples bound it, as in the verdict
        while time.monotonic() < deadline and not (rows and rows[0]["slo"] == "ok so far"):
            time.sleep(0.2)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/requests") as r:
                    stats = json.loads(r.read())
            except OSError:
                continue
            rows = [
                row
                for table in stats.get("extended_stats", [])
                for row in table["data"]
                if row["ttft_p50"] is not None
            ]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as r:
            page = r.read().decode()
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    assert rows and rows[0]["scenario"] == "exact-chat"
    assert rows[0]["ttft_p50"] == pytest.approx(50, abs=5)
    assert rows[0]["slo"] == "ok so far"
    assert "slogate SLOs" in page


def test_stages_get_their_own_histograms_and_warmup_is_excluded(engine, tmp_path):
    scenario = scenario_file(
        tmp_path,
        "exact-chat",
        load={
            "users": None,
            "spawn_rate": None,
            "duration": None,
            "warmup": "2s",
            "stages": [
                {"name": "low", "duration": "5s", "users": 1},
                {"name": "high", "duration": "5s", "users": 6},
            ],
        },
    )
    done = slogate("run", str(scenario), "--host", engine.url, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]
    s = scenario_stats(tmp_path / "out")
    low, high = s["stages"]["low"], s["stages"]["high"]
    assert high["requests"]["ok"] > 3 * low["requests"]["ok"] > 0
    # the whole run's bucket holds every stage's requests but the warm-up's
    assert s["requests"]["ok"] < low["requests"]["ok"] + high["requests"]["ok"]
    assert s["requests"]["ok"] >= high["requests"]["ok"]


def test_a_simulated_engine_profile_with_a_host_is_a_configuration_error():
    done = slogate("run", "chat", "--host", "http://127.0.0.1:9", "--profile", "llama-3.1-8b@h100")
    assert done.returncode == 2
    assert "--profile" in done.stderr and "--host" in done.stderr


def live_slo_cells(port: int) -> list[str]:
    """The SLO status cells of the web UI's slogate table (none before it is up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/requests") as r:
            stats = json.loads(r.read())
    except OSError:
        return []
    return [row["slo"] for table in stats.get("extended_stats", []) for row in table["data"]]


def test_a_failing_e2e_p999_slo_fails_alike_live_in_the_exit_code_and_report(tmp_path):
    """The live view, the summary and the exit code come from one judge: an e2e
    p99.9 limit of 1 ms against 2.3 s requests fails in all three (by a margin
    no generator stall on a busy machine reaches)."""
    scenario = scenario_file(tmp_path, "exact-chat", slo={"e2e_ms": {"p999": 1}})
    port, out = free_port(), tmp_path / "o"
    with ExactEngine({"ttft_ms": 2000, "itl_ms": 20}) as slow:
        ui = subprocess.Popen(
            locust_command("--autostart", "--autoquit", "0", "-u", "2", "-t", "6s",
                           "--host", slow.url, "--scenario", str(scenario), "--out", str(out),
                           "--web-host", "127.0.0.1", "--web-port", str(port)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            cells: list[str] = []
            while time.monotonic() < deadline and not any(c.startswith("fail") for c in cells):
                time.sleep(0.2)
                cells = live_slo_cells(port)
            code = ui.wait(timeout=60)
        finally:
            ui.kill()
    assert cells == ["fail: e2e_ms p999 <= 1"]
    verdicts = {s["name"]: s["verdict"] for s in scenario_stats(out)["slo"]}
    assert verdicts["e2e_ms p999 <= 1"] == "fail"
    expected = 3 if summary(out)["invalid_reasons"] else 1  # a stalled generator: invalid
    assert code == summary(out)["exit_code"] == expected
    assert "e2e_ms p999" in (out / "report.html").read_text()
