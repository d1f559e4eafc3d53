"""HDR histograms of latency metrics, in microseconds: record, encode, decode, merge.

One :class:`HistogramSet` holds a histogram per metric name. Every histogram
covers 1 us to 1 h at 3 significant digits (docs/design.md), so any two can be
merged exactly: Locust workers ship encoded sets to the master, and saved sets
let a report be re-rendered or two runs compared without loss.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from hdrh.codec import HdrHistogramEncoder
from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3
PENDING_MAX = 4096  # batched values a histogram holds before they are recorded


class Histogram(HdrHistogram):
    """``hdrh``'s histogram without its reference cycle.

    ``hdrh``'s encoder points back at its histogram, so every histogram dropped
    (each drained, shipped or decoded one: 188 KB apiece) is cyclic garbage
    that only a pass of the cyclic collector frees, and those passes paused
    the load generator for longer than an inter-token gap (docs/load.md,
    "The generator's own error"). With a weak back-reference, reference
    counting frees a histogram the moment it is dropped.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.encoder.histogram = weakref.proxy(self)


def new_histogram() -> HdrHistogram:
    return Histogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


# Buckets of a histogram of the standard range (every histogram of a run has it).
COUNTS_LEN = new_histogram().counts_len


def histogram_from_counts(counts: np.ndarray) -> HdrHistogram:
    """A histogram of the standard range holding ``counts`` (one per bucket index,
    as its counts array orders them): what a journal's deltas add up to."""
    histogram = new_histogram()
    np.ctypeslib.as_array(histogram.counts)[: len(counts)] = counts
    filled = np.flatnonzero(counts)
    if len(filled):
        histogram.set_internal_tacking_values(
            int(filled[0]), int(filled[-1]), int(counts[filled].sum())
        )
    return histogram


