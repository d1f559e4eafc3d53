"""``metrics.prom``: a run's summary as OpenMetrics text, and its push to a Pushgateway.

Nightly results then land in the Prometheus and Grafana a team already runs.
Every sample carries the labels ``scenario``, ``engine``, ``model`` and
``revision`` (the run-wide ones, the engine's own latency and the generator's
error bound, all but ``scenario``); SLO samples add ``slo`` (metric and
statistic). Latencies are in seconds, as Prometheus names units; SLO values
and thresholds keep the SLO's own unit (ms for latencies, a fraction for
rates), named by the ``unit`` label.
The text is written by ``prometheus-client`` itself, so it parses as its
exposition format requires.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, push_to_gateway
from prometheus_client.metrics_core import GaugeMetricFamily, Metric, StateSetMetricFamily
from prometheus_client.openmetrics.exposition import generate_latest

from slogate.analysis.documents.neutral import neutral_text
from slogate.analysis.verdict.compare import LATENCY_METRICS
from slogate.analysis.verdict.slo import FRACTION_METRICS
from slogate.scenarios.metrics import E2E, ITL, TTFT

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import Comparison, Distribution, Summary

VERDICTS = ("pass", "fail", "inconclusive", "invalid")
QUANTILES = {"p50": "0.5", "p90": "0.9", "p95": "0.95", "p99": "0.99", "p999": "0.999"}
TARGET_LABELS = ("scenario", "engine", "model", "revision")
RUN_LABELS = TARGET_LABELS[1:]
PUSH_JOB = "slogate"


def target_values(summary: Summary, scenario: str) -> list[str]:
    return [neutral_text(scenario), *run_values(summary)]


def run_values(summary: Summary) -> list[str]:
    run = summary.run
    engine = run.engine or {}
    values = (engine.get("owned_by"), engine.get("model"), run.git_revision)
    return [neutral_text(str(value or "")) for value in values]


def unit_of(metric: str) -> str:
    return "ms" if metric.endswith("_ms") else "ratio" if metric in FRACTION_METRICS else ""


class SummaryCollector:
    """A ``prometheus-client`` collector that yields one run's summary as metric families."""

    def __init__(self, summary: Summary) -> None:
        self.summary = summary

    def gauge(
        self, name: str, doc: str, extra: tuple[str, ...] = (), run_wide: bool = False
    ) -> GaugeMetricFamily:
        labels = RUN_LABELS if run_wide else TARGET_LABELS
        return GaugeMetricFamily(f"slogate_{name}", doc, labels=[*labels, *extra])

    def collect(self) -> Iterator[Metric]:
        from slogate.analysis.documents.contracts import Comparison

        s = self.summary
        slo_labels = ("slo", "unit")
        value = self.gauge("slo_value", "Measured value of an SLO statistic", slo_labels)
        threshold = self.gauge("slo_threshold", "The SLO's limit", slo_labels)
        margin = self.gauge("slo_margin_ratio", "Margin to the limit, relative", slo_labels)
        slo_verdict = StateSetMetricFamily(
            "slogate_slo_verdict", "Verdict of one SLO", labels=[*TARGET_LABELS, "slo"]
        )
        verdict = StateSetMetricFamily(
            "slogate_verdict", "Verdict of the run's scenario", labels=list(TARGET_LABELS)
        )
        exit_code = self.gauge("exit_code", "Exit code of the run (the CI gate)")
        started = self.gauge("run_start_timestamp_seconds", "When the run started (Unix time)")
        latency = self.gauge("latency_seconds", "Latency percentiles", ("metric", "quantile"))
        throughput = self.gauge("throughput_per_second", "Successful work per second", ("what",))
        goodput = self.gauge("goodput_ratio", "Share of requests within every per-request limit")
        regressions = self.gauge("regressions", "Gated percentiles worse than the baseline")
        cost = self.gauge(
            "cost_per_million_tokens",
            "Price per million tokens of a kind at the measured throughput",
            ("kind",),
        )
        slice_verdict = StateSetMetricFamily(
            "slogate_slice_verdict",
            "Verdict of one --slice of the run (its start in seconds)",
            labels=[*TARGET_LABELS, "slice_start_seconds"],
        )
        cannot_tell = self.gauge(
            "cannot_tell",
            "Gated percentiles that rose by no more than the load generators' error",
        )
        stamp = start_timestamp(s)
        compared = s.baseline if isinstance(s.baseline, Comparison) else None
        regressed = {} if compared is None else deltas_by_scenario(compared, "regression")
        untold = {} if compared is None else deltas_by_scenario(compared, "cannot_tell")
        for name, block in s.scenarios.items():
            target = target_values(s, name)
            for slo in block.slo:
                key = [*target, f"{slo.metric}:{slo.stat}"]
                for family, amount in ((value, slo.value), (threshold, slo.threshold)):
                    if amount is not None:
                        family.add_metric([*key, unit_of(slo.metric)], amount)
                if slo.margin_pct is not None:
                    margin.add_metric([*key, unit_of(slo.metric)], slo.margin_pct / 100)
                slo_verdict.add_metric(key, {v: v == slo.verdict for v in VERDICTS})
            verdict.add_metric(target, {v: v == block.verdict for v in VERDICTS})
            exit_code.add_metric(target, s.exit_code)
            if stamp is not None:
                started.add_metric(target, stamp)
            add_latencies(latency, target, block.metrics)
            for what in ("requests", "output_tokens", "input_tokens", "goodput_requests"):
                rate = getattr(block.throughput, f"{what}_per_s")
                if rate is not None:
                    throughput.add_metric([*target, what], rate)
            for kind in ("output", "input", "goodput"):
                price = getattr(block.cost, f"per_million_{kind}_tokens", None)
                if price is not None:
                    cost.add_metric([*target, kind], price)
            for sl in block.slices:
                states = {v: v == sl.verdict for v in VERDICTS}
                slice_verdict.add_metric([*target, f"{sl.start_s:g}"], states)
            if block.goodput is not None and block.goodput.fraction is not None:
                goodput.add_metric(target, block.goodput.fraction)
            if compared is not None:
                regressions.add_metric(target, regressed.get(name, 0))
                cannot_tell.add_metric(target, untold.get(name, 0))
        families = (value, threshold, margin, slo_verdict, verdict, exit_code, started)
        yield from (*families, latency, throughput, goodput, regressions, cannot_tell)
        yield from (slice_verdict, cost)
        yield from self.probes()
        yield from self.apart()
        yield from self.run_wide()

    def apart(self) -> Iterator[Metric]:
        """Each endpoint's and replica's row of a scenario (``by`` endpoint or
        replica, and its ``name``): latency percentiles, requests by outcome
        and its own verdict on the scenario's SLOs, so a dashboard shows
        which replica slowed down or failed. A ``by``'s requests add up to
        the scenario's."""
        extra = ("by", "name")
        latency = self.gauge(
            "apart_latency_seconds",
            "Latency percentiles of one endpoint or replica",
            (*extra, "metric", "quantile"),
        )
        requests = self.gauge(
            "apart_requests", "Requests of one endpoint or replica, by outcome", (*extra, "outcome")
        )
        verdict = StateSetMetricFamily(
            "slogate_apart_verdict",
            "Verdict of one endpoint or replica on its scenario's SLOs",
            labels=[*TARGET_LABELS, *extra],
        )
        for scenario, block in self.summary.scenarios.items():
            target = target_values(self.summary, scenario)
            for by, rows in (("endpoint", block.endpoints), ("replica", block.replicas)):
                for name, row in rows.items():
                    key = [*target, by, neutral_text(name)]
                    add_latencies(latency, key, row.metrics)
                    for outcome in ("ok", "failed"):
                        requests.add_metric([*key, outcome], getattr(row.requests, outcome))
                    verdict.add_metric(key, {v: v == row.verdict for v in VERDICTS})
        yield from (latency, requests, verdict)

    def probes(self) -> Iterator[Metric]:
        """``--probes``: their latency percentiles and counts, under the scenario
        whose API and model they used, apart from its own series."""
        latency = self.gauge(
            "probe_latency_seconds", "Latency percentiles of --probes", ("metric", "quantile")
        )
        requests = self.gauge("probe_requests", "Probes sent, by outcome", ("outcome",))
        probes = self.summary.probes
        if probes is not None:
            target = target_values(self.summary, probes.scenario)
            for metric in (TTFT.name, E2E.name):
                stats = probes.metrics[f"{metric}_ms"]
                for stat, quantile in QUANTILES.items():
                    ms = getattr(stats, stat)
                    if ms is not None:
                        latency.add_metric([*target, metric, quantile], ms / 1000)
            for outcome in ("ok", "failed"):
                requests.add_metric([*target, outcome], getattr(probes.requests, outcome))
        yield from (latency, requests)

    def run_wide(self) -> Iterator[Metric]:
        """What the run measured over all its scenarios: the engine's own latency
        beside the client's (a drift between them on a dashboard is the
        generator's or the network's), and the generator's error bound."""
        s = self.summary
        run = run_values(s)
        engine_mean = self.gauge(
            "engine_latency_mean_seconds",
            "The engine's own mean, from its histograms",
            ("metric",),
            run_wide=True,
        )
        drift = self.gauge(
            "client_minus_engine_seconds",
            "The client's mean minus the engine's own",
            ("metric",),
            run_wide=True,
        )
        bound = self.gauge(
            "generator_error_bound_seconds",
            "The load generator's error bound on a TTFT or ITL percentile",
            ("quantile",),
            run_wide=True,
        )
        measured = s.engine_latency
        for metric in (TTFT.name, ITL.name):
            stat = None if measured is None else getattr(measured, f"{metric}_ms")
            if stat is None:
                continue
            if stat.mean is not None:
                engine_mean.add_metric([*run, metric], stat.mean / 1000)
            if stat.client_minus_engine is not None:
                drift.add_metric([*run, metric], stat.client_minus_engine / 1000)
        bounds = (s.generator.error_bound_ms or {}).get(TTFT.key) or {}
        for stat, quantile in QUANTILES.items():
            at = bounds.get(stat)
            if at is not None:
                bound.add_metric([*run, quantile], at / 1000)
        energy = self.gauge(
            "energy_joules", "GPU energy of the measured window, per unit", ("per",), run_wide=True
        )
        e = s.energy
        if e is not None:
            for per, value in (("run", e.joules), ("output_token", e.per_output_token_j),
                               ("request", e.per_request_j)):  # fmt: skip
                if value is not None:
                    energy.add_metric([*run, per], value)
        yield from (engine_mean, drift, bound, energy, *self.stops(run))

    def stops(self, run: list[str]) -> Iterator[Metric]:
        """When the run was found past saturation, and when it stopped early (only
        when it did), in seconds since its start."""
        s = self.summary
        saturated = self.gauge(
            "saturated", "1 when the run was found past saturation (--saturation)", run_wide=True
        )
        checked = s.run.saturation
        if checked is not None:
            saturated.add_metric(run, 1 if checked.found else 0)
        yield saturated
        for name, doc, at in (
            (
                "saturated_at_seconds",
                "When the run was found past saturation",
                checked and checked.found,
            ),
            (
                "stopped_early_at_seconds",
                "When --abort-on-fail stopped the run",
                s.run.stopped_early,
            ),
        ):
            family = self.gauge(name, doc, run_wide=True)
            if at:
                family.add_metric(run, at.at_s)
            yield family


