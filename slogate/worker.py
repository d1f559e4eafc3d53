"""Distributed runs across hosts: `slogate run --master` and `slogate worker`.

A master (`slogate run SCENARIO --master --expect-workers N`) waits for N
workers, ships each the resolved scenario and judges the run; a worker
(`slogate worker --master-host H`) needs only the installed package. Both are
plain Locust processes of `locustfiles/run.py`, so `locust --master/--worker`
with the same locustfile behaves the same (docs/load.md, "Across hosts").
"""

from __future__ import annotations

import argparse
import sys

from slogate.args import positive_int

DEFAULT_PORT = 5557  # Locust's own


def port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    return value


def add_master_options(p: argparse.ArgumentParser) -> None:
    """`slogate run`'s options for a master whose workers run elsewhere."""
    p.add_argument(
        "--master",
        action="store_true",
        help="run as the master of workers started with `slogate worker` (any host)",
    )
    p.add_argument("--expect-workers", type=positive_int, default=1, help="with --master")
    p.add_argument(
        "--master-bind-host", default="*", help="with --master: interface to listen on (all)"
    )
    p.add_argument(
        "--master-bind-port", type=port, default=DEFAULT_PORT, help="with --master: port"
    )


def master_command(args: argparse.Namespace) -> list[str]:
    """The Locust flags of a master run."""
    return [
        "--master",
        "--expect-workers",
        str(args.expect_workers),
        "--master-bind-host",
        args.master_bind_host,
        "--master-bind-port",
        str(args.master_bind_port),
    ]


def add_worker_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker",
        help="generate load for a `slogate run --master` on another host",
        description="The master ships the scenario: no scenario file is needed here.",
    )
    p.add_argument("--master-host", required=True, help="the master's host name or address")
    p.add_argument("--master-port", type=port, default=DEFAULT_PORT, help="default 5557")


def worker_command(args: argparse.Namespace) -> int:
    from slogate.run_cmd import RUN_LOCUSTFILE
    from slogate.waiter import run_locust

    cmd = [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), "--worker"]
    cmd += ["--master-host", args.master_host, "--master-port", str(args.master_port)]
    return run_locust(cmd)
