"""A tune's treatment killed as a crash would."""

from __future__ import annotations

import os
import signal

from slogate.engines.tunable_served import ServedTreatment


def crash(treatment: ServedTreatment, wait_s: float) -> None:
    """Kill the treatment's server as a crash would, and wait for its exit."""
    pid = treatment.server.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    treatment.server.wait(wait_s)
