"""`slogate run`: validate, start the simulated engine if no host, run Locust headless.

The run itself is a plain `locust -f locustfiles/run.py` process, so that
`slogate run` and a hand-written Locust command produce the same results
folder and exit code. Locust runs in its own session: SIGINT or SIGTERM here
is passed on as SIGTERM to its master alone, which then stops its workers,
collects their data and writes a results folder marked incomplete.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from slogate import locustfiles, scenarios
from slogate.analysis.slo import EXIT_CONFIG
from slogate.scenarios.loader import resolve
from slogate.target import TargetError, target_engine

RUN_LOCUSTFILE = Path(locustfiles.__file__).resolve().parent / "run.py"


def scenario_overrides(args: argparse.Namespace) -> dict:
    given = {
        "users": args.users,
        "spawn_rate": args.spawn_rate,
        "rate": args.rate,
        "duration": args.duration,
        "seed": args.seed,
    }
    return {k: v for k, v in given.items() if v is not None}


def locust_command(args: argparse.Namespace, scenario: Path, host: str, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), "--host", host]
    cmd += ["--scenario", str(scenario), "--out", str(out)]
    if not args.web_ui:
        cmd += ["--headless", "--only-summary"]
    options = {
        "-u": args.users,
        "-r": args.spawn_rate,
        "--slogate-duration": args.duration,  # seconds, fractions kept (-t takes whole ones)
        "--processes": args.processes,
        "--rate": args.rate,
        "--seed": args.seed,
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
    return cmd


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
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("results") / f"{stamp}-{loaded[0].name}"
    try:
        with target_engine(args.host, args.profile) as host:
            if not args.host:
                print(f"slogate: no --host: started the simulated engine at {host}", flush=True)
            code = run_locust(locust_command(args, scenario, host, out))
    except TargetError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return error.code
    report = out / "report.html"
    if report.exists():
        print(f"slogate: report {report} (exit {code})")
    return code
