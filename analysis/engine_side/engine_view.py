"""The engine's own TTFT and ITL over the measured window, beside the client's.

An engine that exports vLLM's (or SGLang's) latency histograms says how long
it thinks its first tokens and token gaps took. The scrapes taken during the
run bracket the measured window: the histogram's growth from the first scrape
at or after the warm-up's end to the last one (taken after the load stopped)
is the engine's view of the requests the client measured. The two differ by
what lies between them (the network, the HTTP server before the engine's
clock starts, the client's reading), so a gap larger than that says one of
them is not measuring what the other is.

The engine's histogram counts every client's requests, and its window edges
are those of the scrapes (every few seconds), not of the client's requests;
both counts are shown so the comparison can be judged. Its percentiles are
given as the bucket each falls in: the buckets are coarse (vLLM's TTFT
buckets are 20 ms wide around 50 ms) and any value inside is a guess.
"""

from __future__ import annotations

from typing import Any

from hdrh.histogram import HdrHistogram

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.engine_side.router_metrics import ROUTER_COUNTERS, ROUTER_GAUGES
from slogate.analysis.engine_side.server_metrics import (
    COUNTERS,
    GAUGES,
    Histogram,
    bucket_bounds,
    histogram_delta,
)
from slogate.analysis.measurement.recorder import Bucket
from slogate.scenarios.metrics import ITL, TTFT

ENGINE_SOURCE = "engine"
GPU_SOURCE = "dcgm"
# the engine's histogram, and the client's of the same quantity
COMPARED = {TTFT.key: ("ttft_seconds", TTFT.name), ITL.key: ("itl_seconds", ITL.name)}
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
PHASES = ("prefill", "decode", "kv_transfer")
MS_PER_S = 1000.0
US_PER_MS = 1000.0


def engine_latency(run: RunData) -> dict[str, Any] | None:
    """``{"engine", "window_s", "ttft_ms", "itl_ms"}`` (a quantity the engine
    does not export is left out), or None when no two scrapes with latency
    histograms bracket the measured window."""
    measured = measured_scrapes(run, with_histograms=True)
    if len(measured) < 2:
        return None
    first, last = measured[0], measured[-1]
    client = _client_bucket(run)
    out: dict[str, Any] = {"engine": last.get("engine"), "window_s": [first["t_s"], last["t_s"]]}
    for key, (engine_name, client_name) in COMPARED.items():
        if engine_name not in first["histograms"] or engine_name not in last["histograms"]:
            continue
        delta = histogram_delta(
            Histogram.from_dict(first["histograms"][engine_name]),
            Histogram.from_dict(last["histograms"][engine_name]),
        )
        if delta is not None:
            out[key] = compared(delta, _client_histogram(client, client_name))
    cache = prefix_cache_compared(first.get("series") or {}, last.get("series") or {}, client)
    if cache is not None:
        out["prefix_cache"] = cache
    return out


def prefix_cache_compared(
    first: dict[str, float], last: dict[str, float], client: Bucket
) -> dict[str, Any] | None:
    """The engine's prefix-cache hit rate over the window (its hit and query
    counters, in tokens) beside the client's from the replies' cached_tokens;
    None when the engine exports no such counters. They differ by requests
    the client did not measure (cut off at the stop, cancelled, another
    client's); on an engine that does not say cached_tokens, the client has
    no rate."""
    names = ("prefix_cache_hits_total", "prefix_cache_queries_total")
    if not all(n in first and n in last for n in names):
        return None
    hits = last[names[0]] - first[names[0]]
    queries = last[names[1]] - first[names[1]]
    c = client.counters
    reported = c.cache_reported > 0 and c.input_tokens > 0
    return {
        "engine_hits": hits,
        "engine_queries": queries,
        "engine_hit_rate": round(hits / queries, 6) if queries > 0 else None,
        "client_cached_tokens": c.cached_tokens if reported else None,
        "client_prompt_tokens": c.input_tokens,
        "client_hit_rate": round(c.cached_tokens / c.input_tokens, 6) if reported else None,
    }


def servers_view(run: RunData) -> dict[str, dict[str, Any]]:
    """Each named replica's own metrics over the measured window (``--metrics-url
    NAME=URL``), as :func:`engine_metrics` reads the engine's, with its tier:
    the imbalance of a deployment as its servers saw it."""
    tiers: dict[str, str | None] = {}
    for sample in run.server_metrics:
        source = sample.get("source")
        if source not in (ENGINE_SOURCE, GPU_SOURCE, None):
            tiers[str(source)] = sample.get("tier")
    view = {}
    for name, tier in sorted(tiers.items()):
        found = engine_metrics(run, name)
        if found is not None:
            view[name] = {**found, "tier": tier, "time_ms": phase_means(run, name)}
            routes = router_view(run, name)
            if routes is not None:
                view[name]["routes"] = routes
    return view


