"""Whole `slogate run`s on the built-in reasoning scenario and on the chat
scenario spoken over the Chat, Responses and Messages APIs, against the
simulated engine: the verdict, the exit code, the metrics each must produce,
and TTFT and ITL that agree with what the engine logged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from loadruns import ROOT, slogate, summary

from slogate import scenarios

pytestmark = pytest.mark.slow
PERCENTILES = ("p50", "p90", "p95", "p99", "max")
EXIT = {"pass": 0, "fail": 1, "invalid": 3, "inconclusive": 4}


def judged(
    tmp_path: Path, scenario: str, name: str, duration: str, out_name: str = "out"
) -> tuple[dict, dict]:
    """Run ``scenario`` into ``tmp_path/out``; (the summary, the block of scenario
    ``name``), once the exit code is checked against the verdict."""
    out = tmp_path / out_name
    done = slogate("run", scenario, "--duration", duration, "--out", str(out))
    s = summary(out)
    assert done.returncode == EXIT[s["verdict"]], done.stderr[-3000:]
    return s, s["scenarios"][name]


AGREEMENT_UNDER_LOAD_MS = 2.0


def over_api(
    tmp_path: Path,
    builtin: str,
    api: str,
    workload: dict[str, object] | None = None,
    **load: object,
) -> tuple[str, str]:
    """(what to run, the scenario's name): the built-in scenario, or a copy of
    it that speaks another API (and takes these ``workload`` and ``load`` settings)."""
    if api == "chat" and not load and not workload:
        return builtin, builtin
    data = yaml.safe_load((ROOT / "scenarios" / f"{builtin}.yaml").read_text())
    data.update(api=api, name=f"{builtin}-{api}")
    data["workload"].update(workload or {})
    data["load"].update(load)
    path = tmp_path / f"{builtin}-{api}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path), data["name"]


def test_reasoning_scenario_reports_ttfa_above_ttft(tmp_path: Path) -> None:
    _, r = judged(tmp_path, "reasoning", "reasoning", "20s")
    assert r["requests"]["ok"] > 5 and r["requests"]["failed"] == 0
    m = r["metrics"]
    for p in PERCENTILES:
        assert m["ttfa_ms"][p] > m["ttft_ms"][p], p
    assert m["reasoning_ms"]["count"] == m["ttfa_ms"]["count"]
    assert r["tokens"]["reasoning"] > 0 and r["tokens"]["answer"] > 0
    assert r["tokens"]["reasoning"] + r["tokens"]["answer"] == r["tokens"]["output"]
    assert {e["metric"] for e in r["slo"]} >= {"ttfa_ms", "answer_itl_ms", "answer_tpot_ms"}
    assert "Reasoning and answer" in (tmp_path / "out" / "report.html").read_text()


# One-turn conversations of fixed lengths: as many streams at once as chat's
# own (about 10 of 32 users), but first tokens that all take about as long.
# The engine logs the first tokens of the requests the run's end cuts off, the
# client never times them; in chat's own conversations those are late turns
# with long histories, and their few move the engine's mean by a millisecond
# or two (docs/benchmarks-history.md, "Client TTFT against the embedded engine's own").
SAME_LENGTHS = {
    "input_tokens": {"dist": "fixed", "value": 1000},
    "output_tokens": {"dist": "fixed", "value": 128},
    "turns": {"dist": "fixed", "value": 1},
}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_chat_scenario_over_each_api_agrees_with_the_engines_log(tmp_path: Path, api: str) -> None:
    """The chat scenario spoken over each API at its 32 users: the same verdict
    semantics, and TTFT and ITL within 1 ms of what the embedded engine logged
    over the same window (summary.json's ``engine_latency``)."""
    scenario, name = over_api(tmp_path, "chat", api, SAME_LENGTHS, warmup="0s")
    s, c = judged(tmp_path, scenario, name, "20s")
    if s["verdict"] == "invalid" and "waiting for a core" in " ".join(s["invalid_reasons"]):
        # the run voided itself: its loop waited for a core another test worker
        # held (seen in a clean-clone CI run); measured again, once
        s, c = judged(tmp_path, scenario, name, "20s", "again")
    assert s["verdict"] in ("pass", "inconclusive")  # a 20 s run may not bound p99
    assert c["api"] == api
    assert c["requests"]["failed"] == 0 and c["requests"]["ok"] > 100
    assert c["tokens"]["count_method"] == "usage"
    assert c["tokens"]["input"] > 0
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert c["metrics"][metric]["count"] > 0
    assert "ttfa_ms" not in c["metrics"]  # no reasoning: no repeated rows
    declared = scenarios.load("chat")[0].slo.thresholds
    assert [(e["metric"], e["stat"]) for e in c["slo"]] == [(t.metric, t.stat) for t in declared]
    latency = s["engine_latency"]
    assert latency["engine"] == "vllm"
    ttft, itl = latency["ttft_ms"], latency["itl_ms"]
    # the engine also logged the first tokens of the requests cut off at the end
    assert (
        ttft["client_count"]
        <= ttft["count"]
        <= ttft["client_count"] + s["run"]["cancelled_at_stop"]
    )
    # within 1 ms on a quiet machine (bench/bench_engine_agreement.py), here beside
    # other tests' processes, each of which can preempt the engine between its clock
    # and its write, and within the run's own error bound for a mean (its loop's mean
    # stall, by which a chunk can be read late: 1.96 ms in a CI run whose hypervisor
    # took 14% of the machine). Either sign: the engine's mean also holds the first
    # tokens of the requests cut off at the stop (a CI run measured -0.21 ms with 12)
    own_error = s["generator"]["error_bound_ms"]
    for metric, agreement in (("ttft_ms", ttft), ("itl_ms", itl)):
        bound = AGREEMENT_UNDER_LOAD_MS + own_error[metric]["mean"]
        assert abs(agreement["client_minus_engine"]) <= bound, (metric, agreement, bound)


def test_embeddings_scenario_gates_request_latency(tmp_path: Path) -> None:
    _, e = judged(tmp_path, "embeddings", "embeddings", "15s")
    assert e["api"] == "embeddings"
    assert e["requests"]["ok"] > 20 and e["requests"]["failed"] == 0
    assert e["metrics"]["e2e_ms"]["count"] == e["requests"]["ok"]
    assert e["metrics"]["ttft_ms"]["count"] == 0  # nothing streamed
    inputs = e["tokens"]["per_request"]["inputs"]
    assert inputs["min"] >= 1 and inputs["max"] <= 16
    assert e["throughput"]["input_tokens_per_s"] > 0
    assert {x["metric"] for x in e["slo"]} == {"e2e_ms", "error_rate", "input_tokens_per_s"}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_agent_scenario_records_sessions(tmp_path: Path, api: str) -> None:
    _, a = judged(tmp_path, *over_api(tmp_path, "agent", api), "20s")
    assert a["api"] == api
    assert a["requests"]["failed"] == 0
    sessions = a["sessions"]
    assert sessions["count"] > 5 and sessions["answered"] == sessions["count"]
    # the engine calls 1 to 3 tools per session: 2 to 4 requests each
    assert sessions["steps"]["min"] >= 2 and sessions["steps"]["max"] <= 4
    assert sessions["tool_calls"] > sessions["count"] // 2  # at least one per session
    m = a["metrics"]
    assert m["session_ms"]["count"] == sessions["answered"]
    assert m["session_ms"]["p50"] > m["e2e_ms"]["p50"]  # several requests and tool waits
    assert m["ttftc_ms"]["count"] == a["tokens"]["tool_call_requests"] > 0
    assert {e["metric"] for e in a["slo"]} >= {"session_ms", "session_steps", "ttftc_ms"}


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_vision_scenario_counts_image_tokens(tmp_path: Path, api: str) -> None:
    _, v = judged(tmp_path, *over_api(tmp_path, "vision", api), "15s")
    assert v["api"] == api
    assert v["requests"]["ok"] > 5 and v["requests"]["failed"] == 0
    # two 1024x768 images are 2 x 37 x 28 prompt tokens the text plan does not hold
    assert (
        v["tokens"]["input"]
        > v["tokens"]["intended_input"] + 2 * 37 * 28 * v["requests"]["ok"] // 2
    )
    assert v["metrics"]["ttft_ms"]["count"] == v["requests"]["ok"]
