"""Burstiness of a trace at a speed-up, on arrival times worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from slogate.scenarios.burstiness import burstiness, most_within

# 3 arrivals within 0.4 ms at 0 s, one at 0.008 s, 2 at 2.0 s (0.9 ms apart), one at 4 s
TIMES = np.array([0.0, 0.0002, 0.0004, 0.008, 2.0, 2.0009, 4.0])
TOKENS = np.array([100, 100, 100, 1000, 50, 50, 10])


def test_the_most_arrivals_within_a_window():
    assert most_within(TIMES, 0.001) == 3  # the first three
    assert most_within(TIMES, 0.010) == 4  # and the one 8 ms later
    assert most_within(TIMES[4:], 0.0009) == 1  # 0.9 ms apart: the window is half-open
    assert most_within(np.array([]), 0.001) == 0


def test_at_speed_one():
    b = burstiness(TIMES, TOKENS, 1.0)
    assert (b.per_ms, b.per_10ms) == (3, 4)
    assert b.arrivals_per_s == pytest.approx(7 / 4.0)
    assert b.prompt_tokens_per_s == pytest.approx(1410 / 4.0)
    assert (b.peak_arrivals_per_s, b.peak_prompt_tokens_per_s) == (4, 1300)


def test_a_speed_up_keeps_bursts_and_compresses_the_gaps_between_them():
    b = burstiness(TIMES, TOKENS, 5.0)
    # the first burst stays within 1 ms (0.08 ms); the 0.9 ms pair becomes 0.18 ms apart;
    # 8 ms after the first burst becomes 1.6 ms, within 10 ms
    assert (b.per_ms, b.per_10ms) == (3, 4)
    assert most_within(TIMES / 5.0, 0.001) == 3
    assert b.arrivals_per_s == pytest.approx(7 / 0.8)
    assert b.prompt_tokens_per_s == pytest.approx(1410 / 0.8)
    # at speed 5 the whole trace fits in 0.8 s: its busiest second is all of it
    assert (b.peak_arrivals_per_s, b.peak_prompt_tokens_per_s) == (7, 1410)


def test_a_bad_speed_is_refused():
    with pytest.raises(ValueError, match="speed"):
        burstiness(TIMES, TOKENS, 0.0)
