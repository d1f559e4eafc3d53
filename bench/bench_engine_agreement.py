"""The client's TTFT and ITL against the engine's own log, whole runs
(docs/benchmarks-history.md, "Client TTFT against the embedded engine's own, per API", and
"Client against vLLM's own histograms").

    .venv/bin/python bench/bench_engine_agreement.py [--apis chat responses messages] \
        [--duration 40s]
    .venv/bin/python bench/bench_engine_agreement.py --vllm [--vllm-url URL] \
        [--apis chat completions responses] [--duration 60s] [--repeats 3] \
        [--api-server-with-generator]

Runs ``scenarios/chat.yaml`` (32 users) once per API, the copy changing only
``api`` and ``name``, against the embedded engine with no warm-up, and prints
summary.json's ``engine_latency``: the client's mean TTFT and ITL beside the
engine's histograms over the same window. Target: client minus engine within
1 ms for both (exit 1 otherwise).

With ``--vllm`` the engine is the CPU vLLM (``make vllm``; started on the last
core, the generator on the others, unless ``--vllm-url`` names a running one)
and the load is 4 streams of fixed lengths (128 tokens in, 64 out, one turn, no
think time). Target: ITL within 1 ms, TTFT within 5 ms: vLLM's TTFT clock
starts when its API server has parsed the request and stops when its output
processor has the token, so the HTTP parse, the tokenizer's queue and the
response write lie outside it.

``--api-server-with-generator`` moves vLLM's API server (its HTTP front,
tokenizer and output processor) onto the generator's cores once it serves;
its engine core and model worker keep the engine's core. It tests whether the
API server's wait for the core the worker computes on explains the TTFT
difference (that wait would be outside vLLM's clock and inside the
client's). Measured quiet, it does not: the difference moved as much between
two runs of one placement as between placements (BENCHMARKS.md).

Each run drains (``--drain``): the requests in flight at its end finish, so
the engine's histograms and the client hold the same requests (cut off, the
engine would count first tokens the client never completed).

Take it on a quiet machine: a process preempted between the engine's clock and
its write, or between the kernel's stamp and the client's read, moves the
difference by what the machine's other work took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOUND_MS = {"ttft": 1.0, "itl": 1.0}
VLLM_BOUND_MS = {"ttft": 5.0, "itl": 1.0}
# 4 streams of fixed lengths: what the engine's histograms and the client time
# is then the same set of requests, none cut short by its end.
VLLM_WORKLOAD = {
    "kind": "chat",
    "text": "prose",
    "input_tokens": 128,
    "output_tokens": 64,
    "turns": 1,
    "think_time_s": 0,
}
VLLM_USERS = 4
# the requests in flight at the end finish: the engine timed no request the client did not
DRAIN = "120s"
DEFAULT_APIS = ["chat", "responses", "messages"]


def scenario_data(api: str, vllm: bool) -> dict:
    data = yaml.safe_load((ROOT / "scenarios" / "chat.yaml").read_text())
    data.update(api=api, name=f"chat-{api}")
    if vllm:
        data["workload"] = VLLM_WORKLOAD
        data["load"] = {**data["load"], "users": VLLM_USERS, "spawn_rate": VLLM_USERS}
        data["timeouts"] = {"first_token": "120s", "stall": "60s"}
    return data


def one(api: str, duration: str, folder: Path, host: str | None = None) -> dict:
    scenario = folder / f"chat-{api}.yaml"
    scenario.write_text(yaml.safe_dump(scenario_data(api, host is not None)))
    out = folder / f"{api}-{len(list(folder.iterdir()))}"
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--duration", duration,
               "--warmup", "0s", "--drain", DRAIN, "--out", str(out)]  # fmt: skip
    if host is not None:
        command += ["--host", host]
    before = os.getloadavg()[0]
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = json.loads((out / "summary.json").read_text())
    latency = summary["engine_latency"]
    return {
        "api": api,
        "verdict": summary["verdict"],
        "ttft": latency["ttft_ms"],
        "itl": latency["itl_ms"],
        "cancelled_at_stop": summary["run"]["cancelled_at_stop"],
        "load_average": [round(before, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--apis", nargs="+", default=None)
    parser.add_argument("--duration", default="40s")
    parser.add_argument("--vllm", action="store_true", help="against the CPU vLLM")
    parser.add_argument("--vllm-url", default=None, help="a running vLLM (implies --vllm)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--api-server-with-generator",
        action="store_true",
        help="vLLM's API server on the generator's cores (its engine core and worker stay)",
    )
    args = parser.parse_args()
    if args.api_server_with_generator and (args.vllm_url or not args.vllm):
        parser.error("--api-server-with-generator needs --vllm and no --vllm-url")
    vllm = args.vllm or args.vllm_url is not None
    apis = args.apis or (["chat", "completions", "responses"] if vllm else DEFAULT_APIS)
    bounds = VLLM_BOUND_MS if vllm else BOUND_MS
    rows = []
    with (
        engine(vllm, args.vllm_url, args.api_server_with_generator) as host,
        tempfile.TemporaryDirectory(prefix="bench-agreement-") as tmp,
    ):
        for _ in range(args.repeats):
            for api in apis:
                row = one(api, args.duration, Path(tmp), host)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("| API | TTFT client / engine mean ms | requests client / engine | difference ms "
          "| ITL difference ms | load average |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        t, i = r["ttft"], r["itl"]
        print(
            f"| {r['api']} | {t['client_mean']:.2f} / {t['mean']:.2f} | {t['client_count']} / "
            f"{t['count']} | {t['client_minus_engine']:+.2f} | {i['client_minus_engine']:+.3f} "
            f"| {r['load_average'][0]} to {r['load_average'][1]} |"
        )
    within = all(abs(r[m]["client_minus_engine"]) <= bounds[m] for r in rows for m in bounds)
    sys.exit(0 if within else 1)


@contextmanager
def engine(vllm: bool, url: str | None, api_server_moved: bool = False) -> Iterator[str | None]:
    """The base URL of the engine to load: None for the embedded one; the CPU
    vLLM started on its own core (this process and its runs move to the
    others, and with ``api_server_moved`` its API server too) unless ``url``
    names a running one."""
    if not vllm or url is not None:
        yield url
        return
    from slogate.engines.vllm import VllmServer, generator_cores

    with VllmServer() as server:
        cores = set(generator_cores(server.config.cores))
        os.sched_setaffinity(0, cores)
        if api_server_moved and server.pid is not None:
            move_threads(server.pid, cores)
        yield server.url


def move_threads(pid: int, cores: set[int]) -> None:
    """Every thread of process ``pid`` onto ``cores`` (its children stay: vLLM's
    engine core and worker are child processes of its API server)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cores)


if __name__ == "__main__":
    main()
