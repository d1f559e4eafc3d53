"""The simulator against published benchmarks: the accuracy targets.

Prints both calibration tables (as ``docs/simengine.md`` shows them), then
the held-back half's mean absolute and worst error against the targets (mean
at most 8%, worst at most 15%). The exit status is 1 when the held-back half
misses a target or a fitted row is outside its tolerance. It simulates 42
closed-loop runs offline: about 3 minutes on one core.

    .venv/bin/python bench/bench_calibration.py
"""

from __future__ import annotations

import sys

from slogate.simengine.calibration import FITTED, HELD_BACK, calibrate, markdown, summary

MEAN_TARGET = 0.08
WORST_TARGET = 0.15


def main() -> int:
    rows = calibrate()
    print(markdown(rows))
    held_back = [row for row in rows if row.reference.half == HELD_BACK]
    mean, worst = summary(held_back)
    fitted_ok = all(row.ok for row in rows if row.reference.half == FITTED)
    met = mean <= MEAN_TARGET and abs(worst) <= WORST_TARGET
    print()
    print(
        f"held back: mean {mean:.1%} (target {MEAN_TARGET:.0%}), "
        f"worst {worst:+.1%} (target {WORST_TARGET:.0%}): {'met' if met else 'MISSED'}; "
        f"fitted rows within tolerance: {'yes' if fitted_ok else 'NO'}"
    )
    return 0 if met and fitted_ok else 1


if __name__ == "__main__":
    sys.exit(main())
