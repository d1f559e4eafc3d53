"""A live progress panel's numbers, made to order for the progress tests."""

from __future__ import annotations

from slogate.reports.progress import Progress, SloNow


def progress(**changes: object) -> Progress:
    values: dict[str, object] = dict(
        elapsed_s=20.4,
        planned_s=25.0,
        users=8,
        in_flight=2.0,
        requests_per_s=1.64,
        tokens_per_s=338.2,
        requests=33,
        errors=1,
        slos=(
            SloNow("chat", "ttft_ms p99", 113.0, 2000.0, True, "pass", "ms"),
            SloNow("chat", "itl_ms p99", 61.0, 50.0, True, "fail", "ms"),
            SloNow("chat", "goodput rate", None, 90.0, False, "inconclusive", "%"),
        ),
        stall_p99_ms=0.4,
        stall_warning_ms=1.0,
        blurred_pct=None,
    )
    values.update(changes)
    return Progress(**values)  # type: ignore[arg-type]  # mixed values, each its field's type
