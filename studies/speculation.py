"""Speculative decoding's crossover: the load past which speculation stops paying.

A speculative engine verifies k drafts per sequence in each step: at a low
batch the step is bound by reading the weights, so the k extra tokens are
nearly free and every accepted draft is a token gained; as the batch grows
the step turns compute-bound, the drafts cost their full price, and the
acceptance itself may fall (``simengine/scheduler.py``). An experiment runs
the same loads with and without speculation; here its points are paired by
load, and the speedup at each (TPOT without over TPOT with) is read for the
load where it falls below 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from slogate.scenarios.metrics import TPOT

OFF, ON = "off", "on"
ARMS = (OFF, ON)


def arm_label(arm: str, users: int) -> str:
    """A setting's label: its arm and its load, ``on-16``."""
    return f"{arm}-{users}"


def arm_of(label: str) -> str:
    return label.partition("-")[0]


def speedups(points: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(load, TPOT without / TPOT with speculation) at each load measured in
    both arms, by load; above 1 speculation pays."""
    tpot: dict[str, dict[float, float]] = {arm: {} for arm in ARMS}
    for point in points:
        mean = ((point.get("metrics") or {}).get(TPOT.key) or {}).get("mean")
        arm = arm_of(str(point["label"]))
        if mean and arm in tpot and point.get("x") is not None:
            tpot[arm][float(point["x"])] = float(mean)
    shared = sorted(set(tpot[OFF]) & set(tpot[ON]))
    return [(x, round(tpot[OFF][x] / tpot[ON][x], 6)) for x in shared]


def crossover(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """Where the speedup first falls below 1: the two loads around it
    (``between``) and the load it crosses at, interpolated on a log scale of
    load (``users``); ``users`` None when it never falls (``below`` says
    whether it was below 1 already at the lowest load)."""
    for (x0, r0), (x1, r1) in pairwise(pairs):
        if r0 >= 1.0 > r1:
            share = (r0 - 1.0) / (r0 - r1)
            users = math.exp(math.log(x0) + share * (math.log(x1) - math.log(x0)))
            return {"users": round(users, 3), "between": [x0, x1], "below": False}
    below = bool(pairs) and pairs[0][1] < 1.0
    return {"users": None, "between": None, "below": below}


def crossover_trend(
    pairs: Sequence[tuple[float, float]], found: Mapping[str, Any]
) -> dict[str, Any]:
    """The experiment's finding as a trend line: speculation pays at the
    lowest load and stops paying past the crossover."""
    listed = ", ".join(f"{x:g}: x{r:.2f}" for x, r in pairs)
    if found["users"] is not None:
        low, high = found["between"]
        text = (
            f"speculation stops paying at about {found['users']:g} users (between {low:g} "
            f"and {high:g}); TPOT speedup by load: {listed}"
        )
    elif found["below"]:
        text = f"speculation never paid at these loads; TPOT speedup by load: {listed}"
    else:
        text = f"speculation paid at every load measured; TPOT speedup by load: {listed}"
    return {
        "claim": "speculation pays at low load and stops paying at high load",
        "metric": "TPOT without / with speculation",
        "expected": "crosses 1",
        "observed": "crosses 1" if found["users"] is not None else "does not cross 1",
        "holds": found["users"] is not None,
        "text": text,
    }
