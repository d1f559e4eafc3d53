"""Request identity against the CPU vLLM (docs/engines.md, "Request ids"):
vLLM 0.32 names its reply after the request's ``X-Request-Id``
(``chatcmpl-<id>``, ``cmpl-<id>``) and, with ``--enable-log-requests``, logs
that name as each request arrives (a completion's with its prompt's index,
``cmpl-<id>-0``); so every saved request's id is found both
in the reply and in the engine's own log."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from identified import identified_with_log
from loadruns import ROOT, scenario_file
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.engines.vllm import VllmServer

pytestmark = [*VLLM_MARKS, pytest.mark.slow]
PREFIXES = {"chat": "chatcmpl-", "completions": "cmpl-"}
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm_server(tmp_path_factory, extra=("--enable-log-requests",)) as server:
        yield server


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_vllm_names_and_logs_each_request_by_the_id_slogate_sent(
    vllm: VllmServer, api: str, tmp_path: Path
) -> None:
    scenario = scenario_file(
        tmp_path, "exact-chat", api=api,
        workload={"input_tokens": 32, "output_tokens": 8},
        load={"users": 2, "spawn_rate": 2},
        timeouts={"first_token": "60s", "stall": "30s"},
        slo={"ttft_ms": None, "itl_ms": None},  # a loaded CPU's latency is no claim here
    )  # fmt: skip
    out = tmp_path / "out"
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(scenario), "--host", vllm.url, "--duration", "12s",
           "--warmup", "0s", "--out", str(out), "--save-requests"]  # fmt: skip
    done = run_on_generator_cores(vllm, cmd, RUN_TIMEOUT_S, ROOT)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    lines, log = identified_with_log(out, vllm.log_path)
    for line in lines:
        assert line["engine_request_id"] == PREFIXES[api] + line["request_id"]
        # a completions request logs each prompt of its batch: cmpl-<id>-0
        assert f"Received request {line['engine_request_id']}" in log
    assert len({line["trace_id"] for line in lines}) == 1  # single turns: the run's trace
