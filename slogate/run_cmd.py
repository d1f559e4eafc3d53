"""`slogate run`: validate, start the simulated engine if no host, run Locust headless.

The run itself is a plain `locust -f locustfiles/run.py` process, so that
`slogate run` and a hand-written Locust command produce the same results
folder and exit code. Waiting for it, passing signals on and judging its
death are :mod:`slogate.waiter`'s, which this process becomes (exec) when the
host is given. ``--repeat N`` runs that Locust command N times, each into a
folder of its own, and judges the set on their spread
(:mod:`slogate.studies.repeats`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate import locustfiles, scenarios, waiter
from slogate.analysis.documents.history import results_folder, unwritable
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
from slogate.client.endpoints import check_endpoints, parse_endpoint
from slogate.locustfiles.options import forwarded, scenario_overrides
from slogate.locustfiles.processes import plan_processes
from slogate.locustfiles.web_access import AUTH_ENV, exposure_problem
from slogate.scenarios.loader import resolve
from slogate.scenarios.model import Scenario
from slogate.target import TargetError, target_engine

if TYPE_CHECKING:  # pydantic: imported only when a set is judged
    from slogate.analysis.documents.contracts import Repeats

RUN_LOCUSTFILE = Path(locustfiles.__file__).resolve().parent / "run.py"
COOL_DOWN_POLL_S = 0.1  # how soon a cool-down ends once a stop is heard


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
    for endpoint in getattr(args, "endpoints", ()):
        cmd += ["--endpoint", endpoint]
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


def take_endpoints(args: argparse.Namespace) -> None:
    """``--host`` given several times names several endpoints (each passed on
    as ``--endpoint``; the first is Locust's host); once, it is the host.
    ValueError for two endpoints of one name."""
    hosts = args.host or []
    endpoints = [parse_endpoint(text) for text in hosts]
    check_endpoints(endpoints)
    args.endpoints = hosts if len(hosts) > 1 else []
    args.host = endpoints[0].url if endpoints else None


def run(args: argparse.Namespace) -> int:
    scenario = resolve(args.scenario)
    try:
        take_endpoints(args)
    except ValueError as error:
        print(f"slogate: --host: {error}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        loaded = scenarios.load(scenario, scenario_overrides(args, cli=True))
        baseline = repeat_baseline(args)
    except (scenarios.ScenarioError, ValueError) as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    problem = repeat_problem(args)
    if problem is None and args.web_ui:
        problem = exposure_problem(args.web_host, args.web_auth, args.web_insecure)
    if problem is not None:
        print(f"slogate: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    if args.web_ui and args.web_auth:
        os.environ[AUTH_ENV] = args.web_auth  # Locust inherits it; no command line shows it
    processes = choose_processes(args, loaded)
    print(f"slogate: {processes[1]}", flush=True)
    out = results_folder(loaded[0].name, args.out)
    problem = unwritable(run_folder(out, 1) if args.repeat > 1 else out)
    if problem:
        print(f"slogate: {problem}", file=sys.stderr)
        return EXIT_CONFIG
    if not args.host and loaded[0].endpoints:  # the scenario names its deployment's endpoints
        args.host = loaded[0].endpoints[0].url
    try:
        profile = args.profile or (None if args.host else loaded[0].engine_profile)
        with target_engine(args.host, profile, loaded[0].request.api_key_env) as host:
            if not args.host:
                print(f"slogate: no --host: started the simulated engine at {host}", flush=True)
            if args.repeat > 1:
                return run_repeats(args, scenario, host, out, processes, baseline)
            cmd = locust_command(args, scenario, host, out, processes)
            if args.host:
                waiter.hand_over(cmd, out)  # nothing here is needed while Locust runs
            return waiter.wait(cmd, out)  # this process owns the simulated engine
    except TargetError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return error.code


def repeat_problem(args: argparse.Namespace) -> str | None:
    """Why ``--repeat`` cannot run with the other flags given (None when it can)."""
    if args.repeat < 2:
        return None
    if args.web_ui:
        return "--repeat runs headless: not with --web-ui"
    if args.master:
        return "--repeat: not with --master (each run would wait for its workers anew)"
    return None


def repeat_baseline(args: argparse.Namespace) -> Repeats | None:
    """``--baseline`` of a repeat set: an earlier set (a single run has no spread
    to compare with; ``auto`` is found once the first run named the target).
    Raises ValueError naming the folder."""
    if args.repeat < 2 or args.baseline in ("", "auto"):
        return None
    from slogate.studies.repeats import read_repeats

    found = read_repeats(Path(args.baseline))
    if found is None:
        raise ValueError(
            "--baseline with --repeat: expected a repeat set's folder (written by "
            f"slogate run --repeat), got {args.baseline}"
        )
    return found


def auto_baseline_of(doc: dict[str, Any], out: Path) -> Path | None:
    """``--baseline auto`` of the set just run: the newest earlier set beside it
    of the same scenarios against the target its first run met."""
    from slogate.analysis.documents.contracts import Repeats, parse
    from slogate.studies.repeats import auto_repeat_baseline, set_target

    this = parse(Repeats, doc, str(out))
    target = set_target(this, out)
    if target is None:
        return None
    return auto_repeat_baseline(out.parent, list(this.scenarios), target, exclude=out)


def run_folder(out: Path, index: int) -> Path:
    """Where the ``index``-th run (from 1) of a repeat set writes."""
    return out / f"run-{index}"


@contextlib.contextmanager
def recording_stops(heard: list[int]) -> Iterator[None]:
    """SIGINT and SIGTERM between a set's runs and while it is judged are
    appended to ``heard`` rather than ending the process (SIGTERM in a
    cool-down once killed it with no set summary), so the set judges the runs
    that ended and starts none."""

    def record(signum: int, _frame: object) -> None:
        heard.append(signum)

    previous = {s: signal.signal(s, record) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def cool_down(seconds: float, heard: list[int]) -> None:
    """Wait ``seconds``, or less once a stop is heard (a handler that returns
    does not cut ``time.sleep`` short)."""
    deadline = time.monotonic() + seconds
    while not heard and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, COOL_DOWN_POLL_S))


def run_repeats(
    args: argparse.Namespace,
    scenario: Path,
    host: str,
    out: Path,
    processes: tuple[int, str],
    baseline: Repeats | None,
) -> int:
    """``--repeat N``: N plain runs into ``out/run-<i>``, ``--cooldown`` apart,
    then the set's summary, report and exit code from their spread. The set
    stops at a run that cannot enter the spread, and at Ctrl-C."""
    from slogate.reports.repeat_set import repeats_table, write_repeats
    from slogate.studies.repeats import build_document, read_repeats, untrusted, with_baseline
    from slogate.studies.trials import TrialResult, finished_trial

    each = argparse.Namespace(**{**vars(args), "baseline": ""})  # the set compares, not each run
    results: list[TrialResult] = []
    heard: list[int] = []  # SIGINT and SIGTERM alike, in a run or between runs
    with recording_stops(heard):
        for index in range(1, args.repeat + 1):
            if index > 1 and args.cooldown > 0:
                print(f"slogate: cool-down {args.cooldown:g} s before run {index} of "
                      f"{args.repeat}", flush=True)  # fmt: skip
                cool_down(args.cooldown, heard)
            if heard:
                break
            run_out = run_folder(out, index)
            print(f"slogate: run {index} of {args.repeat}: {run_out}", flush=True)
            cmd = locust_command(each, scenario, host, run_out, processes)
            code = waiter.wait(cmd, run_out, heard)
            if code == EXIT_CONFIG:
                return code
            results.append(finished_trial(run_out, code))
            if untrusted(results[-1]) or heard:
                break
        stopped = signal.Signals(heard[0]).name if heard else None
        if stopped:
            print(f"slogate: interrupted ({stopped}): judging the runs that ended", file=sys.stderr)
        command = shlex.join(["slogate", *sys.argv[1:]])
        doc = build_document(results, out, args.repeat, args.cooldown, command, stopped)
        base = args.baseline
        if base == "auto":
            found = auto_baseline_of(doc, out)
            print(f"slogate: --baseline auto: {found or 'no earlier repeat set of this scenario'}")
            base, baseline = (str(found), read_repeats(found)) if found else ("", None)
        if baseline is not None:
            doc = with_baseline(doc, baseline, base, str(out))
        files = write_repeats(out, doc)
        print(repeats_table(doc, files["report"]), flush=True)
        return int(doc["exit_code"])
