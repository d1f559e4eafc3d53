"""Speculative decoding as the engine counts it: acceptance rate, mean
accepted length and each draft position's acceptance, over the measured
window and between each two scrapes.

vLLM and llama.cpp count drafts, draft tokens and accepted tokens engine-wide
(``slogate.analysis.engine_side.server_metrics``: ``spec_*_total``); their
growth between two scrapes is what the engine drafted and accepted in
between. The rate between scrapes is the time series the report draws beside
ITL and TPOT: as the batch grows, acceptance may fall, and with it the tokens
each step yields.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.engine_side.engine_view import ENGINE_SOURCE, measured_scrapes
from slogate.analysis.engine_side.server_metrics import PER_POSITION
from slogate.analysis.measurement.speculation import acceptance_rate, mean_accepted_length

COUNTED = ("spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_tokens_total")


def engine_speculation(run: RunData, source: str = ENGINE_SOURCE) -> dict[str, Any] | None:
    """``{"drafts", "draft_tokens", "accepted_tokens", "acceptance_rate",
    "mean_accepted_length", "per_position", "windows"}`` over the measured
    window; None when the engine exports no speculative counters or fewer
    than two scrapes fall in the window. ``per_position`` is each draft
    position's acceptance (accepted there / drafts); ``windows`` the rate and
    length between consecutive scrapes, at the later one's ``t_s``."""
    measured = [
        s
        for s in measured_scrapes(run, with_histograms=False, source=source)
        if all(name in s["series"] for name in COUNTED)
    ]
    if len(measured) < 2:
        return None
    first, last = measured[0], measured[-1]
    growth = grown(first, last)
    if growth is None:
        return None
    drafts, drafted, accepted = growth
    positions = sorted(
        (int(key.rpartition(":")[2]), key)
        for key in last["series"]
        if key.startswith(PER_POSITION + ":") and key.rpartition(":")[2].isdigit()
    )
    per_position = [
        acceptance_rate(last["series"][key] - first["series"].get(key, 0.0), drafts)
        for _, key in positions
    ]
    return {
        "drafts": drafts,
        "draft_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": acceptance_rate(accepted, drafted),
        "mean_accepted_length": mean_accepted_length(accepted, drafts),
        "per_position": per_position,
        "windows": [window for a, b in pairwise(measured) if (window := between(a, b))],
    }


def grown(first: dict[str, Any], last: dict[str, Any]) -> tuple[float, float, float] | None:
    """(drafts, draft tokens, accepted tokens) added from ``first`` to
    ``last``; None when a counter is missing or went down (a restart)."""
    a, b = first.get("series") or {}, last.get("series") or {}
    if not all(name in a and name in b for name in COUNTED):
        return None
    growth = tuple(b[name] - a[name] for name in COUNTED)
    if min(growth) < 0:
        return None
    return growth[0], growth[1], growth[2]


def between(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Any] | None:
    """One interval's acceptance rate and mean accepted length; None when
    nothing was drafted in it."""
    growth = grown(first, last)
    if growth is None or growth[1] <= 0:
        return None
    drafts, drafted, accepted = growth
    return {
        "t_s": last["t_s"],
        "window_s": round(last["t_s"] - first["t_s"], 3),
        "acceptance_rate": acceptance_rate(accepted, drafted),
        "mean_accepted_length": mean_accepted_length(accepted, drafts),
    }
