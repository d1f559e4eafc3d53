"""Where an open-loop run's lateness came from: its lag split by cause.

A request's lag (its bytes handed to the kernel minus its scheduled instant)
is the sum of four parts (``slogate.analysis.request_metrics.LagParts``):
prepared late (the look-ahead built it after its instant), dispatcher late
(its send started after it was due and built), connect (no idle connection
was waiting) and write. Each part has its own histogram per scenario; all
scenarios' merge here, and the part with the largest p99 is the run's
likely cause, which an invalid verdict names so that its fix is known:
a faster machine or ``--processes`` for the first two, connections opened
ahead for connect, a server that reads faster for write.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from slogate.analysis.histograms import new_histogram
from slogate.analysis.rundata import RunData

US_PER_MS = 1000.0
# (histogram, summary key, words for a reason)
CAUSES = (
    ("lag_prepare", "prepared_late", "prepared late"),
    ("lag_dispatch", "dispatcher_late", "dispatcher late"),
    ("lag_connect", "connect", "connect"),
    ("lag_write", "write", "write"),
)
WORDS = {key: words for _, key, words in CAUSES}


def cause_p99_ms(run: RunData) -> dict[str, float]:
    """Each cause's p99 in ms (``prepared_late``, ``dispatcher_late``,
    ``connect``, ``write``) over every scenario's requests, largest first;
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
