"""Starting the vLLM servers the vllm tests run against, one way for all."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from enginewire import require_engine

from slogate.engines.vllm import (
    DEFAULT_STARTUP_TIMEOUT_S,
    Runner,
    VllmServer,
    VllmServerConfig,
    generator_cores,
    group_alive,
    locate,
)

SKIP_ENV = "SLOGATE_SKIP_VLLM"
REAP_S = 5.0
# One worker runs them all (a second vLLM would share the engine's core); the
# first test of a file also waits for its server. The servers run eager
# (--enforce-eager): compiling the model on one core of a busy 2-core machine
# took 4.5 minutes once and did not finish in 10 twice (load average 15 to 24).
VLLM_MARKS = [
    pytest.mark.vllm,
    pytest.mark.xdist_group("vllm"),
    pytest.mark.timeout(DEFAULT_STARTUP_TIMEOUT_S + 300),
]


def require_vllm() -> None:
    """``SLOGATE_SKIP_VLLM=1`` skips the test; a missing install fails it, saying
    how to install it (`make vllm`)."""
    require_engine("vLLM", SKIP_ENV, locate)


@contextmanager
def vllm_server(
    tmp: pytest.TempPathFactory, runner: Runner = "generate", extra: tuple[str, ...] = ()
) -> Iterator[VllmServer]:
    """A serving vLLM (eager) with its log in a temporary folder, ``extra``
    arguments after slogate's; once stopped, none of its processes (the API
    server, its engine core and worker) may be left. Without the install, the
    test is skipped or failed as :func:`require_vllm` says."""
    require_vllm()
    log = tmp.mktemp(f"vllm-{runner}") / "server.log"
    config = VllmServerConfig(runner=runner, enforce_eager=True, extra_args=extra)
    server = VllmServer(config, log_path=log)
    with server:
        group = server.pid
        yield server
    assert group is not None
    # the engine core and worker, killed with the group, are reaped by init a moment later
    deadline = time.monotonic() + REAP_S
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(group), f"vLLM processes left in group {group} after {REAP_S:g} s"


def run_on_generator_cores(
    server: VllmServer, cmd: Sequence[str], timeout_s: float, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Run a load generator's command on the cores the engine does not use:
    sharing them, the generator waits for a core and the run is invalid."""
    cores = set(generator_cores(server.config.cores))
    return subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=cwd,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
