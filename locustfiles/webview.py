"""A slogate tab in Locust's web UI: HDR percentiles per scenario and the SLO status.

Locust's own percentiles are rounded to about two digits (docs/design.md); this
table shows the exact HDR values the verdict will use, refreshed with the
UI's stats polling.
"""

from __future__ import annotations

import json
from typing import Any

from slogate.analysis.measurement.recorder import OVERALL
from slogate.analysis.verdict.judge import live_status
from slogate.locustfiles.session import RunSession
from slogate.locustfiles.web_access import REPORT_ROUTE, TIMELINE_ROUTE
from slogate.scenarios.metrics import HEADLINE

TAB_KEY = "slogate"
METRICS = HEADLINE
STATS = {"p50": 50.0, "p95": 95.0, "p99": 99.0}


def live_rows(session: RunSession) -> list[dict[str, Any]]:
    """Per scenario the HDR percentiles so far and the judge's live SLO status."""
    rows = []
    for scenario in session.ctx.scenarios:
        bucket = session.collector.buckets.get((scenario.name, OVERALL))
        row: dict[str, Any] = {"scenario": scenario.name}
        for metric in METRICS:
            histogram = (
                bucket.histograms.histogram(metric)
                if bucket and metric in bucket.histograms
                else None
            )
            for stat, p in STATS.items():
                value = histogram.get_value_at_percentile(p) / 1000 if histogram else None
                row[f"{metric}_{stat}"] = None if value is None else round(value, 2)
        row["slo"] = live_status(session.live_slo(scenario)[0])
        row["report"] = REPORT_ROUTE if session.finished_code is not None else "when the load ends"
        rows.append(row)
    return rows


def install_web_view(web_ui: Any, session: RunSession) -> None:
    from flask import request, send_file

    structure = [{"key": "scenario", "title": "Scenario"}]
    for metric in METRICS:
        for stat in STATS:
            structure.append({"key": f"{metric}_{stat}", "title": f"{metric.upper()} {stat} (ms)"})
    structure.append({"key": "slo", "title": "SLO status"})
    structure.append({"key": "report", "title": "Report"})
    web_ui.template_args["extended_tabs"] = [{"title": "slogate SLOs", "key": TAB_KEY}]
    web_ui.template_args["extended_tables"] = [{"key": TAB_KEY, "structure": structure}]

    # the Download Data tab lists links; the report's own links are relative to it
    web_ui.template_args["extended_csv_files"] = [
        {"href": f".{REPORT_ROUTE}", "title": "slogate report (written when the load ends)"},
        {"href": f".{TIMELINE_ROUTE}", "title": "slogate request timeline"},
    ]

    @web_ui.app.route(REPORT_ROUTE)
    @web_ui.app.route(f"{REPORT_ROUTE}.html")  # where the timeline's link back leads
    @web_ui.auth_required_if_enabled
    def slogate_report() -> Any:
        from slogate.reports.results import REPORT_FILE

        return results_file(REPORT_FILE)

    @web_ui.app.route(TIMELINE_ROUTE)
    @web_ui.auth_required_if_enabled
    def slogate_timeline() -> Any:
        from slogate.reports.results import TIMELINE_FILE

        return results_file(TIMELINE_FILE)

    def results_file(name: str) -> Any:
        path = session.out_dir / name
        if session.finished_code is None or not path.exists():
            return f"slogate writes {name} when the load ends", 404
        return send_file(path.resolve())

    @web_ui.app.after_request
    def add_slogate_stats(response: Any) -> Any:
        if request.path != "/stats/requests" or not response.is_json:
            return response
        body = response.get_json()
        body["extended_stats"] = [{"key": TAB_KEY, "data": live_rows(session)}]
        response.set_data(json.dumps(body))
        return response
