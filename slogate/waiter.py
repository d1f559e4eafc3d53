"""`slogate run` once Locust is started: wait for it, pass signals on, judge a death.

Locust runs in its own session: SIGINT or SIGTERM here is passed on as SIGTERM
to its master alone, which then stops its workers, collects their data and
writes a results folder marked incomplete. SIGKILL here cannot be passed on:
Locust watches its parent and stops the same way when it is gone. Locust
killed itself leaves its journal (``data/journal.bin``, flushed every second),
judged here.

Nothing else of slogate is needed while Locust runs, so a run against a given
host hands over to this module (:func:`hand_over`): the process execs
``python -m slogate.waiter`` in its own place, keeping its pid and its child
to be, and drops what validating and planning the run imported (about 35 MB,
docs/benchmarks-history.md, "memory of a 1,024-stream run"). A run against the simulated
engine, which the command owns, calls :func:`wait` in-process instead. This
module imports only the standard library until a death is to be judged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

from slogate.analysis.verdict.exitcodes import CONTRACT, EXIT_INVALID


def hand_over(cmd: list[str], out: Path) -> NoReturn:
    """Become ``python -m slogate.waiter OUT CMD...``: start Locust and wait."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "slogate.waiter", str(out), *cmd])


def wait(cmd: list[str], out: Path, heard: list[int] | None = None) -> int:
    """Run Locust's command to its end; its exit code, or 3 (judged) for a death.
    Each signal passed on is appended to ``heard``."""
    code = run_locust(cmd, heard)
    if code not in CONTRACT:
        return died(code, out)
    return code


def run_locust(cmd: list[str], heard: list[int] | None = None) -> int:
    """Locust's exit code. A signal passed on is appended to ``heard``: one
    that came as Locust was already writing its results is lost on it, and a
    ``--repeat`` set must still start no other run."""
    child = subprocess.Popen(cmd, start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signal.SIGTERM)
        if heard is not None:
            heard.append(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def died(code: int, out: Path) -> int:
    """Locust ended outside the exit-code contract (killed by a signal, out of
    memory): the run failed (3). Its journal, replayed up to its last flush, is
    judged into a report marked incomplete."""
    how = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
    print(f"slogate: run failed: the Locust process {how}", file=sys.stderr)
    from slogate.reports import rerender

    try:
        rerender(out)
    except (OSError, ValueError) as error:
        print(f"slogate: no results to judge in {out}: {error}", file=sys.stderr)
    else:
        print(f"slogate: report of the data as of its last journal flush: {out / 'report.html'}")
    return EXIT_INVALID


def main(argv: list[str]) -> int:
    out, *cmd = argv
    return wait(cmd, Path(out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
