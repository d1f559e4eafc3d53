"""slogate tune end to end on simulated engines on 127.0.0.1: the best treatment
is the one the engine model predicts, pruning spends less engine time than the
full grid, a killed tune resumes without losing or rerunning a treatment, and a
command template drives an engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slogate.simengine.profiles import load_profile
from slogate.simengine.simulate import simulate_closed_loop

SCENARIO = (Path(__file__).parents[1] / "data" / "tune-capped.yaml").read_text()
SEARCH = ["--screen-duration", "2s", "--duration", "3s", "--warmup", "1s", "--tolerance", "0.25"]


def tune(tmp_path: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    scenario = tmp_path / "capped.yaml"
    scenario.write_text(SCENARIO)
    cmd = [sys.executable, "-m", "slogate.cli", "tune", str(scenario), *SEARCH, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def model_capacity(max_num_seqs: int, tp: int) -> float:
    """Requests/s the engine model serves with every slot busy (offline, no server)."""
    profile = load_profile("llama-3.1-8b@h100", max_num_seqs=max_num_seqs, tp=tp)
    result = simulate_closed_loop(
        profile, concurrency=max_num_seqs, input_tokens=128, output_tokens=32
    )
    return result.requests_per_s


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_tune_of_six_treatments_recommends_the_models_best_and_prunes(tmp_path: Path) -> None:
    levels = {(m, tp): model_capacity(m, tp) for m in (1, 2, 4) for tp in (1, 2)}
    ordered = sorted(levels, key=levels.__getitem__, reverse=True)
    best, runner_up = ordered[0], ordered[1]
    assert levels[best] > 1.3 * levels[runner_up]  # the model's best stands clear
    out = tmp_path / "tune"
    done = tune(
        tmp_path,
        "--set", "max_num_seqs=1,2,4",
        "--set", "tp=1,2",
        "--current", "max_num_seqs=2",
        "--current", "tp=1",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "tune.json").read_text())
    assert doc["finished"] and doc["verdict"] == "pass" and len(doc["treatments"]) == 6
    assert doc["recommended"]["settings"] == {"max_num_seqs": str(best[0]), "tp": str(best[1])}
    assert f"--set max_num_seqs={best[0]} --set tp={best[1]}" in doc["recommended"]["command_line"]
    by_name = {t["name"]: t for t in doc["treatments"]}
    top = by_name[doc["recommended"]["treatment"]]
    assert top["rank"] == 1 and top["vs_current"] == "better" and top["capacity"]["confirmed"]
    assert top["throughput"]["per_gpu"] == pytest.approx(
        top["throughput"]["output_tokens_per_s"] / 2
    )
    assert (out / top["report"]).is_file() and (out / top["sweep"] / "sweep.json").is_file()
    assert top["startup_s"] > 0 and top["peak_memory_bytes"] > 10 * 2**20
    pruned = [t for t in doc["treatments"] if t["status"] == "pruned"]
    assert pruned and all("failed at a load" in t["pruned_reason"] for t in pruned)
    assert doc["engine_time_s"] < doc["full_grid_engine_time_s"]


def processes_naming(text: str) -> list[bytes]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes()
        except OSError:
            continue
        if text.encode() in line:
            found.append(line)
    return found


def wait_for_orphans(out: Path, timeout_s: float = 60) -> None:
    """Until no process names ``out``: the trial the kill cut off runs to its end
    (its engine gone with the tune), as after a real crash before a resume."""
    deadline = time.monotonic() + timeout_s
    while processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_killed_tune_resumes_without_losing_or_rerunning_a_treatment(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    scenario = tmp_path / "capped.yaml"
    scenario.write_text(SCENARIO)
    args = [sys.executable, "-m", "slogate.cli", "tune", str(scenario), *SEARCH, "--no-prune"]
    args += ["--set", "max_num_seqs=2,4", "--current", "max_num_seqs=2", "--out", str(out)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    first: list[Path] = []
    while not first and time.monotonic() < deadline and process.poll() is None:
        first = list(out.glob("treatments/*/treatment.json"))
        time.sleep(0.5)
    assert first, "no treatment finished"
    time.sleep(3)  # into the second treatment's search
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    wait_for_orphans(out)
    kept = {
        p: (p.stat().st_mtime_ns, p.read_text()) for p in out.glob("treatments/*/treatment.json")
    }
    assert len(kept) == 1
    done = subprocess.run(
        [*args[: args.index("--out")], "--resume", str(out)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for path, (mtime, text) in kept.items():
        assert path.stat().st_mtime_ns == mtime and path.read_text() == text
    doc = json.loads((out / "tune.json").read_text())
    assert doc["finished"] and [t["status"] for t in doc["treatments"]] == ["measured"] * 2
    assert "full search max_num_seqs=2" not in done.stdout  # the finished one was not rerun


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_command_template_drives_the_engine(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    start = f"{sys.executable} -m slogate.simengine --port {{port}} --max-num-seqs {{max_num_seqs}}"
    done = tune(
        tmp_path,
        "--engine", "template",
        "--start-command", start,
        "--ready-url", "http://127.0.0.1:{port}/health",
        "--reset-url", "http://127.0.0.1:{port}/reset_prefix_cache",
        "--set", "max_num_seqs=1,4",
        "--current", "max_num_seqs=1",
        "--no-prune",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "tune.json").read_text())
    assert doc["engine"] == "template"
    four, one = (next(t for t in doc["treatments"] if t["settings"]["max_num_seqs"] == n)
                 for n in ("4", "1"))  # fmt: skip
    assert four["capacity"]["value"] > one["capacity"]["value"]
    assert four["vs_current"] == "better" and doc["recommended"]["treatment"] == four["name"]
    assert doc["recommended"]["command_line"].endswith("--port {port} --max-num-seqs 4")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_stops_the_engine_keeps_the_document_and_exits_3(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    marker = f"sigterm-{tmp_path.name}"
    scenario = tmp_path / "capped.yaml"
    scenario.write_text(SCENARIO)
    start = (
        f"{sys.executable} -m slogate.simengine --port {{port}} --max-num-seqs {{n}} "
        f"--served-model-name {marker}"
    )
    args = [sys.executable, "-m", "slogate.cli", "tune", str(scenario), *SEARCH, "--no-prune"]
    args += ["--engine", "template", "--start-command", start, "--current", "n=2"]
    args += ["--ready-url", "http://127.0.0.1:{port}/health", "--set", "n=2,4", "--out", str(out)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not processes_naming(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(marker), "the engine never started"
    time.sleep(4)  # into the first treatment's trials
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 3, stdout[-2000:] + stderr[-2000:]
    assert "interrupted" in stderr
    assert processes_naming(marker) == []
    doc = json.loads((out / "tune.json").read_text())
    assert doc["finished"] is False and doc["verdict"] == "invalid"
    assert [t["status"] for t in doc["treatments"]] == ["pending", "pending"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_an_engine_that_fails_to_start_or_crashes_is_recorded_and_the_tune_goes_on(
    tmp_path: Path,
) -> None:
    out = tmp_path / "tune"
    # n=bad: the engine refuses its flag and exits; life=10: killed 10 s after its start,
    # once serving (start-up takes 2-4 s here), in its warm-up or first trial.
    start = (
        f"timeout {{life}} {sys.executable} -m slogate.simengine --port {{port}} "
        "--max-num-seqs {n}"
    )
    done = tune(
        tmp_path,
        "--engine", "template",
        "--start-command", start,
        "--ready-url", "http://127.0.0.1:{port}/health",
        "--set", "n=2,bad",
        "--set", "life=600,10",
        "--current", "n=2",
        "--current", "life=600",
        "--no-prune",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "tune.json").read_text())
    by_settings = {(t["settings"]["n"], t["settings"]["life"]): t for t in doc["treatments"]}
    assert by_settings["2", "600"]["status"] == "measured"
    crashed = by_settings["2", "10"]
    assert crashed["status"] == "failed" and "engine exited" in crashed["error"]
    for life in ("600", "10"):
        refused = by_settings["bad", life]
        assert refused["status"] == "failed" and "engine did not start" in refused["error"]
        assert "invalid int value: 'bad'" in refused["log_tail"]
    assert doc["recommended"]["treatment"] == by_settings["2", "600"]["name"]