def record_many(histogram: HdrHistogram, values_us: np.ndarray, counts: np.ndarray) -> None:
    """Add ``counts[i]`` samples of ``values_us[i]`` (int64, within the range) at once.

    The same bucket arithmetic as ``HdrHistogram.record_value``, vectorized over
    the histogram's counts array: recording a request's hundred ITL samples one
    Python call at a time cost more than everything else the client does per
    event."""
    h = histogram
    bit_length = np.frexp((values_us | h.sub_bucket_mask).astype(np.float64))[1]
    bucket = bit_length - (h.unit_magnitude + h.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values_us >> (bucket + h.unit_magnitude)
    index = (
        ((bucket + 1) << h.sub_bucket_half_count_magnitude) + sub_bucket - h.sub_bucket_half_count
    )
    # bincount, not np.add.at: five times faster for a batch of thousands (float
    # weights stay exact far beyond any count a run reaches); over the batch's
    # span of buckets only, not all 23,552: a flush cost 290 us that way.
    lowest = int(index.min())
    added = np.bincount(index - lowest, weights=counts)
    span = np.ctypeslib.as_array(h.counts)[lowest : lowest + len(added)]
    np.add(span, added.astype(np.uint64), out=span)
    h.total_count += int(counts.sum())
    h.min_value = min(h.min_value, int(values_us.min()))
    h.max_value = max(h.max_value, int(values_us.max()))


def decode_histogram(encoded: str) -> HdrHistogram:
    """Decode into a histogram of the standard range (whatever the encoder used).
    ``hdrh``'s own ``decode_and_add`` leaves its decoded copy behind as cyclic
    garbage; this one decodes into an acyclic :class:`Histogram`."""
    hdr_payload = HdrHistogramEncoder.decode(encoded, True)
    header = hdr_payload.payload
    decoded = Histogram(
        header.lowest_trackable_value,
        header.highest_trackable_value,
        header.significant_figures,
        hdr_payload=hdr_payload,
    )
    histogram = new_histogram()
    histogram.add(decoded)
    return histogram


@dataclass(frozen=True, slots=True)
class Recorded:
    """The non-empty buckets of a histogram as numpy arrays, for queries in bulk.

    ``hdrh`` answers each percentile with a Python loop over every bucket and
    the mean with its slow recorded-value iterator; a report asks for hundreds
    of them. The rank rule and the equivalent-value ranges are the library's
    own, so every answer equals ``get_value_at_percentile``/``get_mean_value``.
    """

    lowest: np.ndarray
    highest: np.ndarray
    counts: np.ndarray
    cumulative: np.ndarray

    @property
    def total(self) -> int:
        return int(self.cumulative[-1]) if len(self.cumulative) else 0

    def value_at_rank(self, rank: int) -> int:
        """Highest equivalent value of the ``rank``-th smallest sample (1-based)."""
        index = int(np.searchsorted(self.cumulative, max(rank, 1), side="left"))
        return int(self.highest[min(index, len(self.highest) - 1)])

    def value_at_percentile(self, percentile: float) -> int:
        if not self.total:
            return 0
        rank = int(min(percentile, 100.0) * self.total / 100 + 0.5)
        if percentile == 0:
            return int(self.lowest[0])
        return self.value_at_rank(rank)

    def mean(self) -> float:
        if not self.total:
            return 0.0
        middles = self.lowest + (self.highest - self.lowest + 1) // 2
        return float(np.dot(middles.astype(np.float64), self.counts) / self.total)


def recorded(histogram: HdrHistogram) -> Recorded:
    counts = np.ctypeslib.as_array(histogram.counts)[: histogram.counts_len]
    indexes = np.flatnonzero(counts).astype(np.int64)
    half_magnitude = histogram.sub_bucket_half_count_magnitude
    half = histogram.sub_bucket_half_count
    bucket = (indexes >> half_magnitude) - 1
    sub_bucket = (indexes & (half - 1)) + half
    first = bucket < 0
    sub_bucket[first] -= half
    bucket[first] = 0
    shift = bucket + histogram.unit_magnitude
    lowest = sub_bucket << shift
    highest = lowest + (np.int64(1) << shift) - 1
    nonzero = counts[indexes].astype(np.int64)
    return Recorded(lowest, highest, nonzero, np.cumsum(nonzero))


@dataclass(frozen=True, slots=True)
class Batch:
    """Nanosecond durations rounded to microseconds and clamped to the range
    once, with their weights: one request's token gaps, recorded into each
    bucket the request goes to (the run, its stage, its window, its endpoint
    and replica) without converting them again."""

    us: np.ndarray  # int64, within the range
    counts: np.ndarray  # int64, one per value

    @classmethod
    def of_ns(cls, values_ns: Sequence[float], counts: Sequence[int] | None = None) -> Batch:
        """Rounded and clamped exactly as :meth:`HistogramSet.record_ns` does."""
        us = np.floor(np.asarray(values_ns, dtype=np.float64) / 1000.0 + 0.5)
        np.clip(us, 0, HIGHEST_US, out=us)
        weights = np.ones(len(us), np.int64) if counts is None else np.asarray(counts, np.int64)
        return cls(us.astype(np.int64), weights)


class _Waiting:
    """A histogram's batches not yet recorded, and how many values they hold."""

    __slots__ = ("batches", "values")

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.values = 0


class HistogramSet:
    """Histograms by metric name, created on first use.

    Values above the range are clamped to its top rather than silently dropped
    (``hdrh`` drops them and returns False), so a one-hour stall still shows as
    the worst value; negative ones (a clock misuse upstream) record as 0.

    Batches (:meth:`record_batch`: a request's per-token ITL and chunk gaps)
    wait in a list and reach the histogram ``PENDING_MAX`` values at a time,
    or as soon as anything reads the set: numpy's fixed cost per histogram
    update (about 60 us, more than the rest of a request's recording) is then
    paid once per few thousand values, and a request's batch, built once, is
    added to every bucket it goes to for a reference each. What any reader
    sees is exactly what was recorded; memory stays bounded by ``PENDING_MAX``
    values per histogram.
    """

    __slots__ = ("_histograms", "_pending")

    def __init__(self) -> None:
        self._histograms: dict[str, HdrHistogram] = {}
        self._pending: dict[str, _Waiting] = {}

    def histogram(self, name: str) -> HdrHistogram:
        if name in self._pending:
            self._flush(name)
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = new_histogram()
        return histogram

    def record_us(self, name: str, value_us: int, count: int = 1) -> None:
        self.histogram(name).record_value(min(max(value_us, 0), HIGHEST_US), count)

    def record_ns(self, name: str, value_ns: float, count: int = 1) -> None:
        """Record a nanosecond duration, rounded to the nearest microsecond."""
        self.record_us(name, int(value_ns / 1000 + 0.5), count)

    def record_many_ns(
        self, name: str, values_ns: Sequence[float], counts: Sequence[int] | None = None
    ) -> None:
        """Record nanosecond durations in one go, each rounded and clamped exactly as
        :meth:`record_ns` does; ``counts`` (same length) weights each value."""
        if len(values_ns):
            self.record_batch(name, Batch.of_ns(values_ns, counts))

    def record_batch(self, name: str, batch: Batch) -> None:
        """Record a batch (:meth:`Batch.of_ns`); the set keeps a reference to it."""
        if not len(batch.us):
            return
        waiting = self._pending.get(name)
        if waiting is None:
            waiting = self._pending[name] = _Waiting()
        waiting.batches.append(batch)
        waiting.values += len(batch.us)
        if waiting.values >= PENDING_MAX:
            self._flush(name)

    def _flush(self, name: str) -> None:
        batches = self._pending.pop(name).batches
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = new_histogram()
        if len(batches) == 1:
            record_many(histogram, batches[0].us, batches[0].counts)
            return
        us = np.concatenate([b.us for b in batches])
        record_many(histogram, us, np.concatenate([b.counts for b in batches]))

    def _flush_all(self) -> None:
        for name in list(self._pending):
            self._flush(name)

    def names(self) -> list[str]:
        return sorted({*self._histograms, *self._pending})

    def __contains__(self, name: str) -> bool:
        return name in self._histograms or name in self._pending

    def __iter__(self) -> Iterator[tuple[str, HdrHistogram]]:
        self._flush_all()
        return iter(sorted(self._histograms.items()))

    def add(self, other: HistogramSet) -> None:
        """Merge ``other`` in exactly. Empty histograms are skipped: ``hdrh``'s
        ``add`` of an empty histogram would set the minimum to 0."""
        for name, histogram in other:
            if histogram.get_total_count():
                self.histogram(name).add(histogram)

    def add_as(self, other: HistogramSet, names: Mapping[str, str]) -> None:
        """Merge ``other``'s histogram ``source`` into this set's ``target`` for
        each ``target: source`` of ``names`` (exact, as :meth:`add`)."""
        for target, source in names.items():
            if source in other and other.histogram(source).get_total_count():
                self.histogram(target).add(other.histogram(source))

    def encode(self) -> dict[str, str]:
        """Compressed base64 form of each non-empty histogram, for JSON."""
        return {
            name: histogram.encode().decode("ascii")
            for name, histogram in self
            if histogram.get_total_count()
        }

    @classmethod
    def of(cls, histograms: Mapping[str, HdrHistogram]) -> HistogramSet:
        """A set holding these histograms (of the standard range), not copies."""
        result = cls()
        result._histograms.update(histograms)
        return result

    @classmethod
    def decode(cls, encoded: Mapping[str, str]) -> HistogramSet:
        result = cls()
        for name, text in encoded.items():
            result._histograms[name] = decode_histogram(text)
        return result

    def reset(self) -> None:
        self._histograms.clear()
        self._pending.clear()
