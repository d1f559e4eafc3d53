"""Why requests missed their SLOs, read from the requests' own timelines.

The client saw every request's start, first token, end, stalls and lengths
(``slogate.analysis.measurement.timelines``), and every request ran beside others: that is
enough to tell the usual causes of an SLO miss apart without the engine's
help. Each rule below claims its cause only past explicit thresholds (the
constants, documented in docs/reports.md) and measures how much of each failed
SLO's miss it accounts for (``Finding.share``), so the report can rank them.

- **prefill interference**: stalls inside running streams that end when
  another request gets its first token (its prompt was prefilled in the batch
  the stalled streams waited on), more often than chance would place them,
  and longer the more of those prompts the engine computed (the input less
  the server's reported prefix-cache hits);
- **prefill-bound TTFT**: TTFT rising with the tokens to prefill (a least
  squares fit, its slope in ms per 1k tokens; the input, or the part the
  server did not serve from its cache), told apart from
- **queueing**: TTFT rising with the requests in flight when it was sent;
- **TTFT taken apart** where the engine timed its requests (llama.cpp's
  ``timings``, vLLM's per-request ``metrics``, the simulated engine): the
  requests over the TTFT limit spent most of their TTFT in the engine's
  queue (queueing), in its prefill (prefill-bound) or outside its clock (the
  network, a gateway, the server's front end); the engine's own numbers
  replace the fit-based finding of the same cause;
- **concurrency ceiling**: the streams decoding at once held at a ceiling
  while more requests were in flight, waiting for a slot (a batch or memory
  limit);
- **decode-bound ITL**: TPOT rising with the streams decoding beside it;
- **preemption**: TTFT-long gaps inside streams that no other request's
  first token explains (a preempted request waits and recomputes its prompt);
- **saturation**: in-flight requests and TTFT growing through the run while
  completions per second stay flat;
- **cache effects**: prefix-cache misses (where the server reports cached
  prompt tokens) or first turns much slower to a first token than hits or
  later turns; and whether TTFT follows the whole prompt or only the part a
  previous turn did not already send (a prefix cache reused the history);
- **a slow or failing replica** (or endpoint): one of a deployment's members
  much slower to a first token, or failing far more often, than all the
  others, read from the per-replica (per-endpoint) histograms the client
  keeps when the server names its replica or the run has several endpoints.

The share of a miss: the requests over the SLO's threshold, each one's excess
over the fastest requests (TTFT, TPOT or E2E minus that metric's 5th
percentile), and the part of that excess the cause's own term accounts for
(the fitted slope times the request's distance from the 5th percentile of its
factor, the time it waited at a ceiling, its coinciding stalls), each part at
most the excess. For ITL, whose tail is made of gaps: the share of the stalls
longer than the threshold that the cause explains.

Pure numpy over the whole run at once: 100k requests take well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from slogate.analysis.diagnosis.findings import Finding
from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.measurement.timelines import UNKNOWN, Timelines
from slogate.scenarios.metrics import DECODE, E2E, GOODPUT, ITL, TPOT, TTFT, WAIT, keys_of

# Fits and claims need this many requests.
MIN_REQUESTS = 8
# A stall: a gap between output chunks this many times the run's typical
# per-token ITL (the median TPOT), and at least MIN_STALL_MS.
STALL_OVER_ITL = 5.0
MIN_STALL_MS = 5.0
MIN_STALLS = 3
# A stall coincides with another request's first token within this many typical
# ITLs (at least COINCIDE_MIN_MS): the same engine step produced both.
COINCIDE_OVER_ITL = 2.0
COINCIDE_MIN_MS = 10.0
# Interference: at least this share of the stalls coincide, and this many
# times the share chance would give.
MIN_COINCIDING_SHARE = 0.5
MIN_OVER_CHANCE = 3.0
# Preemption signs: a gap not coinciding with any first token, at least this
# share of the scenario's median TTFT and PREEMPT_OVER_ITL typical ITLs.
PREEMPT_OVER_TTFT = 0.5
PREEMPT_OVER_ITL = 10.0
# A rising relation: Spearman's rho at least this, and a fitted change over the
# factor's 10th..90th percentiles of at least MIN_GROWTH times.
MIN_RANK_CORRELATION = 0.5
MIN_GROWTH = 1.3
# A cause is claimed when it explains at least this share of a failed SLO's miss.
MIN_SHARE = 0.2
# TTFT taken apart: the part holding at least this share of the missing
# requests' TTFT (summed) names the cause.
MOSTLY = 0.5
# Concurrency ceiling: decoding at its ceiling this share of the measured time,
# with more requests in flight than decoding this share of the time.
CEILING_QUANTILE = 0.95
MIN_AT_CEILING = 0.5
MIN_WAITING = 0.5
# Saturation: the run cut in this many slices; the last third against the first.
SLICES = 6
MIN_INFLIGHT_GROWTH = 1.5
MIN_TTFT_GROWTH = 1.5
MAX_THROUGHPUT_GROWTH = 1.2
# Cache effects: hits (or later turns) at least this much faster than misses
# (or first turns).
# one replica (or endpoint) apart from the rest: its median TTFT this many
# times the slowest other's, and at least MIN_SLOW_MS more; or its error rate
# at least MIN_FAILING and this many times the highest other's
SLOW_MEMBER = 2.0
MIN_SLOW_MS = 20.0
FAILING_MEMBER = 5.0
MIN_FAILING = 0.05
CACHE_SPEEDUP = 2.0
LOW_PERCENTILE = 5.0

LATENCY_SLOS = keys_of(headline=True)
# the SLOs a cause can explain: the request's wait, or its decoding (and goodput, both)
WAIT_METRICS = (*keys_of(WAIT, headline=True), GOODPUT)
GAP_METRICS = (*keys_of(DECODE, headline=True), GOODPUT)


@dataclass(frozen=True)
class Requests:
    """The timelines as numpy columns, times in seconds on the run's clock, and
    what every rule derives from them once."""

    scenario: np.ndarray
    start: np.ndarray
    first: np.ndarray  # NaN: no first token
    end: np.ndarray
    ttft: np.ndarray  # ms, NaN unknown
    tpot: np.ndarray
    e2e: np.ndarray
    input_tokens: np.ndarray  # NaN unknown
    cached_tokens: np.ndarray  # prompt tokens the server served from its cache; NaN unknown
    queue: np.ndarray  # ms of TTFT in the engine's queue, by its own clock; NaN unsaid
    prefill: np.ndarray  # ms of TTFT in the engine's prefill; NaN where it did not time it
    output_tokens: np.ndarray
    conversation: np.ndarray
    turn: np.ndarray
    ok: np.ndarray
    measured: np.ndarray
    cut_off: np.ndarray  # sent, then cut off by the run's end: arrival and first token only
    gap_row: np.ndarray
    gap_end: np.ndarray  # s, on the run's clock
    gap_ms: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, t: Timelines) -> Requests:
        col = {name: np.frombuffer(t.columns[name], dtype=float) for name in t.columns}

        def known(values: np.ndarray) -> np.ndarray:
            return np.where(values == UNKNOWN, np.nan, values)

        start = col["start_s"]
        ttft = known(col[TTFT.key])
        gap_row = np.frombuffer(t.gap_row, dtype=np.int32).astype(int)
        return cls(
            scenario=np.frombuffer(t.scenario, dtype=np.int32).astype(int),
            start=start,
            first=start + ttft / 1000.0,
            end=start + col[E2E.key] / 1000.0,
            ttft=ttft,
            tpot=known(col[TPOT.key]),
            e2e=col[E2E.key],
            input_tokens=known(col["input_tokens"]),
            cached_tokens=known(col["cached_tokens"]),
            queue=known(col["queue_ms"]),
            prefill=known(col["prefill_ms"]),
            output_tokens=col["output_tokens"],
            conversation=col["conversation"],
            turn=col["turn"],
            ok=np.frombuffer(t.flags["ok"], dtype=np.int8).astype(bool),
            measured=~np.frombuffer(t.flags["warmup"], dtype=np.int8).astype(bool),
            cut_off=np.frombuffer(t.flags["cut_off"], dtype=np.int8).astype(bool),
            gap_row=gap_row,
            gap_end=start[gap_row] + np.frombuffer(t.gap_end_ms, dtype=float) / 1000.0,
            gap_ms=np.frombuffer(t.gap_ms, dtype=float).copy(),
            names=tuple(t.scenarios),
        )

    def measured_of(self, scenario: str) -> np.ndarray:
        """The measured requests of one scenario (none when it has no rows)."""
        if scenario not in self.names:
            return np.zeros(len(self.start), dtype=bool)
        mine: np.ndarray = (self.scenario == self.names.index(scenario)) & self.measured
        return mine

    def rows(self, scenario: str) -> np.ndarray:
        """The measured, successful requests of one scenario."""
        mine: np.ndarray = self.measured_of(scenario) & self.ok
        return mine

    def with_first_token(self, scenario: str) -> np.ndarray:
        """The rows whose TTFT is known: the measured, successful requests of
        one scenario and those the run's end cut off after their first token
        (their wait for it was whole; only their stream was not over). The
        TTFT fits take both: an engine slow enough to fail finishes few
        requests in a run, and its longest prompts are the ones still running
        at the end."""
        found: np.ndarray = (
            self.measured_of(scenario) & (self.ok | self.cut_off) & np.isfinite(self.ttft)
        )
        return found


# -- counting and fitting ----------------------------------------------------------
def count_open(opens: np.ndarray, closes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many [open, close) intervals hold each instant of ``at``."""
    opens, closes = np.sort(opens), np.sort(closes)
    return np.searchsorted(opens, at, side="right") - np.searchsorted(closes, at, side="right")


