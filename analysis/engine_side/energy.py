"""Energy per output token and per request, from the GPUs' total-energy counter.

NVIDIA's DCGM exporter publishes ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` per GPU
(millijoules since the driver loaded; the scraper sums the GPUs into
``gpu_energy_joules``). Two scrapes bracket the measured window: their
difference over their time apart is the deployment's mean power, and that
power over the measured seconds is the energy the measured requests cost, so a
scrape that does not fall exactly on the window's edges does not bias the
figure. Per output token and per request divide that energy by what the run
measured over the same window. An engine idle part of the time is charged its
idle power too: that is what serving at this load costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ENERGY_SERIES = "gpu_energy_joules"
GPU_SOURCE = "dcgm"


def energy_block(
    samples: Sequence[Mapping[str, Any]],
    window: tuple[float, float],
    output_tokens: int,
    requests: int,
) -> dict[str, Any] | None:
    """The energy of the measured ``window`` (seconds since the run's origin)
    from the GPU scrapes inside it, with its share per output token and per
    request; None without two such scrapes (no DCGM scraped, or too short)."""
    start, end = window
    points = [
        (float(s["t_s"]), float(s["series"][ENERGY_SERIES]))
        for s in samples
        if s.get("source") == GPU_SOURCE
        and ENERGY_SERIES in (s.get("series") or {})
        and start <= float(s["t_s"]) <= end
    ]
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    (t0, e0), (t1, e1) = points[0], points[-1]
    power_w = (e1 - e0) / (t1 - t0)
    joules = power_w * (end - start)
    return {
        "source": "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "mean_power_w": power_w,
        "joules": joules,
        "seconds": end - start,
        "scraped_s": [t0, t1],
        "output_tokens": output_tokens,
        "requests": requests,
        "per_output_token_j": joules / output_tokens if output_tokens else None,
        "per_request_j": joules / requests if requests else None,
    }
