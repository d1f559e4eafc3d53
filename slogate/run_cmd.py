"""`slogate run`: validate, start the simulated engine if no host, run Locust headless.

The run itself is a plain `locust -f locustfiles/run.py` process, so that
`slogate run` and a hand-written Locust command produce the same results
folder and exit code. Waiting for it, passing signals on and judging its
death are :mod:`slogate.waiter`'s, which this process becomes (exec) when the
host is given.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from slogate import locustfiles, scenarios, waiter
from slogate.analysis.exitcodes import EXIT_CONFIG
from slogate.analysis.history import results_folder, unwritable
from slogate.locustfiles.options import forwarded, scenario_overrides
from slogate.locustfiles.processes import plan_processes
from slogate.locustfiles.web_access import AUTH_ENV, exposure_problem
from slogate.scenarios.loader import resolve
from slogate.scenarios.model import Scenario
from slogate.target import TargetError, target_engine

RUN_LOCUSTFILE = Path(locustfiles.__file__).resolve().parent / "run.py"


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
    if args.web_ui:
        cmd += ["--web-host", args.web_host] + ["--web-login"] * bool(args.web_auth)
    else:
        cmd += ["--headless", "--only-summary"]
    cmd += [*forwarded(args), "--slogate-processes-reason", processes[1]]
    if not args.master and processes[0] > 1:
        cmd += ["--processes", str(processes[0]), *worker_link()]
    return cmd


def worker_link() -> list[str]:
    """Master and ``--processes`` workers meet on a free loopback port. Locust's
    fixed default (5557, on every interface) makes two runs on one machine (CI
    jobs on one runner) fail to bind or, worse, swap workers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-port", port]


def run(args: argparse.Namespace) -> int:
    scenario = resolve(args.scenario)
    try:
        loaded = scenarios.load(scenario, scenario_overrides(args, cli=True))
    except scenarios.ScenarioError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    if args.web_ui:
        problem = exposure_problem(args.web_host, args.web_auth, args.web_insecure)
        if problem is not None:
            print(f"slogate: {problem}", file=sys.stderr)
            return EXIT_CONFIG
        if args.web_auth:
            os.environ[AUTH_ENV] = args.web_auth  # Locust inherits it; no command line shows it
    processes = choose_processes(args, loaded)
    print(f"slogate: {processes[1]}", flush=True)
    out = results_folder(loaded[0].name, args.out)
    problem = unwritable(out)
    if problem:
        print(f"slogate: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        profile = args.profile or (None if args.host else loaded[0].engine_profile)
        with target_engine(args.host, profile, loaded[0].request.api_key_env) as host:
            if not args.host:
                print(f"slogate: no --host: started the simulated engine at {host}", flush=True)
            cmd = locust_command(args, scenario, host, out, processes)
            if args.host:
                waiter.hand_over(cmd, out)  # nothing here is needed while Locust runs
            return waiter.wait(cmd, out)  # this process owns the simulated engine
    except TargetError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return error.code
