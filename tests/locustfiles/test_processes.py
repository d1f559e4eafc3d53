"""`--processes auto`: the planned event rate, the cost per event, the choice and
its reason, from the scenario files themselves and a real run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from loadruns import scenario_file, slogate, summary

from slogate import scenarios
from slogate.engines.exact import ExactEngine
from slogate.locustfiles.event_cost import CHUNK_GAP_NS, chat_stream, parse_stream
from slogate.locustfiles.processes import (
    ASSUMED_ITL_S,
    measure_cost_per_event_us,
    plan_processes,
    planned_event_rate,
)


def test_closed_loop_plans_one_event_per_token_at_the_assumed_itl_less_think_time(tmp_path):
    # exact-chat: 16 output tokens, no think time -> each user streams 1/ITL events/s
    busy = scenarios.load("tests/data/exact-chat.yaml", {"users": 100})
    assert planned_event_rate(busy) == pytest.approx(100 / ASSUMED_ITL_S)
    thinking = scenario_file(tmp_path, "exact-chat", workload={"think_time_s": 0.16, "turns": 2})
    # 16 tokens take 0.16 s at the assumed ITL; as long again thinking halves the rate
    assert planned_event_rate(scenarios.load(thinking, {"users": 100})) == pytest.approx(
        100 / ASSUMED_ITL_S / 2
    )


def test_open_loop_plans_rate_times_output_tokens_at_the_busiest_stage(tmp_path):
    # exact-open: 4 output tokens a request
    assert planned_event_rate(scenarios.load("tests/data/exact-open.yaml", {"rate": 50})) == 200
    staged = scenario_file(
        tmp_path,
        "exact-open",
        load={
            "duration": "10s",
            "stages": [
                {"name": "low", "duration": "5s", "rate": {"rps": 10}},
                {"name": "peak", "duration": "5s", "rate": {"rps": 300}},
            ],
        },
    )
    assert planned_event_rate(scenarios.load(staged, {})) == 1200


@pytest.mark.parametrize(
    ("users", "cost_us", "cores", "expected"),
    [(100, 10.0, 8, 1), (1024, 10.0, 8, 3), (1024, 10.0, 2, 2), (1024, 2.0, 8, 1)],
)
def test_the_choice_keeps_each_process_under_half_a_core(users, cost_us, cores, expected):
    loaded = scenarios.load("tests/data/exact-chat.yaml", {"users": users})
    plan = plan_processes(loaded, cost_us=cost_us, cores=cores)
    need = users / ASSUMED_ITL_S * cost_us / 1e6
    assert plan.processes == expected
    assert plan.cores == pytest.approx(need)
    assert plan.reason.startswith("auto:")
    assert f"-> {expected}" in plan.reason
    assert ("cores available" in plan.reason) == (math.ceil(need / 0.5) > cores)


def test_the_cost_per_event_is_measured_on_this_machine():
    cost = measure_cost_per_event_us()
    assert 0.1 < cost < 1000


@pytest.mark.slow
def test_a_run_records_the_choice_and_its_cpu(tmp_path):
    with ExactEngine({"ttft_ms": 5, "itl_ms": 5}) as engine:
        out = str(tmp_path / "out")
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", engine.url,
                       "--users", "2", "--duration", "4s", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "slogate: auto:" in done.stdout
    generator = summary(tmp_path / "out")["generator"]
    assert generator["processes"] == 1
    assert generator["processes_reason"].startswith("auto: up to 200 output events/s")
    assert generator["processes_reason"].endswith("-> 1")
    local = generator["per_process"]["local"]
    assert local["cpu_s"] > 0 and 0 < local["cpu_share"] < 2


def test_processes_must_be_auto_or_a_positive_number():
    done = slogate("run", "tests/data/exact-chat.yaml", "--processes", "0")
    assert done.returncode == 2
    assert "--processes" in done.stderr and "expected an integer from 1 to" in done.stderr


def test_worker_processes_get_a_master_port_of_their_own():
    """Locust's master listens on 5557 by default: two runs on one machine would
    share one master (workers of one run counted in the other)."""
    from slogate.cli import build_parser
    from slogate.run_cmd import locust_command

    args = build_parser().parse_args(["run", "tests/data/exact-chat.yaml"])
    one = locust_command(args, Path("s.yaml"), "http://h", Path("out"), (1, "one"))
    assert "--master-bind-port" not in one and "--processes" not in one
    cmd = locust_command(args, Path("s.yaml"), "http://h", Path("out"), (2, "two"))
    port = cmd[cmd.index("--master-bind-port") + 1]
    assert cmd[cmd.index("--master-port") + 1] == port != "5557"
    assert cmd[cmd.index("--processes") + 1] == "2"


def test_the_calibration_stream_parses_as_an_engine_stream():
    record = parse_stream(chat_stream(5, prompt_tokens=7), "c")
    assert record.ok and record.error is None
    assert len(record.chunk_ns) == 5  # the role chunk carries no output
    assert (record.output_tokens, record.input_tokens) == (5, 7)
    assert record.chunk_ns[1] - record.chunk_ns[0] == CHUNK_GAP_NS
