"""Where an open-loop run's lateness came from: its lag split by cause.

A request's lag (its bytes handed to the kernel minus its scheduled instant)
is the sum of five parts (``slogate.analysis.measurement.request_metrics.LagParts``):
prepared late (the look-ahead built it after its instant), held by the
in-flight cap (the dispatcher waited for a free slot under
``load.max_in_flight``), dispatcher late (the rest until its send started),
connect (no idle connection was waiting) and write. Each part has its own
histogram per scenario; all scenarios' merge here, and the part with the
largest p99 is the run's likely cause, which an invalid verdict names so that
its fix is known: a faster machine or ``--processes`` for prepared and
dispatcher late, connections opened ahead for connect, a server that reads
faster for write. The cap's part is no fault of the generator: the slots were
full because the engine finished fewer requests than arrived, so the lag is
the engine's queue (:func:`held_by_cap`), and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hdrh.histogram import HdrHistogram

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.histograms import new_histogram
from slogate.scenarios.metrics import LAG_CAP, LAG_CONNECT, LAG_DISPATCH, LAG_PREPARE, LAG_WRITE

US_PER_MS = 1000.0
# (histogram, summary key, words for a reason)
CAUSES = (
    (LAG_PREPARE.name, "prepared_late", "prepared late"),
    (LAG_CAP.name, "in_flight_cap", "held by the in-flight cap"),
    (LAG_DISPATCH.name, "dispatcher_late", "dispatcher late"),
    (LAG_CONNECT.name, "connect", "connect"),
    (LAG_WRITE.name, "write", "write"),
)
WORDS = {key: words for _, key, words in CAUSES}
CAP = "in_flight_cap"


def cause_p99_ms(run: RunData) -> dict[str, float]:
    """Each cause's p99 in ms (``prepared_late``, ``in_flight_cap``,
    ``dispatcher_late``, ``connect``, ``write``) over every scenario's requests, largest first;
    empty when the run recorded no parts (closed loop, an older run)."""
    merged: dict[str, HdrHistogram] = {}
    for scenario in run.scenario_names():
        histograms = run.overall(scenario).histograms
        for name, key, _ in CAUSES:
            if name not in histograms:
                continue
            histogram = histograms.histogram(name)
            if histogram.get_total_count():
                merged.setdefault(key, new_histogram()).add(histogram)
    p99 = {
        key: round(histogram.get_value_at_percentile(99.0) / US_PER_MS, 3)
        for key, histogram in merged.items()
    }
    return dict(sorted(p99.items(), key=lambda item: -item[1]))


def cause_text(p99: dict[str, float]) -> str | None:
    """The largest part of the lag and the others' p99 (``cause_p99_ms``'s
    result), for an invalid verdict; None when the run recorded no parts."""
    if not p99:
        return None
    (worst, value), *rest = p99.items()
    others = ", ".join(f"{WORDS[key]} {v:.1f} ms" for key, v in rest)
    return f"mostly {WORDS[worst]} (p99 {value:.1f} ms; {others})"


def held_by_cap(p99: dict[str, float]) -> bool:
    """Whether the in-flight cap is the largest part of the lag (``cause_p99_ms``'s
    result): the engine's queue, not a late generator."""
    return next(iter(p99), None) == CAP


def in_flight_caps(meta: Mapping[str, Any]) -> str:
    """The scenarios' ``load.max_in_flight``, as a run's metadata holds them ("1024",
    "256, 1024"; empty when none is recorded)."""
    caps = {
        (declared.get("load") or {}).get("max_in_flight")
        for declared in (meta.get("scenarios") or {}).values()
    }
    return ", ".join(str(cap) for cap in sorted(c for c in caps if c is not None))


def lag_reason(lag_ms: float, bound_ms: float, p99: dict[str, float], caps: str) -> str:
    """Why a run whose lag p99 exceeds its bound is invalid: the engine's queue
    held at the in-flight cap (``caps``: :func:`in_flight_caps`), or the load
    generator, with the parts of the lag (``cause_p99_ms``'s result)."""
    cause = cause_text(p99)
    if held_by_cap(p99):
        cap = f" of {caps}" if caps else ""
        return (
            f"arrivals waited for the in-flight cap{cap} (load.max_in_flight): lag p99 "
            f"{lag_ms:.1f} ms exceeds its bound {bound_ms:g} ms, {cause}: the engine finished "
            "fewer requests than arrived, so the queue grew in the schedule; not the load "
            "generator's fault: lower the rate or find the engine's capacity "
            "(slogate sweep --find-max)"
        )
    return (
        f"load generator lag p99 {lag_ms:.1f} ms exceeds its bound {bound_ms:g} ms: "
        "arrivals were late, latencies understate queueing"
        + (f"; the lag was {cause}" if cause else "")
    )