def step_integral(
    opens: np.ndarray, closes: np.ndarray, level: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(instants, cumulative integral) of the count of open intervals, or, with
    ``level``, of the time the count was at least ``level``; interpolate it
    (``np.interp``) to integrate over any span."""
    instants = np.concatenate([opens, closes])
    steps = np.concatenate([np.ones(len(opens)), -np.ones(len(closes))])
    order = np.argsort(instants, kind="stable")
    instants, counts = instants[order], np.cumsum(steps[order])
    held = counts[:-1] if level is None else (counts[:-1] >= level).astype(float)
    area = np.concatenate([[0.0], np.cumsum(held * np.diff(instants))])
    return instants, area


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Rank correlation (ties get their mean rank); 0 when either is constant."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    rx, ry = _ranks(x), _ranks(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    _, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / np.bincount(inverse))[inverse]


@dataclass(frozen=True)
class Fit:
    """A least-squares line y = intercept + slope * x over the rows, with
    Spearman's rho and the fitted growth from x's 10th to 90th percentile."""

    intercept: float
    slope: float
    rho: float
    growth: float
    low: float  # x's 5th percentile: the fastest requests' factor

    @property
    def rising(self) -> bool:
        return self.slope > 0 and self.rho >= MIN_RANK_CORRELATION and self.growth >= MIN_GROWTH


def fit(x: np.ndarray, y: np.ndarray, least: int = MIN_REQUESTS) -> Fit | None:
    """The line through at least ``least`` finite points; None for fewer, or a
    constant x."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < least or np.ptp(x) == 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    lo, hi = np.percentile(x, [10.0, 90.0])
    at_lo = intercept + slope * lo
    growth = (intercept + slope * hi) / at_lo if at_lo > 0 else float("inf")
    low = float(np.percentile(x, LOW_PERCENTILE))
    return Fit(float(intercept), float(slope), spearman(x, y), float(growth), low)


def share_of_miss(values: np.ndarray, part: np.ndarray, threshold: float) -> float:
    """The part of the missing requests' excess (over the metric's 5th
    percentile) that ``part`` accounts for, each request's part at most its
    excess; 0 when no request missed."""
    values = np.where(np.isfinite(values), values, np.nan)
    known = np.isfinite(values)
    if not known.any():
        return 0.0
    base = np.percentile(values[known], LOW_PERCENTILE)
    miss = known & (values > threshold)
    excess = values[miss] - base
    total = excess.sum()
    if total <= 0:
        return 0.0
    taken = np.clip(np.nan_to_num(part[miss]), 0.0, excess)
    return float(taken.sum() / total)


def shares(
    rows: np.ndarray, limits: Mapping[str, float], parts: Mapping[str, np.ndarray], r: Requests
) -> dict[str, float]:
    """``share_of_miss`` for each failed SLO metric the cause has a part for."""
    column = {TTFT.key: r.ttft, TPOT.key: r.tpot, E2E.key: r.e2e}
    return {
        metric: round(share_of_miss(column[metric][rows], parts[metric][rows], limits[metric]), 3)
        for metric in parts
        if metric in limits and metric in column
    }


def wait_finding(
    cause: str,
    text: str,
    evidence: dict[str, Any],
    scenario: str,
    part: np.ndarray,
    rows: np.ndarray,
    limits: Mapping[str, float],
    r: Requests,
) -> Finding:
    """A cause that adds ``part`` ms before a request's first token, so to its
    TTFT and its E2E alike."""
    share = shares(rows, limits, {TTFT.key: part, E2E.key: part}, r)
    return Finding(cause, text, evidence, WAIT_METRICS, scenario, share=share)


# -- the rules -----------------------------------------------------------------------
def typical_itl(r: Requests) -> float | None:
    tpot = r.tpot[r.ok & np.isfinite(r.tpot) & (r.tpot > 0)]
    return float(np.median(tpot)) if len(tpot) else None


@dataclass(frozen=True)
class Stalls:
    """The stalls of the run's streams and which coincide with a first token."""

    index: np.ndarray  # into the gap columns
    coinciding: np.ndarray  # bool per stall
    # the prompt tokens computed for the requests whose first token it met; NaN
    # where one of them is unknown (a request cut off before its usage came)
    coinciding_inputs: np.ndarray
    with_cut_off: np.ndarray  # bool per stall: it met a cut-off request's first token
    chance: float  # the share of stalls chance would place at a first token
    tolerance_ms: float
    itl_ms: float


def find_stalls(r: Requests, itl_ms: float) -> Stalls:
    floor = max(STALL_OVER_ITL * itl_ms, MIN_STALL_MS)
    index = np.flatnonzero(r.gap_ms >= floor)
    has_first = np.isfinite(r.first)
    order = np.argsort(r.first[has_first])
    firsts = r.first[has_first][order]
    computed = computed_tokens(r)[has_first][order]
    cumulative = np.concatenate([[0.0], np.cumsum(np.nan_to_num(computed))])
    unknown = np.concatenate([[0], np.cumsum(~np.isfinite(computed))])
    cut = np.concatenate([[0], np.cumsum(r.cut_off[has_first][order])])
    tolerance_s = max(COINCIDE_OVER_ITL * itl_ms, COINCIDE_MIN_MS) / 1000.0
    ends = r.gap_end[index]
    lo = np.searchsorted(firsts, ends - tolerance_s, side="left")
    hi = np.searchsorted(firsts, ends + tolerance_s, side="right")
    span = float(r.end.max() - r.start.min()) if len(r.start) else 0.0
    rate = len(firsts) / span if span > 0 else 0.0
    return Stalls(
        index=index,
        coinciding=hi > lo,
        coinciding_inputs=np.where(
            unknown[hi] > unknown[lo], np.nan, cumulative[hi] - cumulative[lo]
        ),
        with_cut_off=cut[hi] > cut[lo],
        chance=float(1.0 - np.exp(-rate * 2 * tolerance_s)),
        tolerance_ms=tolerance_s * 1000.0,
        itl_ms=itl_ms,
    )


def stall_parts(r: Requests, gaps: np.ndarray) -> dict[str, np.ndarray]:
    """Per request, what the given gaps (indices into the gap columns) add to
    its E2E and TPOT."""
    added = np.bincount(r.gap_row[gaps], weights=r.gap_ms[gaps], minlength=len(r.start))
    per_token = added / np.maximum(r.output_tokens - 1, 1)
    return {E2E.key: added, TPOT.key: per_token}


def itl_share(r: Requests, stalls: np.ndarray, explained: np.ndarray, limit: float) -> float:
    """Of the stalls longer than the ITL threshold, the share ``explained``."""
    over = r.gap_ms[stalls] > limit
    return round(float(explained[over].mean()), 3) if over.any() else 0.0


def interference(
    r: Requests, scenario: str, limits: Mapping[str, float], stalls: Stalls
) -> Finding | None:
    rows = r.rows(scenario)
    mine = rows[r.gap_row[stalls.index]]
    if mine.sum() < MIN_STALLS:
        return None
    coinciding = stalls.coinciding[mine]
    observed = float(coinciding.mean())
    if observed < MIN_COINCIDING_SHARE or observed < MIN_OVER_CHANCE * stalls.chance:
        return None
    index = stalls.index[mine][coinciding]
    gaps = r.gap_ms[index]
    scaling = fit(stalls.coinciding_inputs[mine][coinciding] / 1000.0, gaps, MIN_STALLS)
    share = shares(rows, limits, stall_parts(r, index), r)
    if ITL.key in limits:
        share[ITL.key] = itl_share(r, stalls.index[mine], coinciding, limits[ITL.key])
    evidence = {
        "stalls": int(mine.sum()),
        "coinciding": int(coinciding.sum()),
        "coinciding_share": round(observed, 3),
        "coinciding_with_cut_off": int(stalls.with_cut_off[mine][coinciding].sum()),
        "chance_share": round(stalls.chance, 3),
        "stall_ms_max": round(float(gaps.max()), 1),
        "stall_ms_median": round(float(np.median(gaps)), 1),
        "typical_itl_ms": round(stalls.itl_ms, 2),
        "tolerance_ms": round(stalls.tolerance_ms, 1),
    }
    cut = evidence["coinciding_with_cut_off"]
    cut_text = f"; {cut} of them at a request the run's end then cut off" if cut else ""
    scaled = ""
    if scaling is not None and scaling.slope > 0:
        evidence["stall_ms_per_1k_input_tokens"] = round(scaling.slope, 1)
        evidence["stall_input_rank_correlation"] = round(scaling.rho, 2)
        scaled = (
            f" Stalls grow with those prompts' length: {scaling.slope:.0f} ms per 1k prompt "
            f"tokens prefilled (rank correlation {scaling.rho:.2f})."
        )
    text = (
        f"Prefill interference: {evidence['coinciding']} of {evidence['stalls']} stalls inside "
        f"running streams (gaps of {STALL_OVER_ITL:g}x the typical ITL of "
        f"{stalls.itl_ms:.1f} ms or more; longest {evidence['stall_ms_max']:.0f} ms, median "
        f"{evidence['stall_ms_median']:.0f} ms) ended within {stalls.tolerance_ms:.0f} ms of "
        f"another request's first token ({100 * observed:.0f}%, where chance gives "
        f"{100 * stalls.chance:.0f}%{cut_text}): the running streams waited while new prompts were "
        f"prefilled.{scaled}"
    )
    return Finding(
        "prefill interference",
        text,
        evidence,
        GAP_METRICS,
        scenario,
        share=share,
    )


def preemption(
    r: Requests, scenario: str, limits: Mapping[str, float], stalls: Stalls
) -> Finding | None:
    rows = r.rows(scenario)
    ttft = r.ttft[rows]
    if rows.sum() < MIN_REQUESTS or not np.isfinite(ttft).any():
        return None
    floor = max(PREEMPT_OVER_TTFT * float(np.nanmedian(ttft)), PREEMPT_OVER_ITL * stalls.itl_ms)
    mine = rows[r.gap_row[stalls.index]]
    sign = mine & ~stalls.coinciding & (r.gap_ms[stalls.index] >= floor)
    if not sign.any():
        return None
    index = stalls.index[sign]
    requests = len(np.unique(r.gap_row[index]))
    share = shares(rows, limits, stall_parts(r, index), r)
    if ITL.key in limits:
        share[ITL.key] = itl_share(r, stalls.index[mine], sign[mine], limits[ITL.key])
    gaps = r.gap_ms[index]
    evidence = {
        "gaps": int(sign.sum()),
        "requests": requests,
        "gap_ms_max": round(float(gaps.max()), 1),
        "gap_ms_median": round(float(np.median(gaps)), 1),
        "ttft_ms_median": round(float(np.nanmedian(ttft)), 1),
    }
    text = (
        f"Preemption signs: {requests} requests had {evidence['gaps']} gaps mid-stream as long "
        f"as a first token takes (median {evidence['gap_ms_median']:.0f} ms, longest "
        f"{evidence['gap_ms_max']:.0f} ms, against a median TTFT of "
        f"{evidence['ttft_ms_median']:.0f} ms) that no other request's first token explains: "
        "a preempted request waits, then recomputes its prompt."
    )
    return Finding(
        "preemption",
        text,
        evidence,
        GAP_METRICS,
        scenario,
        share=share,
    )


def computed_tokens(r: Requests) -> np.ndarray:
    """Per request, the prompt tokens the engine computed: its input less the
    ones the server said it served from its prefix cache, where it said so (at
    least 0: an input counted by a tokenizer may fall short of the server's
    count). An engine that keeps each slot's prompt (llama.cpp) or a prefix
    cache makes a request's whole input a poor measure of its prefill."""
    less = np.maximum(r.input_tokens - r.cached_tokens, 0.0)
    return np.where(np.isfinite(r.cached_tokens), less, r.input_tokens)


def prefill_tokens(r: Requests, rows: np.ndarray) -> np.ndarray:
    """Per request, the tokens it left the engine to prefill: where the server
    reported its cached prompt tokens, its input less those
    (``computed_tokens``); elsewhere the tokens the turn before it in its
    conversation had not sent already: its input less that turn's input and
    output. The turn before is the request of the same scenario and
    conversation number one turn earlier that ended last before this one
    started (conversation numbers are per user, so several users' may match;
    the latest is the likeliest). A request's whole input where neither is
    known, or the turn found sent more than this request's input (another
    user's)."""
    tokens = computed_tokens(r)
    later = np.flatnonzero(rows & (r.turn > 0) & ~np.isfinite(r.cached_tokens))
    if not len(later):
        return tokens
    earlier = np.flatnonzero(rows)
    turns = int(r.turn.max()) + 1
    conversations = int(r.conversation.max()) + 1
    keys = (r.scenario * conversations + r.conversation.astype(np.int64)) * turns + r.turn
    _, ids = np.unique(np.concatenate([keys[earlier], keys[later] - 1]), return_inverse=True)
    own, asked = ids[: len(earlier)], ids[len(earlier) :]
    t0 = float(min(r.start.min(), r.end.min()))
    width = float(r.end.max() - t0) + 1.0
    order = np.argsort(own * width + (r.end[earlier] - t0), kind="stable")
    placed = (own * width + (r.end[earlier] - t0))[order]
    at = np.searchsorted(placed, asked * width + (r.start[later] - t0), side="right") - 1
    found = (at >= 0) & (own[order][np.maximum(at, 0)] == asked)
    before = earlier[order][np.maximum(at, 0)]
    sent = r.input_tokens[before] + r.output_tokens[before]
    use = found & (sent <= r.input_tokens[later])
    tokens[later[use]] = r.input_tokens[later[use]] - sent[use]
    return tokens


def cache_groups(r: Requests, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(cold rows, warm rows, how they were told apart): by the server's
    cached prompt tokens where it reported them (a hit: any), else by turn
    (first turns against later ones)."""
    reported = rows & np.isfinite(r.cached_tokens)
    if reported.sum() >= MIN_REQUESTS:
        return reported & (r.cached_tokens == 0), reported & (r.cached_tokens > 0), "hit"
    if (rows & (r.turn > 0)).any():
        return rows & (r.turn == 0), rows & (r.turn > 0), "turn"
    return None


def cache_effect(r: Requests, scenario: str, limits: Mapping[str, float]) -> Finding | None:
    """Requests the engine had to prefill whole (prefix-cache misses, or first
    turns) against the others, when they are much slower to a first token."""
    rows = r.rows(scenario) & np.isfinite(r.ttft)
    groups = cache_groups(r, rows)
    if groups is None:
        return None
    cold, warm, by = groups
    if cold.sum() < MIN_REQUESTS // 2 or warm.sum() < MIN_REQUESTS // 2:
        return None
    ttft_cold, ttft_warm = np.median(r.ttft[cold]), np.median(r.ttft[warm])
    if not ttft_cold >= CACHE_SPEEDUP * ttft_warm:
        return None
    in_cold, in_warm = np.nanmedian(r.input_tokens[cold]), np.nanmedian(r.input_tokens[warm])
    part = np.where(cold, r.ttft - ttft_warm, 0.0)
    names = {"hit": ("misses", "hits"), "turn": ("first_turn", "later_turns")}[by]
    evidence = {
        "by": "prefix-cache hit" if by == "hit" else "turn",
        f"ttft_ms_{names[0]}": round(float(ttft_cold), 1),
        f"ttft_ms_{names[1]}": round(float(ttft_warm), 1),
        f"input_tokens_{names[0]}": None if np.isnan(in_cold) else float(in_cold),
        f"input_tokens_{names[1]}": None if np.isnan(in_warm) else float(in_warm),
        names[0]: int(cold.sum()),
        names[1]: int(warm.sum()),
    }
    longer = "" if np.isnan(in_cold) else f" for {in_warm:.0f} input tokens against {in_cold:.0f}"
    warm_text, cold_text = (
        ("requests the server served partly from its prefix cache", "misses")
        if by == "hit"
        else ("later turns of a conversation", "first turns")
    )
    text = (
        f"Cache effect: {warm_text} got their first token in {ttft_warm:.0f} ms (median) "
        f"against {ttft_cold:.0f} ms on {cold_text}{longer}: the engine reuses the prompt "
        "it already holds (prefix cache, or a slot's cached prompt), so cold prompts pay "
        "the whole prefill."
    )
    return Finding(
        "cache effect",
        text,
        evidence,
        WAIT_METRICS,
        scenario,
        share=shares(rows, limits, {TTFT.key: part}, r),
    )


def ttft_findings(r: Requests, scenario: str, limits: Mapping[str, float]) -> list[Finding]:
    """Prefill-bound (TTFT with the tokens to prefill) against queueing (TTFT
    with the requests in flight at send)."""
    rows = r.with_first_token(scenario)
    if rows.sum() < MIN_REQUESTS:
        return []
    judged = r.rows(scenario) & np.isfinite(r.ttft)  # the SLO's requests: a share is of their miss
    findings = []
    whole, new = r.input_tokens, prefill_tokens(r, rows)
    fits = {"whole": fit(whole[rows] / 1000.0, r.ttft[rows])}
    if np.nanmax(r.turn[rows]) > 0 or np.isfinite(r.cached_tokens[rows]).any():
        fits["uncached"] = fit(new[rows] / 1000.0, r.ttft[rows])
    usable = {k: f for k, f in fits.items() if f is not None}
    if usable:
        which = max(usable, key=lambda k: usable[k].rho)
        line = usable[which]
        tokens = whole if which == "whole" else new
        part = line.slope * (tokens / 1000.0 - line.low)
        share = shares(judged, limits, {TTFT.key: part, E2E.key: part}, r)
        if line.rising:
            findings.append(prefill_bound(scenario, line, which, share, rows, r))
    in_flight = count_open(r.start, r.end, r.start) - 1
    queue = fit(in_flight[rows].astype(float), r.ttft[rows])
    if queue is not None and queue.rising:
        part = queue.slope * (in_flight - queue.low)
        low, high = (float(x) for x in np.percentile(in_flight[rows], [10, 90]))
        size, over = fit_size(rows, r)
        evidence = {
            "ms_per_request_in_flight": round(queue.slope, 1),
            "rank_correlation": round(queue.rho, 2),
            "in_flight_p10_p90": [low, high],
            "growth": round(queue.growth, 2),
            **size,
        }
        text = (
            f"Queueing: TTFT rises with the requests in flight when a request is sent, "
            f"{queue.slope:.0f} ms per request in flight ({over}; "
            f"rank correlation {queue.rho:.2f}; x{queue.growth:.1f} from {low:g} to {high:g} "
            "in flight): requests wait for the ones ahead of them."
        )
        findings.append(wait_finding("queueing", text, evidence, scenario, part, judged, limits, r))
    return findings


SPLIT_CAUSES = {"queue": "queueing", "prefill": "prefill-bound", "outside": "outside the engine"}
SPLIT_MEANING = {
    "queue": "requests waited in the engine's queue for a slot",
    "prefill": "the prompts' prefill is the first token's wait",
    "outside": "the time passed before the engine's clock started or after it stopped: the "
    "network, a gateway or proxy, HTTP, the server's front end (parsing, tokenizing)",
}


def engine_split(r: Requests, scenario: str, limits: Mapping[str, float]) -> Finding | None:
    """A failed TTFT SLO whose missing requests spent most of their TTFT in
    one part of the engine's own split (queue, prefill, outside), summed over
    them; None where the engine timed too few requests or no part is most."""
    if TTFT.key not in limits:
        return None
    timed = r.rows(scenario) & np.isfinite(r.ttft) & np.isfinite(r.prefill)
    miss = timed & (r.ttft > limits[TTFT.key])
    if timed.sum() < MIN_REQUESTS or not miss.any():
        return None
    queue = np.nan_to_num(r.queue[miss])
    parts = {
        "queue": queue,
        "prefill": r.prefill[miss],
        "outside": np.maximum(r.ttft[miss] - queue - r.prefill[miss], 0.0),
    }
    total = float(sum(part.sum() for part in parts.values()))
    share = {name: float(part.sum()) / total for name, part in parts.items()} if total else {}
    name = max(share, key=lambda n: share[n], default="")
    if not name or share[name] < MOSTLY:
        return None
    reported = bool(np.isfinite(r.queue[miss]).any())
    evidence: dict[str, Any] = {
        "requests_over": int(miss.sum()),
        "queue_reported": reported,
        **{f"{n}_share": round(v, 3) for n, v in share.items()},
        **{f"{n}_ms_p50": round(float(np.median(p)), 1) for n, p in parts.items()},
    }
    words = ", ".join(
        f"{100 * share[n]:.0f}% {n} (median {evidence[f'{n}_ms_p50']:g} ms)" for n in parts
    )
    unsaid = "" if reported else " The engine reports no queue time: its queue is in outside."
    text = (
        f"TTFT taken apart by the engine's own timings: the {evidence['requests_over']} requests "
        f"over the TTFT limit of {limits[TTFT.key]:g} ms spent {words}: "
        f"{SPLIT_MEANING[name]}.{unsaid}"
    )
    return Finding(
        SPLIT_CAUSES[name],
        text,
        evidence,
        WAIT_METRICS,
        scenario,
        share={TTFT.key: round(share[name], 3)},
    )


# The causes the engine's split confirms: its queue also backs a concurrency
# ceiling (the queue is there because the batch is full), the more specific one.
CONFIRMED_BY_SPLIT = {"queueing": ("queueing", "concurrency ceiling")}


def with_split(found: list[Finding | None], split: Finding | None) -> list[Finding | None]:
    """The engine's own split joins the first finding of the timelines that names
    its cause (its numbers join the evidence, its words follow the fit's; the
    fit's share ranks it): the fit stays first-hand, the engine confirms it. A
    cause only the split names is a finding of its own."""
    if split is None:
        return found
    causes = CONFIRMED_BY_SPLIT.get(split.cause, (split.cause,))
    for index, finding in enumerate(found):
        if finding is not None and finding.cause in causes:
            found[index] = replace(
                finding,
                text=f"{finding.text} {split.text}",
                evidence={**finding.evidence, **split.evidence},
            )
            return found
    return [*found, split]


def fit_size(rows: np.ndarray, r: Requests) -> tuple[dict[str, int], str]:
    """How many requests a TTFT fit took and how many of them the run's end
    cut off: as evidence, and in words for the finding's text."""
    requests, cut_off = int(rows.sum()), int((rows & r.cut_off).sum())
    words = f"{requests} requests"
    if cut_off:
        words += f", {cut_off} of them cut off by the run's end after their first token"
    return {"requests": requests, "cut_off": cut_off}, words


def prefill_bound(
    scenario: str, line: Fit, which: str, share: dict[str, float], rows: np.ndarray, r: Requests
) -> Finding:
    size, over = fit_size(rows, r)
    evidence = {
        "ms_per_1k_tokens": round(line.slope, 1),
        "intercept_ms": round(line.intercept, 1),
        "rank_correlation": round(line.rho, 2),
        "growth": round(line.growth, 2),
        "tokens": which,
        **size,
    }
    what = (
        "input tokens"
        if which == "whole"
        else "prompt tokens left to prefill (less the server's prefix-cache hits, or what an "
        "earlier turn sent)"
    )
    text = (
        f"Prefill-bound TTFT: TTFT rises with the {what}, {line.slope:.0f} ms per 1k tokens "
        f"over {line.intercept:.0f} ms (least squares over {over}; rank "
        f"correlation {line.rho:.2f}; x{line.growth:.1f} from the 10th to the 90th percentile "
        "of length): the prompt's prefill is the first token's wait."
    )
    return Finding("prefill-bound", text, evidence, WAIT_METRICS, scenario, share=share)


def concurrency_ceiling(r: Requests, scenario: str, limits: Mapping[str, float]) -> Finding | None:
    """Streams decoding at once held at a ceiling while others waited for a first token."""
    rows = r.rows(scenario)
    started = np.isfinite(r.first)
    if rows.sum() < MIN_REQUESTS or started.sum() < MIN_REQUESTS:
        return None
    window = np.array([r.start[rows].min(), r.end[rows].max()])
    if window[1] <= window[0]:
        return None
    opens, closes = r.first[started], r.end[started]
    probe = np.linspace(window[0], window[1], 512)
    decoding = count_open(opens, closes, probe)
    in_flight = count_open(r.start, r.end, probe)
    ceiling = int(np.ceil(np.quantile(decoding, CEILING_QUANTILE)))
    at_ceiling = float(np.mean(decoding >= ceiling))
    waiting = float(np.mean(in_flight > ceiling))
    if ceiling < 1 or at_ceiling < MIN_AT_CEILING or waiting < MIN_WAITING:
        return None
    instants, area = step_integral(opens, closes, ceiling)
    before_first = np.where(
        np.isfinite(r.first),
        np.interp(r.first, instants, area) - np.interp(r.start, instants, area),
        0.0,
    )
    part = before_first * 1000.0
    evidence = {
        "ceiling": ceiling,
        "time_at_ceiling": round(at_ceiling, 3),
        "time_with_more_in_flight": round(waiting, 3),
        "in_flight_max": int(in_flight.max()),
        "wait_ms_median": round(float(np.median(part[rows])), 1),
    }
    text = (
        f"Concurrency ceiling: at most {ceiling} streams decoded at once (at that ceiling "
        f"{100 * at_ceiling:.0f}% of the time) while up to {evidence['in_flight_max']} requests "
        f"were in flight ({100 * waiting:.0f}% of the time more than {ceiling}): the rest "
        f"waited for a slot, a median {evidence['wait_ms_median']:.0f} ms of their TTFT. A "
        "batch limit (maximum sequences, parallel slots) or a full KV cache caps the batch."
    )
    return wait_finding("concurrency ceiling", text, evidence, scenario, part, rows, limits, r)


def decode_bound(r: Requests, scenario: str, limits: Mapping[str, float]) -> Finding | None:
    """TPOT against the mean number of streams decoding during the request's decode."""
    rows = r.rows(scenario) & np.isfinite(r.tpot) & np.isfinite(r.first) & (r.end > r.first)
    started = np.isfinite(r.first)
    if rows.sum() < MIN_REQUESTS:
        return None
    instants, area = step_integral(r.first[started], r.end[started])
    span = r.end - np.where(started, r.first, r.end)
    beside = np.zeros(len(r.start))
    beside[rows] = (
        np.interp(r.end[rows], instants, area) - np.interp(r.first[rows], instants, area)
    ) / span[rows]
    line = fit(beside[rows], r.tpot[rows])
    if line is None or not line.rising:
        return None
    part = line.slope * (beside - line.low)
    share = shares(rows, limits, {TPOT.key: part}, r)
    if ITL.key in limits:
        share[ITL.key] = round(share_of_miss(r.tpot[rows], part[rows], limits[ITL.key]), 3)
    low, high = (round(float(x), 1) for x in np.percentile(beside[rows], [10, 90]))
    evidence = {
        "ms_per_stream": round(line.slope, 2),
        "intercept_ms": round(line.intercept, 2),
        "rank_correlation": round(line.rho, 2),
        "growth": round(line.growth, 2),
        "streams_p10_p90": [low, high],
    }
    text = (
        f"Decode-bound ITL: TPOT rises with the streams decoding beside a request, "
        f"{line.slope:.2f} ms per stream over {line.intercept:.1f} ms (rank correlation "
        f"{line.rho:.2f}; x{line.growth:.1f} from {low:g} to {high:g} streams): every step "
        "decodes the whole batch, so a larger batch makes each token slower."
    )
    return Finding(
        "decode-bound",
        text,
        evidence,
        GAP_METRICS,
        scenario,
        share=share,
    )


def saturation(r: Requests, scenario: str, limits: Mapping[str, float]) -> Finding | None:
    """In flight and TTFT growing through the run, completions per second flat."""
    rows = r.rows(scenario) & np.isfinite(r.ttft)
    if rows.sum() < SLICES * 2:
        return None
    t0, t1 = r.start[rows].min(), r.start[rows].max()
    if t1 <= t0:
        return None
    edges = np.linspace(t0, t1, SLICES + 1)
    slice_of = np.clip(np.searchsorted(edges, r.start[rows], side="right") - 1, 0, SLICES - 1)
    ends = r.end[rows]
    end_edges = np.linspace(ends.min(), ends.max(), SLICES + 1)
    ended = np.clip(np.searchsorted(end_edges, ends, side="right") - 1, 0, SLICES - 1)
    in_flight = count_open(r.start, r.end, (edges[:-1] + edges[1:]) / 2)
    completions = np.bincount(ended, minlength=SLICES).astype(float)
    ttft = np.array(
        [
            np.median(r.ttft[rows][slice_of == k]) if (slice_of == k).any() else np.nan
            for k in range(SLICES)
        ]
    )
    third = SLICES // 3
    head, tail = slice(0, third), slice(SLICES - third, SLICES)
    early_ttft, late_ttft = np.nanmean(ttft[head]), np.nanmean(ttft[tail])
    early_done, late_done = completions[head].mean(), completions[tail].mean()
    early_flight, late_flight = in_flight[head].mean(), in_flight[tail].mean()
    if not (
        early_ttft > 0
        and early_flight > 0
        and early_done > 0
        and late_flight >= MIN_INFLIGHT_GROWTH * early_flight
        and late_ttft >= MIN_TTFT_GROWTH * early_ttft
        and late_done <= MAX_THROUGHPUT_GROWTH * early_done
    ):
        return None
    slice_s = (end_edges[-1] - end_edges[0]) / SLICES
    part = r.ttft - early_ttft
    evidence = {
        "in_flight_first_third": round(float(early_flight), 1),
        "in_flight_last_third": round(float(late_flight), 1),
        "ttft_ms_first_third": round(float(early_ttft), 1),
        "ttft_ms_last_third": round(float(late_ttft), 1),
        "completed_per_s_first_third": round(float(early_done / slice_s), 2),
        "completed_per_s_last_third": round(float(late_done / slice_s), 2),
    }
    text = (
        f"Saturation: from the first third of the run to the last, requests in flight grew "
        f"{early_flight:.1f} -> {late_flight:.1f} and TTFT (median) {early_ttft:.0f} -> "
        f"{late_ttft:.0f} ms while completions stayed at "
        f"{evidence['completed_per_s_first_third']:g} -> "
        f"{evidence['completed_per_s_last_third']:g}/s: the server is at its capacity and the "
        "excess load queues."
    )
    return wait_finding("saturation", text, evidence, scenario, part, rows, limits, r)


def timeline_findings(
    timelines: Timelines, limits: Mapping[str, Mapping[str, float]]
) -> list[Finding]:
    """Every cause the timelines show for the scenarios' failed latency SLOs
    (``limits``: per scenario, metric -> the failed SLO's threshold), each
    explaining at least ``MIN_SHARE`` of one of them; none for a scenario
    without a failed latency SLO."""
    if len(timelines) == 0:
        return []
    r = Requests.of(timelines)
    itl = typical_itl(r)
    stalls = find_stalls(r, itl) if itl is not None else None
    findings: list[Finding | None] = []
    for scenario, failed in limits.items():
        if not failed:
            continue
        if stalls is not None:
            findings += [interference(r, scenario, failed, stalls)]
            findings += [preemption(r, scenario, failed, stalls)]
        found = [
            *ttft_findings(r, scenario, failed),
            cache_effect(r, scenario, failed),
            concurrency_ceiling(r, scenario, failed),
            decode_bound(r, scenario, failed),
            saturation(r, scenario, failed),
        ]
        findings += with_split(found, engine_split(r, scenario, failed))
    return [f for f in findings if f is not None and max(f.share.values(), default=0) >= MIN_SHARE]


def member_findings(scenario: str, kind: str, rows: Mapping[str, Bucket]) -> list[Finding]:
    """A replica (``kind``: or endpoint) that stands apart from the others of
    the deployment: slow to a first token, or failing; none with fewer than
    two members of ``MIN_REQUESTS`` requests each."""
    members = {n: b for n, b in rows.items() if b.counters.total >= MIN_REQUESTS}
    if len(members) < 2:
        return []
    total = sum(b.counters.total for b in rows.values())
    found = [slow_member(scenario, kind, members, total), failing_member(scenario, kind, members)]
    return [f for f in found if f is not None]


def slow_member(
    scenario: str, kind: str, members: Mapping[str, Bucket], total: int
) -> Finding | None:
    p50 = {
        name: b.histograms.histogram(TTFT.name).get_value_at_percentile(50.0) / 1000.0
        for name, b in members.items()
        if b.counters.ok >= MIN_REQUESTS
    }
    if len(p50) < 2:
        return None
    slowest = max(p50, key=p50.__getitem__)
    others = [v for name, v in p50.items() if name != slowest]
    if p50[slowest] < SLOW_MEMBER * max(others) or p50[slowest] - max(others) < MIN_SLOW_MS:
        return None
    share = members[slowest].counters.total / total
    evidence = {
        kind: slowest,
        "ttft_p50_ms": round(p50[slowest], 1),
        "others_ttft_p50_ms": {n: round(v, 1) for n, v in p50.items() if n != slowest},
        "request_share": round(share, 4),
    }
    text = (
        f"One {kind} is slow: {slowest} took {p50[slowest]:.0f} ms to a first token (median), "
        f"the other {kind}s {min(others):.0f} to {max(others):.0f} ms; it served "
        f"{share:.0%} of the requests. Look at that {kind} alone (its GPU, its load, its "
        "configuration), not at the deployment."
    )
    return Finding(f"slow_{kind}", text, evidence, WAIT_METRICS, scenario=scenario)


def failing_member(scenario: str, kind: str, members: Mapping[str, Bucket]) -> Finding | None:
    rate = {name: b.counters.failed / b.counters.total for name, b in members.items()}
    worst = max(rate, key=rate.__getitem__)
    others = max(v for name, v in rate.items() if name != worst)
    if rate[worst] < MIN_FAILING or rate[worst] < FAILING_MEMBER * others:
        return None
    errors = members[worst].counters.errors
    evidence = {
        kind: worst,
        "error_rate": round(rate[worst], 4),
        "others_error_rate": round(others, 4),
        "errors": dict(errors),
    }
    kinds = ", ".join(f"{k} {v}" for k, v in errors.most_common(3))
    text = (
        f"One {kind} is failing: {worst} failed {rate[worst]:.1%} of its requests ({kinds}), "
        f"the others at most {others:.1%}."
    )
    return Finding(f"failing_{kind}", text, evidence, ("error_rate", "goodput"), scenario=scenario)
