"""What a tune concludes from its treatments' capacities: pure functions.

A treatment's capacity is an interval [highest pass, lowest fail] of the load
(the full search's, else its screening's). Two treatments differ only where
their intervals do not overlap: one held a load the other failed. That rule
decides the pruning (a treatment that failed at a load another held is not
worth a full search), the comparison with the current
settings (better, worse or noise) and, with throughput per GPU and per user,
the recommendation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Record = Mapping[str, Any]
Comparison = Literal["better", "worse", "noise"]


def bounds(record: Record) -> tuple[float, float]:
    """A treatment's [lower, upper] capacity: the full search's, else the
    screening's; nothing passed is 0, nothing failed is infinity."""
    block = record.get("capacity") or record.get("screening") or {}
    lower, upper = block.get("lower"), block.get("upper")
    return (0.0 if lower is None else lower, math.inf if upper is None else upper)


def compared(record: Record, current: Record) -> Comparison | None:
    """``record`` against the current settings: better when it held a load the
    current settings failed, worse when the reverse, else noise; None when
    either has no capacity (failed, pending) or it is the current one."""
    if record is current or not has_capacity(record) or not has_capacity(current):
        return None
    lower, upper = bounds(record)
    current_lower, current_upper = bounds(current)
    if lower >= current_upper:
        return "better"
    if upper <= current_lower:
        return "worse"
    return "noise"


def has_capacity(record: Record) -> bool:
    return record.get("status") in ("measured", "pruned")


def best_lower(others: Sequence[Record], but: Record | None = None) -> tuple[float, str] | None:
    """The highest load any treatment (but ``but``) has held, and which one."""
    rivals = [
        (bounds(o)[0], o["name"])
        for o in others
        if o is not but and (o.get("capacity") or o.get("screening"))
    ]
    best = max(rivals, key=lambda rival: rival[0], default=None)
    return None if best is None or best[0] <= 0 else best


def prune_reason(record: Record, others: Sequence[Record], unit: str) -> str | None:
    """Why ``record`` needs no full search: it failed (its screening bracket's
    upper bound) at a load another treatment held (the best lower bound shown);
    None when it may still be the best, or is the current settings (the
    verdict's reference)."""
    upper = (record.get("screening") or {}).get("upper")
    best = best_lower(others, record)
    if record.get("current") or upper is None or best is None or upper > best[0]:
        return None
    lower = bounds(record)[0]
    return (
        f"screening bracket [{lower:g}, {upper:g}] {unit}: it failed at a load "
        f"{best[1]} held ({best[0]:g} {unit})"
    )


def pareto_front(records: Sequence[Record]) -> list[Record]:
    """The measured treatments no other beats on both throughput per GPU and per
    user at its capacity (the trade a batch cap makes)."""
    points = [
        (r, r["throughput"]["per_gpu"], r["throughput"]["per_user"])
        for r in records
        if r.get("throughput")
        and r["throughput"].get("per_gpu") is not None
        and r["throughput"].get("per_user") is not None
    ]
    return [
        r
        for r, gpu, user in points
        if not any(
            g >= gpu and u >= user and (g > gpu or u > user)
            for other, g, u in points
            if other is not r
        )
    ]


def capacity_value(record: Record) -> float | None:
    block = record.get("capacity") or {}
    value = block.get("value")
    return None if value is None else float(value)


def ranked(records: Sequence[Record]) -> list[Record]:
    """The measured treatments with a capacity, best first: by capacity, then
    throughput per GPU, then per user."""

    def key(record: Record) -> tuple[float, float, float]:
        throughput = record.get("throughput") or {}
        return (
            capacity_value(record) or 0.0,
            throughput.get("per_gpu") or 0.0,
            throughput.get("per_user") or 0.0,
        )

    measured = [r for r in records if r.get("status") == "measured" and capacity_value(r)]
    return sorted(measured, key=key, reverse=True)


def recommended(records: Sequence[Record]) -> Record | None:
    """The best by capacity at the SLO; among treatments tied on it, the one on
    their Pareto front with the most throughput per GPU."""
    order = ranked(records)
    if not order:
        return None
    top = capacity_value(order[0])
    tied = [r for r in order if capacity_value(r) == top]
    front = pareto_front(tied) or tied
    return next(r for r in order if r in front)


def against_runner_up(
    records: Sequence[Record], chosen: Record
) -> tuple[Record, Comparison] | None:
    """The recommendation against the next best treatment (``ranked``'s first
    other than it): better when it held a load the runner-up failed, else
    noise, where the measurements cannot tell the two apart and either may be
    launched (the pick then rests on throughput, not capacity). None when no
    other treatment has a capacity."""
    others = [r for r in ranked(records) if r is not chosen]
    if not others:
        return None
    return others[0], "better" if compared(chosen, others[0]) == "better" else "noise"


def meets(record: Record, target: float) -> bool | None:
    """Whether the treatment's confirmed capacity reaches the target load."""
    if record.get("status") != "measured":
        return None
    value = capacity_value(record)
    return value is not None and value >= target
