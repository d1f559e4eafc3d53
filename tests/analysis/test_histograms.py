"""HDR histogram sets: exact merge, encode/decode, and the bulk view's agreement with hdrh."""

import gc

import numpy as np
import pytest

from slogate.analysis.measurement.histograms import (
    HIGHEST_US,
    HistogramSet,
    new_histogram,
    recorded,
)


def filled(values):
    h = new_histogram()
    for v in values:
        h.record_value(int(v))
    return h


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_view_matches_hdrh_percentiles_and_mean(seed):
    rng = np.random.default_rng(seed)
    values = np.concatenate([rng.lognormal(9, 1.2, 3000), rng.integers(0, 50, 200)])
    h = filled(values)
    view = recorded(h)
    assert view.total == h.get_total_count() == len(values)
    for p in (0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0):
        assert view.value_at_percentile(p) == h.get_value_at_percentile(p), p
    assert view.mean() == pytest.approx(h.get_mean_value(), rel=1e-12)


def test_merge_is_exact_and_skips_empty_histograms():
    a, b = HistogramSet(), HistogramSet()
    for v in (100, 200, 300):
        a.record_us("ttft", v)
    b.record_us("ttft", 5000, count=2)
    b.histogram("itl")  # created, never recorded: must not drag the minimum to 0
    a.add(b)
    h = a.histogram("ttft")
    assert h.get_total_count() == 5
    assert h.get_value_at_percentile(100) == h.get_highest_equivalent_value(5000)
    assert "itl" not in a.encode()


def test_encode_decode_round_trip_keeps_every_count():
    s = HistogramSet()
    for v in range(1, 2000, 7):
        s.record_ns("e2e", v * 1000.4)
    back = HistogramSet.decode(s.encode())
    original, decoded = recorded(s.histogram("e2e")), recorded(back.histogram("e2e"))
    assert np.array_equal(original.lowest, decoded.lowest)
    assert np.array_equal(original.counts, decoded.counts)


def test_out_of_range_values_are_clamped_not_dropped():
    s = HistogramSet()
    s.record_us("e2e", HIGHEST_US * 10)
    s.record_us("e2e", -5)
    h = s.histogram("e2e")
    assert h.get_total_count() == 2
    assert h.get_min_value() == 0
    assert h.get_max_value() >= HIGHEST_US


def cyclic_garbage(action) -> list:
    """What ``action`` left for the cyclic collector (unreachable objects in cycles)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        action()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_histograms_dropped_after_shipping_leave_no_cyclic_garbage():
    """Workers drain (encode) and the master absorbs (decode, merge) every few
    seconds; hdrh's own histograms are cycles, 188 KB each, freed only by the
    collector's pauses (docs/load.md)."""

    def ship() -> None:
        for _ in range(5):
            sent = HistogramSet()
            sent.record_us("ttft", 50_000)
            sent.record_many_ns("itl", [20e6, 21e6], [3, 4])
            received = HistogramSet.decode(sent.encode())
            total = HistogramSet()
            total.add(received)
            assert total.histogram("itl").get_total_count() == 7

    garbage = cyclic_garbage(ship)
    # ctypes array *types* (hdrh makes one per buffer size, ctypes caches them
    # weakly) are small; the histograms and their 188 KB payloads must not be.
    hdrh_objects = [o for o in garbage if type(o).__module__.startswith("hdrh")]
    assert hdrh_objects == []


def test_batches_waiting_to_be_recorded_are_seen_by_every_reader():
    """Batches wait in lists until enough have come (or anything reads the set):
    a reader never sees less than was recorded, across the flush threshold."""
    rng = np.random.default_rng(5)
    one, batched = HistogramSet(), HistogramSet()
    for size in (3, 250, 4000, 1, 700):  # crosses PENDING_MAX once, then stays below
        values = rng.lognormal(15, 1, size).tolist()
        for value in values:
            one.record_ns("itl", value)
        batched.record_many_ns("itl", values)
        assert "itl" in batched and batched.names() == ["itl"]
        assert batched.encode() == one.encode()
    merged = HistogramSet()
    merged.add(batched)
    assert merged.histogram("itl").get_total_count() == one.histogram("itl").get_total_count()
    batched.record_many_ns("itl", [1e6, 2e6])
    assert [(name, h.get_total_count()) for name, h in batched] == [("itl", 4956)]
    batched.reset()
    assert batched.names() == [] and "itl" not in batched
