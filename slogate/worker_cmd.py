"""`slogate worker`: load for a `slogate run --master` on another host.

A master (`slogate run SCENARIO --master --expect-workers N`) waits for N
workers, ships each the resolved scenario and judges the run; a worker
(`slogate worker --master-host H`) needs only the installed package. Both are
plain Locust processes of `locustfiles/run.py`, so `locust --master/--worker`
with the same locustfile behaves the same (docs/load.md, "Across hosts"). The
master's options are run options (:mod:`slogate.locustfiles.options`).
"""

from __future__ import annotations

import argparse
import sys

from slogate.locustfiles.argtypes import port
from slogate.locustfiles.options import MASTER_PORT


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = "The master ships the scenario: no scenario file is needed here."
    p.add_argument("--master-host", required=True, help="the master's host name or address")
    p.add_argument("--master-port", type=port, default=MASTER_PORT, help=f"default {MASTER_PORT}")


def worker_command(args: argparse.Namespace) -> int:
    from slogate.run_cmd import RUN_LOCUSTFILE
    from slogate.waiter import run_locust

    cmd = [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), "--worker"]
    cmd += ["--master-host", args.master_host, "--master-port", str(args.master_port)]
    return run_locust(cmd)