def add_latencies(
    family: GaugeMetricFamily, key: list[str], metrics: Mapping[str, Distribution]
) -> None:
    """The headline latencies' percentiles, in seconds, under ``key`` (the
    family's labels before ``metric`` and ``quantile``)."""
    for metric in LATENCY_METRICS:
        stats = metrics.get(f"{metric}_ms")
        for stat, quantile in QUANTILES.items():
            ms = None if stats is None else getattr(stats, stat)
            if ms is not None:
                family.add_metric([*key, metric, quantile], ms / 1000)


def start_timestamp(summary: Summary) -> float | None:
    text = summary.run.started_at
    try:
        return datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def deltas_by_scenario(baseline: Comparison, flag: str) -> dict[str, int]:
    """How many of each scenario's deltas carry ``flag`` (regression, cannot_tell)."""
    counts: dict[str, int] = {}
    for d in baseline.deltas:
        if getattr(d, flag):
            counts[d.scenario] = counts.get(d.scenario, 0) + 1
    return counts


def registry_of(summary: Summary | Mapping[str, Any]) -> CollectorRegistry:
    """A registry holding the summary, read through its contract."""
    from slogate.analysis.documents.contracts import Summary, as_model

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SummaryCollector(as_model(Summary, summary, "summary")))
    return registry


def openmetrics_text(summary: Summary | Mapping[str, Any]) -> str:
    """The summary as OpenMetrics text (ends with ``# EOF``)."""
    return generate_latest(registry_of(summary)).decode("utf-8")


def push_metrics(summary: Summary | Mapping[str, Any], url: str, timeout_s: float = 10.0) -> None:
    """PUT the run's metrics to the Pushgateway at ``url`` (job ``slogate``, grouped by
    the run's scenarios, so each nightly target replaces its own previous push).
    Raises OSError (with the URL) when the gateway cannot be reached or refuses."""
    from slogate.analysis.documents.contracts import Summary, as_model

    summary = as_model(Summary, summary, "summary")
    group = {"instance": "+".join(summary.scenarios) or "none"}
    registry = registry_of(summary)
    try:
        push_to_gateway(url, job=PUSH_JOB, registry=registry, grouping_key=group, timeout=timeout_s)
    except OSError as error:
        raise OSError(f"--push-metrics {url}: {error}") from error
