"""Wall clocks of a distributed run: each worker's offset from the master's.

Latencies are durations inside one process and need no shared clock; the
run's timeline (stages, warm-up, open-loop arrivals, time-series windows) is
placed by wall time from the master's origin. A worker measures its clock
against the master's as NTP does: it sends its time, the master answers with
its own, and the worker takes the midpoint of the round trip as the instant
the master read its clock. Of several samples the one with the shortest round
trip is kept (the least queueing), its half round trip the bound on the error.

``SLOGATE_CLOCK_SHIFT_S`` adds seconds to this process's wall clock as the
run uses it. It exists only to test the offset measurement with a worker whose
clock is wrong; it is never needed in a real run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = ["ClockOffset", "best_offset", "wall"]

SHIFT_S = float(os.environ.get("SLOGATE_CLOCK_SHIFT_S", "0") or 0)


def wall() -> float:
    """This process's wall clock as the run's timeline reads it (Unix seconds)."""
    return time.time() + SHIFT_S


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """This clock minus the master's, and the half round trip that bounds its error."""

    offset_s: float
    error_s: float

    def to_dict(self) -> dict[str, float]:
        return {"offset_ms": self.offset_s * 1e3, "error_ms": self.error_s * 1e3}


def best_offset(samples: list[tuple[float, float, float]]) -> ClockOffset:
    """The offset from ``(sent, master, received)`` samples (sent and received
    on this clock, master on the master's): the one of the shortest round trip."""
    if not samples:
        raise ValueError("no clock samples")
    sent, master, received = min(samples, key=lambda s: s[2] - s[0])
    return ClockOffset((sent + received) / 2 - master, (received - sent) / 2)
