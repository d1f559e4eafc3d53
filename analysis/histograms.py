"""HDR histograms of latency metrics, in microseconds: record, encode, decode, merge.

One :class:`HistogramSet` holds a histogram per metric name. Every histogram
covers 1 us to 1 h at 3 significant digits (DESIGN.md), so any two can be
merged exactly: Locust workers ship encoded sets to the master, and saved sets
let a report be re-rendered or two runs compared without loss.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_DIGITS = 3


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def decode_histogram(encoded: str) -> HdrHistogram:
    """Decode into a histogram of the standard range (whatever the encoder used)."""
    histogram = new_histogram()
    histogram.decode_and_add(encoded)
    return histogram


class HistogramSet:
    """Histograms by metric name, created on first use.

    Values above the range are clamped to its top rather than silently dropped
    (``hdrh`` drops them and returns False), so a one-hour stall still shows as
    the worst value; negative ones (a clock misuse upstream) record as 0.
    """

    __slots__ = ("_histograms",)

    def __init__(self) -> None:
        self._histograms: dict[str, HdrHistogram] = {}

    def histogram(self, name: str) -> HdrHistogram:
        histogram = self._histograms.get(name)
        if histogram is None:
            histogram = self._histograms[name] = new_histogram()
        return histogram

    def record_us(self, name: str, value_us: int, count: int = 1) -> None:
        self.histogram(name).record_value(min(max(value_us, 0), HIGHEST_US), count)

    def record_ns(self, name: str, value_ns: float, count: int = 1) -> None:
        """Record a nanosecond duration, rounded to the nearest microsecond."""
        self.record_us(name, int(value_ns / 1000 + 0.5), count)

    def names(self) -> list[str]:
        return sorted(self._histograms)

    def __contains__(self, name: str) -> bool:
        return name in self._histograms

    def __iter__(self) -> Iterator[tuple[str, HdrHistogram]]:
        return iter(sorted(self._histograms.items()))

    def is_empty(self) -> bool:
        return all(h.get_total_count() == 0 for h in self._histograms.values())

    def add(self, other: HistogramSet) -> None:
        """Merge ``other`` in exactly. Empty histograms are skipped: ``hdrh``'s
        ``add`` of an empty histogram would set the minimum to 0."""
        for name, histogram in other:
            if histogram.get_total_count():
                self.histogram(name).add(histogram)

    def encode(self) -> dict[str, str]:
        """Compressed base64 form of each non-empty histogram, for JSON."""
        return {
            name: histogram.encode().decode("ascii")
            for name, histogram in self
            if histogram.get_total_count()
        }

    @classmethod
    def decode(cls, encoded: Mapping[str, str]) -> HistogramSet:
        result = cls()
        for name, text in encoded.items():
            result._histograms[name] = decode_histogram(text)
        return result

    def reset(self) -> None:
        self._histograms.clear()
