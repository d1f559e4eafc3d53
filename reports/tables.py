"""CSV files: percentiles of every metric and span, and the time series.

Both are flat tables for spreadsheets and notebooks; empty cells mean "not
measured". Percentiles come from the summary, so the CSV and the JSON agree.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from slogate.analysis.documents.neutral import neutral_cell
from slogate.analysis.measurement.percentiles import STANDARD_PERCENTILES
from slogate.scenarios.metrics import TTFT

if TYPE_CHECKING:  # pydantic: not in load processes
    from slogate.analysis.documents.contracts import Distribution, QuickDistribution, Summary

STATS = ("min", "max", "mean")
PERCENTILE_COLUMNS = [
    *("scenario", "span", "metric", "unit", "count"),
    *(f"{k}{suffix}" for k in STANDARD_PERCENTILES for suffix in ("", "_lower", "_upper")),
    *STATS,
]


def percentile_row(
    scenario: str, span: str, metric: str, d: Distribution | QuickDistribution
) -> dict[str, Any]:
    """One CSV row from a summary distribution (full, or the quick form of stages)."""
    unit = "ms" if metric.endswith("_ms") else "tokens"
    row: dict[str, Any] = {
        "scenario": scenario,
        "span": span,
        "metric": metric,
        "unit": unit,
        "count": d.count,
    }
    for key in STANDARD_PERCENTILES:
        lower, upper = d.interval(key)
        row.update({key: getattr(d, key, None), f"{key}_lower": lower, f"{key}_upper": upper})
    row.update({stat: getattr(d, stat, None) for stat in STATS})
    return row


def percentile_rows(summary: Summary) -> Iterable[dict[str, Any]]:
    d: Distribution | QuickDistribution
    for name, block in summary.scenarios.items():
        for metric, d in block.metrics.items():
            yield percentile_row(name, "all", metric, d)
        for metric, d in block.tokens.per_request.items():
            yield percentile_row(name, "all", metric, d)
        for turn, d in block.ttft_by_turn_ms.items():
            yield percentile_row(name, f"turn:{turn}", TTFT.key, d)
        for stage, s in block.stages.items():
            for metric, d in s.metrics.items():
                yield percentile_row(name, f"stage:{stage}", metric, d)


def cell(value: Any) -> Any:
    """A value as its CSV cell: text (names a server or a scenario chose among
    it) neutralised and kept from being read as a formula."""
    if value is None:
        return ""
    return neutral_cell(value) if isinstance(value, str) else value


def to_csv(columns: list[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """Every cell and column name through :func:`cell`."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(map(cell, columns))
    writer.writerows([cell(row.get(c)) for c in columns] for row in rows)
    return out.getvalue()


def percentiles_csv(summary: Summary) -> str:
    return to_csv(PERCENTILE_COLUMNS, percentile_rows(summary))


def flat_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Nested counts (errors by kind) become ``errors_<kind>`` columns."""
    flat: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}_{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


APART_KINDS = ("endpoint", "replica")


def timeseries_csv(
    rows: Iterable[Mapping[str, Any]], apart: Iterable[Mapping[str, Any]] = ()
) -> str:
    """The scenarios' windows, then each endpoint's and replica's (``apart``,
    :func:`slogate.analysis.measurement.timeseries.apart_row`), named in the ``endpoint``
    or ``replica`` column, which is empty on a scenario's own rows: a
    spreadsheet filters a replica's series, or sums a window's endpoints."""
    kind_order = {kind: i for i, kind in enumerate(APART_KINDS)}

    def place(row: Mapping[str, Any]) -> tuple[Any, ...]:
        kind = next(k for k in APART_KINDS if row.get(k) is not None)
        return (row.get("scenario"), kind_order[kind], row[kind], row["t_s"])

    apart_rows = sorted(apart, key=place)
    flat = [flat_row(r) for r in (*rows, *apart_rows)]
    columns: dict[str, None] = dict.fromkeys(("scenario",))
    if apart_rows:
        columns.update(dict.fromkeys(APART_KINDS))
    for row in flat:
        columns.update(dict.fromkeys(row))
    return to_csv(list(columns), flat)
