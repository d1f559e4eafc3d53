"""The simulated GPUs' power and energy, as NVIDIA's DCGM exporter reports them.

A deliberately plain model: each GPU of the deployment draws its idle power
while no step runs and its board power limit (TDP) while one does, both from
``gpus.yaml`` (``idle_w``, ``tdp_w``). Busy time is the model time the engine's
steps took, so the energy follows the load the engine actually served. Real
decode draws less than the limit (it waits on memory): figures from this model
are an upper bound, labelled as a model's, never a measurement.

``GET /dcgm/metrics`` exposes, per GPU, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
(millijoules since start, a counter), ``DCGM_FI_DEV_POWER_USAGE`` (watts now)
and ``DCGM_FI_DEV_GPU_UTIL`` (percent busy since start), named and labelled as
dcgm-exporter does, so ``slogate run --dcgm-url`` reads them as it would a real one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PowerModel:
    """Watts per GPU idle and busy, and how many GPUs share the work."""

    idle_w: float
    busy_w: float
    gpus: int = 1

    def energy_j(self, elapsed_s: float, busy_s: float) -> float:
        """Joules of one GPU after ``elapsed_s`` of which ``busy_s`` ran steps."""
        return self.idle_w * elapsed_s + (self.busy_w - self.idle_w) * min(busy_s, elapsed_s)

    def dcgm_text(self, elapsed_s: float, busy_s: float, busy_now: bool, gpu_name: str) -> str:
        """The exporter's text for every GPU (each carries the same share of the work)."""
        energy_mj = round(1000 * self.energy_j(elapsed_s, busy_s))
        power = self.busy_w if busy_now else self.idle_w
        util = round(100 * min(busy_s / elapsed_s, 1.0)) if elapsed_s > 0 else 0
        lines = []
        for name, kind, doc, value in (
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
             "Total energy consumption since boot (in mJ).", energy_mj),
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", power),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", util),
        ):  # fmt: skip
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
            lines += [
                f'{name}{{gpu="{i}",UUID="GPU-simulated-{i}",modelName="{gpu_name}"}} {value}'
                for i in range(self.gpus)
            ]
        return "\n".join(lines) + "\n"
