"""A slogate tab in Locust's web UI: HDR percentiles per scenario and the SLO status.

Locust's own percentiles are rounded to about two digits (docs/design.md); this
table shows the exact HDR values the verdict will use, refreshed with the
UI's stats polling.
"""

from __future__ import annotations

import json
from typing import Any

from slogate.analysis.recorder import OVERALL
from slogate.locustfiles.session import RunSession

TAB_KEY = "slogate"
METRICS = ("ttft", "itl", "tpot")
STATS = {"p50": 50.0, "p95": 95.0, "p99": 99.0}


def live_rows(session: RunSession) -> list[dict[str, Any]]:
    rows = []
    for scenario in session.ctx.scenarios:
        bucket = session.collector.buckets.get((scenario.name, OVERALL))
        row: dict[str, Any] = {"scenario": scenario.name}
        failing = []
        for metric in METRICS:
            histogram = (
                bucket.histograms.histogram(metric)
                if bucket and metric in bucket.histograms
                else None
            )
            for stat, p in STATS.items():
                value = histogram.get_value_at_percentile(p) / 1000 if histogram else None
                row[f"{metric}_{stat}"] = None if value is None else round(value, 2)
                for t in scenario.slo.thresholds:
                    if (
                        value is not None
                        and t.metric == f"{metric}_ms"
                        and t.stat == stat
                        and value > t.limit
                    ):
                        failing.append(f"{metric} {stat}")
        row["slo"] = "failing: " + ", ".join(failing) if failing else "ok so far"
        rows.append(row)
    return rows


def install_web_view(web_ui: Any, session: RunSession) -> None:
    from flask import request

    structure = [{"key": "scenario", "title": "Scenario"}]
    for metric in METRICS:
        for stat in STATS:
            structure.append({"key": f"{metric}_{stat}", "title": f"{metric.upper()} {stat} (ms)"})
    structure.append({"key": "slo", "title": "SLO status"})
    web_ui.template_args["extended_tabs"] = [{"title": "slogate SLOs", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [{"key": TAB_KEY, "structure": structure}]

    @web_ui.app.after_request
    def add_slogate_stats(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        body = response.get_json()
        body["extended_stats"] = [{"key": TAB_KEY, "data": live_rows(session)}]
        response.set_data(json.dumps(body))
        return response
