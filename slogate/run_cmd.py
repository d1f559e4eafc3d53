"""`slogate run`: validate, start the simulated engine if no host, run Locust headless.

The run itself is a plain `locust -f locustfiles/run.py` process, so that
`slogate run` and a hand-written Locust command produce the same results
folder and exit code. Locust runs in its own session: SIGINT or SIGTERM here
is passed on as SIGTERM to its master alone, which then stops its workers,
collects their data and writes a results folder marked incomplete. SIGKILL
here cannot be passed on: Locust watches its parent and stops the same way
when it is gone. Locust killed itself leaves its last checkpoint, judged here.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from slogate import locustfiles, scenarios
from slogate.analysis.slo import EXIT_CODES, EXIT_CONFIG, EXIT_INVALID
from slogate.locustfiles.processes import plan_processes
from slogate.scenarios.loader import resolve
from slogate.scenarios.model import Scenario
from slogate.target import TargetError, target_engine
from slogate.worker import master_command

RUN_LOCUSTFILE = Path(locustfiles.__file__).resolve().parent / "run.py"
# Flags without a value, passed on when given.
SWITCHES = {"--save-requests": "save_requests", "--locust-stats": "locust_stats"}


def scenario_overrides(args: argparse.Namespace) -> dict:
    given = {
        "users": args.users,
        "spawn_rate": args.spawn_rate,
        "rate": args.rate,
        "duration": args.duration,
        "warmup": args.warmup,
        "seed": args.seed,
    }
    return {k: v for k, v in given.items() if v is not None}


def choose_processes(args: argparse.Namespace, loaded: list[Scenario]) -> tuple[int, str]:
    """``--processes N`` as given, or what ``auto`` plans for these scenarios;
    a master's are its workers."""
    if args.master:
        return args.expect_workers, f"--master, {args.expect_workers} workers expected"
    if args.processes != "auto":
        return args.processes, f"--processes {args.processes}"
    plan = plan_processes(loaded)
    return plan.processes, plan.reason


def locust_command(
    args: argparse.Namespace, scenario: Path, host: str, out: Path, processes: tuple[int, str]
) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), "--host", host]
    cmd += ["--scenario", str(scenario), "--out", str(out)]
    if not args.web_ui:
        cmd += ["--headless", "--only-summary"]
    cmd += [flag for flag, on in SWITCHES.items() if getattr(args, on)]
    options = {
        "-u": args.users,
        "-r": args.spawn_rate,
        "--slogate-duration": args.duration,  # seconds, fractions kept (-t takes whole ones)
        "--processes": processes[0] if processes[0] > 1 and not args.master else None,
        "--slogate-processes-reason": processes[1],
        "--rate": args.rate,
        "--seed": args.seed,
        "--warmup": args.warmup,
        "--baseline": args.baseline,
        "--push-metrics": args.push_metrics,
        "--max-lag-ms": args.max_lag_ms,
        "--metrics-url": args.metrics_url,
        "--dcgm-url": args.dcgm_url,
        "--selftest": args.selftest,
        "--gpu-price-per-hour": args.gpu_price_per_hour,
        "--gpus": args.gpus,
    }
    for flag, value in options.items():
        if value is not None:
            cmd += [flag, str(value)]
    if args.master:
        cmd += master_command(args)
    elif processes[0] > 1:
        cmd += worker_link()
    return cmd


def worker_link() -> list[str]:
    """Master and ``--processes`` workers meet on a free loopback port. Locust's
    fixed default (5557, on every interface) makes two runs on one machine (CI
    jobs on one runner) fail to bind or, worse, swap workers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]


def run_locust(cmd: list[str]) -> int:
    child = subprocess.Popen(cmd, start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args: argparse.Namespace) -> int:
    scenario = resolve(args.scenario)
    try:
        loaded = scenarios.load(scenario, scenario_overrides(args))
    except scenarios.ScenarioError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    processes = choose_processes(args, loaded)
    print(f"slogate: {processes[1]}", flush=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("results") / f"{stamp}-{loaded[0].name}"
    try:
        profile = args.profile or (None if args.host else loaded[0].engine_profile)
        with target_engine(args.host, profile, loaded[0].request.api_key_env) as host:
            if not args.host:
                print(f"slogate: no --host: started the simulated engine at {host}", flush=True)
            code = run_locust(locust_command(args, scenario, host, out, processes))
    except TargetError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return error.code
    if code not in EXIT_CODES.values():
        return died(code, out)
    return code


def died(code: int, out: Path) -> int:
    """Locust ended outside the exit-code contract (killed by a signal, out of
    memory): the run failed (3). Its last checkpoint, if one was written, is
    judged into a report marked incomplete."""
    how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
    print(f"slogate: run failed: the Locust process {how}", file=sys.stderr)
    from slogate.reports import rerender

    try:
        rerender(out)
    except (OSError, ValueError) as error:
        print(f"slogate: no results to judge in {out}: {error}", file=sys.stderr)
    else:
        print(f"slogate: report of the data as of its last checkpoint: {out / 'report.html'}")
    return EXIT_INVALID
