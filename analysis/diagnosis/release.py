"""Did the server let go? After the load, an engine whose clients closed their
connections (cancelled requests, requests cut off at the stop) must stop
generating for them: its running-requests gauge (vLLM's
``vllm:num_requests_running``, SGLang's ``num_running_reqs``, ...) returns to
the level it had before the run. One that keeps generating for closed
connections spends its capacity on nobody: a finding, not an error.

The decision is a pure function of the gauge's readings: the one taken before
any load and those polled after it, each with its time since the load ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RELEASE_WAIT_S = 10.0  # how long after the load the gauge may take to come back
RELEASE_POLL_S = 0.25


def released(before: float, reading: float) -> bool:
    """Back to the pre-run level (or below: requests of other clients ended)."""
    return reading <= before


def release_outcome(
    before: float | None,
    readings: Sequence[tuple[float, float]],
    bound_s: float,
    cancelled: int,
    cancelled_at_stop: int,
) -> dict[str, Any]:
    """The check's outcome for summary.json. ``readings`` are (seconds after the
    load ended, running requests), in order; the first one back at ``before``
    ends the wait. Unchecked (``released`` None) without a reading before the
    run or after it."""
    outcome: dict[str, Any] = {
        "cancelled": cancelled,
        "cancelled_at_stop": cancelled_at_stop,
        "bound_s": bound_s,
        "running_before": before,
        "running_after": readings[-1][1] if readings else None,
        "peak_after": max((r for _, r in readings), default=None),
        "waited_s": None,
        "released": None,
    }
    if before is None or not readings:
        return outcome
    back = next(((t, r) for t, r in readings if released(before, r)), None)
    if back is None:
        outcome["waited_s"] = round(readings[-1][0], 3)
        outcome["released"] = False
    else:
        outcome["waited_s"] = round(back[0], 3)
        outcome["running_after"] = back[1]
        outcome["released"] = True
    return outcome
