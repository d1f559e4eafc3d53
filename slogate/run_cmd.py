"""`slogate run`: validate, start the simulated engine if no host, run Locust headless.

The run itself is a plain `locust -f locustfiles/run.py` process, so that
`slogate run` and a hand-written Locust command produce the same results
folder and exit code. Locust runs in its own session: SIGINT or SIGTERM here
is passed on as SIGTERM to its master alone, which then stops its workers,
collects their data and writes a results folder marked incomplete.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import locustfiles
import scenarios
from analysis.slo import EXIT_CONFIG, EXIT_INVALID
from locustfiles.engine_info import EngineUnreachable, discover
from scenarios.loader import resolve

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


@contextlib.contextmanager
def engine_for(args: argparse.Namespace) -> Iterator[str]:
    """The engine to load: the given host, or a simulated engine started here."""
    if args.host:
        yield args.host
        return
    from simengine.launch import start_engine

    kwargs = {} if args.profile is None else {"profile": args.profile}
    with start_engine(**kwargs) as engine:
        print(f"slogate: no --host: started the simulated engine at {engine.url}", flush=True)
        yield engine.url


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
    if args.host and args.profile:
        print("slogate: --profile chooses the simulated engine; it has no effect with --host",
              file=sys.stderr)  # fmt: skip
        return EXIT_CONFIG
    scenario = resolve(args.scenario)
    try:
        loaded = scenarios.load(scenario, scenario_overrides(args))
    except scenarios.ScenarioError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else Path("results") / f"{stamp}-{loaded[0].name}"
    with engine_for(args) as host:
        try:
            discover(host, timeout=10.0)
        except EngineUnreachable as error:
            print(f"slogate: {error}", file=sys.stderr)
            return EXIT_INVALID
        code = run_locust(locust_command(args, scenario, host, out))
    report = out / "report.html"
    if report.exists():
        print(f"slogate: report {report} (exit {code})")
    return code