def router_view(run: RunData, source: str) -> dict[str, dict[str, Any]] | None:
    """A router's own account of each replica over the measured window
    (``slogate.analysis.engine_side.router_metrics``): its counters' growth (requests it
    sent there, failures) and its gauges' mean and peak (in flight, queued);
    None for a source that is not a router."""
    measured = measured_scrapes(run, with_histograms=False, source=source)
    routed = [s["routes"] for s in measured if "routes" in s]
    if not routed:
        return None
    first, last = routed[0], routed[-1]
    view: dict[str, dict[str, Any]] = {}
    for replica in sorted({name for routes in routed for name in routes}):
        row: dict[str, Any] = {}
        for name in ROUTER_COUNTERS:
            before = (first.get(replica) or {}).get(name, 0.0)
            after = (last.get(replica) or {}).get(name)
            if after is not None and after >= before and len(routed) > 1:
                row[name] = round(after - before, 6)
        for name in ROUTER_GAUGES:
            values = [r[replica][name] for r in routed if name in r.get(replica, {})]
            if values:
                row[name] = {"mean": round(sum(values) / len(values), 6), "max": max(values)}
        view[replica] = row
    return view


def phase_means(run: RunData, source: str) -> dict[str, float]:
    """A server's mean time per request in each phase it exports over the
    measured window, in ms: prefill, decode, and the KV transfers of a
    disaggregated decode worker (``slogate.analysis.engine_side.server_metrics``)."""
    measured = measured_scrapes(run, with_histograms=True, source=source)
    if len(measured) < 2:
        return {}
    first, last = measured[0]["histograms"], measured[-1]["histograms"]
    means = {}
    for phase in PHASES:
        name = f"{phase}_seconds"
        if name not in first or name not in last:
            continue
        delta = histogram_delta(Histogram.from_dict(first[name]), Histogram.from_dict(last[name]))
        if delta is not None and delta.count > 0:
            means[phase] = round(delta.sum / delta.count * MS_PER_S, 3)
    return means


def engine_metrics(run: RunData, source: str = ENGINE_SOURCE) -> dict[str, Any] | None:
    """The engine's own counters and gauges over the measured window, under
    slogate's canonical names: each counter's growth (tokens prompted and
    generated, preemptions, prefix-cache hits and queries), each gauge's mean
    and peak over the scrapes (running, waiting, KV-cache usage). None when
    fewer than two scrapes fall in the window. A counter that went down (the
    engine restarted) is left out."""
    measured = measured_scrapes(run, with_histograms=False, source=source)
    if len(measured) < 2:
        return None
    first, last = measured[0]["series"], measured[-1]["series"]
    counters = {
        name: round(last[name] - first[name], 6)
        for name in COUNTERS
        if name in first and name in last and last[name] >= first[name]
    }
    gauges = {}
    for name in GAUGES:
        values = [s["series"][name] for s in measured if name in s["series"]]
        if values:
            gauges[name] = {"mean": round(sum(values) / len(values), 6), "max": max(values)}
    return {
        "engine": measured[-1].get("engine"),
        "window_s": [measured[0]["t_s"], measured[-1]["t_s"]],
        "scrapes": len(measured),
        "counters": counters,
        "gauges": gauges,
    }


def measured_scrapes(
    run: RunData, *, with_histograms: bool, source: str = ENGINE_SOURCE
) -> list[dict[str, Any]]:
    """The engine's (or ``source``'s) scrapes at or after the warm-up's end, in time order."""
    start_s = float(run.meta.get("warmup_s") or 0.0)
    return sorted(
        (
            s
            for s in run.server_metrics
            if s.get("source") == source
            and s.get("t_s") is not None
            and s["t_s"] >= start_s
            and (s.get("histograms") or not with_histograms)
        ),
        key=lambda s: s["t_s"],
    )


def compared(engine: Histogram, client: HdrHistogram | None) -> dict[str, Any]:
    """One quantity: the engine's count, mean and percentile buckets (ms), the
    client's count and mean, and the client's mean minus the engine's."""
    count = int(engine.count)
    mean = round(engine.sum / engine.count * MS_PER_S, 3) if count else None
    client_count = client.get_total_count() if client is not None else 0
    client_mean = (
        round(client.get_mean_value() / US_PER_MS, 3)
        if client is not None and client_count
        else None
    )
    difference = (
        round(client_mean - mean, 3) if client_mean is not None and mean is not None else None
    )
    return {
        "count": count,
        "mean": mean,
        "buckets": {key: _in_ms(bucket_bounds(engine, q)) for key, q in QUANTILES.items()},
        "client_count": client_count,
        "client_mean": client_mean,
        "client_minus_engine": difference,
    }


def _in_ms(bounds: tuple[float, float] | None) -> list[float | None] | None:
    """A bucket's bounds in ms; the last bucket's upper bound, infinite, as None."""
    if bounds is None:
        return None
    lower, upper = bounds
    return [
        round(lower * MS_PER_S, 3),
        None if upper == float("inf") else round(upper * MS_PER_S, 3),
    ]


def _client_bucket(run: RunData) -> Bucket:
    """Every scenario's measured requests together: the engine served them all."""
    merged = Bucket()
    for name in run.scenario_names():
        merged.add(run.overall(name))
    return merged


def _client_histogram(bucket: Bucket, name: str) -> HdrHistogram | None:
    return bucket.histograms.histogram(name) if name in bucket.histograms else None
