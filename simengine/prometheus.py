"""``/metrics`` in vLLM's Prometheus names, one registry per server.

Gauges and counters are read from the scheduler when scraped, so the hot path
pays nothing for them. Latency histograms are kept here as plain bucket counts
because every sequence of a decode step shares the same inter-token gap: the
engine adds a whole step's tokens with one :meth:`BucketHistogram.observe` call
instead of a thousand. Times are on the engine's model clock (equal to wall
time at speedup 1).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from slogate.simengine.scheduler import Scheduler

# vLLM's bucket boundaries (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
    50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


# vLLM's NIXL connector's transfer-time buckets (its kv_connector metrics).
TRANSFER_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)


class BucketHistogram:
    """A Prometheus histogram that accepts many equal observations at once."""

    __slots__ = ("_bounds", "_counts", "_sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = tuple(bounds)
        self._counts = [0] * (len(bounds) + 1)  # last: +Inf
        self._sum = 0.0

    def observe(self, value: float, count: int = 1) -> None:
        self._counts[bisect_left(self._bounds, value)] += count
        self._sum += value * count

    @property
    def count(self) -> int:
        return sum(self._counts)

    def family(self, name: str, doc: str, labels: dict[str, str]) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, doc, labels=list(labels))
        cumulative, buckets = 0, []
        for bound, n in zip([*self._bounds, float("inf")], self._counts, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        family.add_metric(list(labels.values()), buckets, self._sum)
        return family


class EngineMetrics:
    """The engine's metrics and the Prometheus collector that exports them."""

    def __init__(self, scheduler: Scheduler, model_name: str) -> None:
        self.scheduler = scheduler
        self.labels = {"model_name": model_name, "engine": "0"}
        self.ttft = BucketHistogram(TTFT_BUCKETS)
        self.itl = BucketHistogram(ITL_BUCKETS)
        self.e2e = BucketHistogram(E2E_BUCKETS)
        # a request's time in each phase: its first step to its first token,
        # then to its last; and a disaggregated decode worker's KV transfers
        self.prefill = BucketHistogram(E2E_BUCKETS)
        self.decode = BucketHistogram(E2E_BUCKETS)
        self.kv_transfer = BucketHistogram(TRANSFER_BUCKETS)
        self.finished = {"stop": 0, "length": 0, "abort": 0}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def _speculation(
        self, counter: Callable[[str, str, float], CounterMetricFamily]
    ) -> Iterator[Metric]:
        """vLLM's speculative-decoding counters (vllm/v1/spec_decode/metrics.py),
        registered only when speculation is on, as vLLM does."""
        s = self.scheduler
        yield counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", s.spec_drafts
        )
        yield counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", s.spec_draft_tokens
        )
        yield counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            s.spec_accepted_tokens,
        )
        per_position = CounterMetricFamily(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labels=[*self.labels, "position"],
        )
        for position, n in enumerate(s.spec_accepted_per_position):
            per_position.add_metric([*self.labels.values(), str(position)], n)
        yield per_position

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        """Called by the registry on each scrape."""
        s, labels = self.scheduler, self.labels
        names, values = list(labels), list(labels.values())

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            return family

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, doc, labels=names)
            family.add_metric(values, value)
            return family

        yield gauge(
            "vllm:num_requests_running", "Requests in model execution batches.", len(s.running)
        )
        yield gauge(
            "vllm:num_requests_waiting", "Requests waiting to be processed.", len(s.waiting)
        )
        yield gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", s.kv.usage
        )
        profile = s.profile
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the KV cache configuration.",
            labels=["block_size", "num_gpu_blocks", "cache_dtype", "enable_prefix_caching"],
        )
        info.add_metric(
            [
                str(profile.block_size),
                str(profile.kv_blocks),
                profile.kv_dtype,
                str(profile.enable_prefix_caching),
            ],
            1.0,
        )
        yield info
        yield counter(
            "vllm:num_preemptions", "Cumulative number of preemptions.", s.num_preemptions
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
        yield counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", s.generation_tokens
        )
        yield counter(
            "vllm:prefix_cache_queries", "Prefix-cache queries, in tokens.", s.prefix_queries
        )
        yield counter("vllm:prefix_cache_hits", "Prefix-cache hits, in tokens.", s.prefix_hits)
        if s.speculative_tokens:
            yield from self._speculation(counter)
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*names, "finished_reason"],
        )
        for reason, n in self.finished.items():
            success.add_metric([*values, reason], n)
        yield success
        yield self.ttft.family(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
        )
        yield self.itl.family(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            labels,
        )
        yield self.e2e.family(
            "vllm:e2e_request_latency_seconds", "Histogram of end to end request latency.", labels
        )
        yield self.prefill.family(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            labels,
        )
        yield self.decode.family(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            labels,
        )
        if self.kv_transfer.count:
            yield self.kv_transfer.family(
                "vllm:nixl_xfer_time_seconds",
                "Histogram of transfer duration for NIXL KV Cache transfers.",
                labels,
            )
