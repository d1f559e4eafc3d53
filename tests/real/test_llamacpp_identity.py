"""Request identity against llama.cpp (docs/engines.md, "Request ids"): this
llama-server neither uses nor logs ``X-Request-Id`` or ``traceparent`` (its
binary holds neither name) and names each reply with an id of its own
(``chatcmpl-`` and 32 random characters), which its ``--verbose`` log shows.
So the run records slogate's ids and, beside them, llama.cpp's, and every
one of those is found in the engine's log."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from identified import identified_with_log
from llamaservers import llama_server
from loadruns import scenario_file, slogate

from slogate.engines.llamacpp import LlamaServer

pytestmark = [pytest.mark.llamacpp, pytest.mark.xdist_group("llamacpp"), pytest.mark.slow]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(tmp_path_factory, 2, ("--verbose",)) as server:
        yield server


def test_llama_cpp_logs_its_own_reply_id_which_the_run_keeps_beside_slogates(
    llama: LlamaServer, tmp_path: Path
) -> None:
    scenario = scenario_file(
        tmp_path, "exact-chat",
        workload={"input_tokens": 32, "output_tokens": 4},
        load={"users": 1, "spawn_rate": 1},
        slo={"ttft_ms": None, "itl_ms": None},  # a loaded CPU's latency is no claim here
    )  # fmt: skip
    out = tmp_path / "out"
    # --verbose logs every step: a request takes seconds on a shared CPU
    done = slogate("run", str(scenario), "--host", llama.url, "--duration", "40s",
                   "--warmup", "0s", "--out", str(out), "--save-requests")  # fmt: skip
    assert done.returncode in (0, 4), done.stderr[-3000:]  # 4: too few to bound a p50
    lines, log = identified_with_log(out, llama.log_path)
    for line in lines:
        assert re.fullmatch(r"chatcmpl-\w{32}", line["engine_request_id"])
        assert f'"id":"{line["engine_request_id"]}"' in log
        assert line["request_id"] not in log  # what docs/engines.md says llama.cpp does
    assert len({line["engine_request_id"] for line in lines}) == len(lines)
