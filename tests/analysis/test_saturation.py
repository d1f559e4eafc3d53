"""The saturation trend test on hand-checked numbers: a queue growing without bound
is flagged, a stationary one and a ramp during warm-up are not."""

from __future__ import annotations

import numpy as np
import pytest

from slogate.analysis.verdict.saturation import detect, trend


def test_the_slope_and_its_one_sided_lower_bound_by_hand() -> None:
    """y = 0, 1, 1, 3, 5 at t = 0..4: slope 12/10 = 1.2, residuals 0.4, 0.2, -1, -0.2,
    0.6 (sum of squares 1.6), standard error sqrt(1.6 / 3 / 10) = 0.23094, and the
    99% one-sided Student-t quantile with 3 degrees of freedom is 4.5407: the lower
    bound is 1.2 - 4.5407 * 0.23094 = 0.1514."""
    line = trend([0, 1, 2, 3, 4], [0, 1, 1, 3, 5])
    assert line.slope == pytest.approx(1.2)
    assert line.lower == pytest.approx(0.1514, abs=1e-4)
    assert (line.start, line.end, line.points) == (pytest.approx(-0.4), pytest.approx(4.4), 5)
    assert trend([0, 1], [0, 1]) is None and trend([2, 2, 2], [0, 1, 2]) is None


def rows(in_flight, ttft, start_s: float = 0.0, window_s: float = 5.0, scenario: str = "chat"):
    return [
        {
            "scenario": scenario,
            "t_s": start_s + i * window_s,
            "window_s": window_s,
            "in_flight": q,
            "ttft_p50_ms": f,
        }
        for i, (q, f) in enumerate(zip(in_flight, ttft, strict=True))
    ]


def test_a_queue_and_ttft_growing_together_are_flagged_with_the_reason() -> None:
    """Twice the capacity of a server serving 10/s: 50 more requests waiting every
    5 s window, and each waits 100 ms more per request ahead of it."""
    queue = [50.0 * i + 3 for i in range(1, 9)]
    ttft = [80.0 + 100.0 * q / 10 for q in queue]
    found = detect("chat", rows(queue, ttft), since_s=0.0)
    assert found is not None and found.at_s == 40.0  # the end of the eighth window
    assert found.in_flight.slope == pytest.approx(10.0) and found.ttft_ms.slope == pytest.approx(
        100.0
    )
    assert found.reason.startswith("chat: past saturation at 40 s: requests in flight")
    assert "at 99% confidence" in found.reason
    assert found.to_dict()["windows"] == 6  # the trailing six windows


def test_a_stationary_queue_is_not_flagged_nor_a_rise_of_only_one_signal() -> None:
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(200):
        queue = rng.poisson(2.0, 12).astype(float)
        ttft = 80.0 + 20.0 * rng.standard_normal(12) + 10.0 * queue
        flagged += detect("chat", rows(queue, ttft), since_s=0.0) is not None
    assert flagged <= 2  # 99% per signal, both needed: about 1 in 10 000 by chance
    growing = [10.0 * i + 1 for i in range(8)]
    assert detect("chat", rows(growing, [100.0] * 8), since_s=0.0) is None  # TTFT flat
    assert detect("chat", rows([5.0] * 8, growing), since_s=0.0) is None  # queue flat


def test_windows_before_warm_up_ends_and_other_scenarios_do_not_count() -> None:
    queue = [50.0 * i + 3 for i in range(1, 9)]
    ttft = [80.0 + 10.0 * q for q in queue]
    assert detect("chat", rows(queue, ttft), since_s=15.0) is None  # five windows left
    assert detect("code", rows(queue, ttft), since_s=0.0) is None
    small = [1.0 + 0.01 * i for i in range(8)]  # significant, but 5% growth: bounded
    assert detect("chat", rows(small, [100.0 + 0.1 * i for i in range(8)]), since_s=0.0) is None


def test_a_saturated_run_says_so_in_every_output_and_stop_makes_it_invalid(tmp_path) -> None:
    from reportdata import realistic_run

    from slogate.reports import write_results

    queue = [50.0 * i + 3 for i in range(1, 9)]
    found = detect("chat", rows(queue, [80.0 + 10.0 * q for q in queue]), since_s=0.0)
    run = realistic_run(n=2000, seed=5)
    run.meta["saturation"] = {"mode": "monitor", "found": found.to_dict(), "stopped": False}
    monitored = write_results(tmp_path / "monitor", run)
    assert monitored.summary["run"]["saturation"]["found"]["at_s"] == 40.0
    assert "stopped by --saturation" not in " ".join(monitored.summary["invalid_reasons"])
    report = (tmp_path / "monitor" / "report.html").read_text()
    assert "<b>Past saturation</b> (--saturation monitor): chat: past saturation at 40 s" in report
    assert (
        "**Past saturation** (--saturation monitor)"
        in (tmp_path / "monitor" / "summary.md").read_text()
    )
    metrics = (tmp_path / "monitor" / "metrics.prom").read_text()
    assert "slogate_saturated{" in metrics and "slogate_saturated_at_seconds{" in metrics
    run.meta["saturation"] = {"mode": "stop", "found": found.to_dict(), "stopped": True}
    stopped = write_results(tmp_path / "stop", run)
    assert (stopped.verdict, stopped.exit_code) == ("invalid", 3)
    assert stopped.summary["invalid_reasons"][0].startswith(
        "stopped by --saturation stop: chat: past saturation at 40 s"
    )
