"""Several endpoints: naming and spreading them (client/endpoints.py), each
request kept in its endpoint's and replica's rows (analysis/measurement/recorder.py), the
rows in summary.json adding up to the scenario, and the command lines that
name them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from reportdata import run_of

from slogate import scenarios
from slogate.analysis.documents.contracts import Summary, parse
from slogate.analysis.documents.journal import JOURNAL_FILE, JournalWriter
from slogate.analysis.documents.rundata import DATA_DIR, RunData
from slogate.analysis.documents.summary import build_summary
from slogate.analysis.engine_side.router_metrics import router_routes
from slogate.analysis.engine_side.server_metrics import (
    MetricsParseError,
    ScrapeTarget,
    parse_target,
)
from slogate.analysis.measurement.recorder import Bucket, Recorder, apart
from slogate.analysis.measurement.records import ErrorKind, RequestRecord, SessionRecord
from slogate.analysis.measurement.timeseries import apart_row, window_row
from slogate.cli import build_parser
from slogate.client.endpoints import (
    Endpoint,
    Spread,
    check_endpoints,
    parse_endpoint,
)
from slogate.client.streaming import set_cookie_value
from slogate.reports import write_results
from slogate.reports.charts import error_share
from slogate.reports.openmetrics import openmetrics_text
from slogate.run_cmd import locust_command, take_endpoints
from slogate.scenarios.model import EndpointSpec

MS = 1_000_000


def test_an_endpoint_is_named_or_takes_its_host_and_port_as_name() -> None:
    assert parse_endpoint("a=http://10.0.0.1:8000") == Endpoint("a", "http://10.0.0.1:8000")
    assert parse_endpoint("http://10.0.0.2:8000/v1") == Endpoint(
        "10.0.0.2:8000", "http://10.0.0.2:8000/v1"
    )
    for bad in ("a=ftp://x", "a=", "not a url", "my replica=http://h:1"):
        with pytest.raises(ValueError, match=r"NAME|no spaces"):
            parse_endpoint(bad)


def test_endpoints_need_unique_names_and_positive_weights() -> None:
    check_endpoints([Endpoint("a", "http://h:1"), Endpoint("b", "http://h:2", 2.0)])
    with pytest.raises(ValueError, match="'a' is named twice"):
        check_endpoints([Endpoint("a", "http://h:1"), Endpoint("a", "http://h:2")])
    with pytest.raises(ValueError, match=r"weight 0\.0 must be > 0"):
        check_endpoints([Endpoint("a", "http://h:1", 0.0)])


def test_round_robin_and_weighted_spread_in_exact_proportions() -> None:
    endpoints = [Endpoint("a", "u", 3.0), Endpoint("b", "u", 1.0)]
    idle = [0, 0]
    assert [Spread(endpoints, "round-robin").pick(idle) for _ in range(1)] == [0]
    turns = Spread(endpoints, "round-robin")
    assert [turns.pick(idle) for _ in range(4)] == [0, 1, 0, 1]
    weighted = Spread(endpoints, "weighted")
    picks = [weighted.pick(idle) for _ in range(8)]
    assert picks.count(0) == 6 and picks.count(1) == 2


def test_least_in_flight_picks_the_idlest_and_takes_ties_in_turn() -> None:
    spread = Spread([Endpoint(n, "u") for n in "abc"], "least-in-flight")
    assert spread.pick([2, 0, 1]) == 1
    assert spread.pick([1, 1, 0]) == 2
    assert [spread.pick([0, 0, 0]) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="round-robin, weighted, least-in-flight"):
        Spread([Endpoint("a", "u")], "random")


def request(
    endpoint: str | None,
    served_by: str | None,
    ttft_ms: int,
    ok: bool = True,
    gaps_ms: tuple[int, ...] = (20,),
):
    """A request of one token per chunk, its chunks ``gaps_ms`` apart after its first."""
    record = RequestRecord("rag", start_ns=0, endpoint=endpoint, served_by=served_by)
    record.chunk_ns = [ttft_ms * MS]
    for gap in gaps_ms:
        record.chunk_ns.append(record.chunk_ns[-1] + gap * MS)
    record.chunk_chars = [4] * len(record.chunk_ns)
    record.end_ns = record.chunk_ns[-1]
    record.output_tokens = len(record.chunk_ns)
    record.input_tokens = 100
    record.cached_tokens = 50
    if not ok:
        record.fail(ErrorKind.HTTP_5XX, "HTTP 500", (ttft_ms + 20) * MS)
    return record


def recorded(each: int = 10) -> Recorder:
    """Two endpoints, a fast one and one behind a router that names two
    replicas, the second slow and failing once; ``each`` requests per replica."""
    recorder = Recorder()
    rows = [("a", None, 40)] * each + [("b", "r1", 60)] * each + [("b", "r2", 900)] * each
    for endpoint, replica, ttft in rows:
        recorder.record(request(endpoint, replica, ttft), wall_s=1.0)
    recorder.record(request("b", "r2", 900, ok=False), wall_s=1.0)
    recorder.record(request("a", None, 10), wall_s=1.0, warmup=True)  # in no row
    return recorder


def test_each_measured_request_is_in_its_endpoints_and_its_replicas_row() -> None:
    buckets = recorded().buckets
    assert buckets[("rag", "endpoint:a")].counters.ok == 10
    assert buckets[("rag", "endpoint:b")].counters.total == 21
    assert buckets[("rag", "replica:r1")].counters.ok == 10
    assert buckets[("rag", "replica:r2")].counters.failed == 1
    assert ("rag", "replica:None") not in buckets


def run_data(recorder: Recorder | None = None) -> RunData:
    """A complete run whose one scenario, rag, has a TTFT p50 SLO of 500 ms."""
    slo = {"rag": [{"metric": "ttft_ms", "stat": "p50", "limit": 500.0}]}
    run = run_of({"rag": Bucket()}, slo)
    run.buckets = (recorder or recorded()).buckets
    return run


def test_the_summary_rows_add_up_to_the_scenario_and_are_judged_alone() -> None:
    summary = build_summary(run_data())
    parse(Summary, summary, "summary.json")  # the contract takes the rows
    block = summary["scenarios"]["rag"]
    endpoints = block["endpoints"]
    assert sorted(endpoints) == ["a", "b"]
    for key in ("ok", "failed", "total"):
        assert sum(r["requests"][key] for r in endpoints.values()) == block["requests"][key]
    count = sum(r["metrics"]["ttft_ms"]["count"] for r in endpoints.values())
    assert count == block["metrics"]["ttft_ms"]["count"] == 30
    replicas = block["replicas"]
    assert sorted(replicas) == ["r1", "r2"]
    assert replicas["r1"]["verdict"] == "pass" and replicas["r2"]["verdict"] == "fail"
    assert replicas["r2"]["slo"][0]["value"] == pytest.approx(900, rel=0.01)
    assert endpoints["a"]["prefix_cache"]["hit_rate"] == pytest.approx(0.5)


def test_the_diagnosis_names_the_slow_replica_and_not_the_others() -> None:
    findings = build_summary(run_data())["diagnosis"]
    slow = [f for f in findings if f["cause"] == "slow_replica"]
    assert [f["evidence"]["replica"] for f in slow] == ["r2"]
    assert slow[0]["evidence"]["ttft_p50_ms"] == pytest.approx(900, rel=0.01)
    assert "r2 took 900 ms" in slow[0]["text"]
    # endpoint b holds the fast r1 too: its median is not apart from a's
    assert not [f for f in findings if f["cause"] == "slow_endpoint"]
    few = build_summary(run_data(recorded(each=5)))["diagnosis"]
    assert not [f for f in few if f["cause"] == "slow_replica"]  # under 8 requests each


def test_conversations_and_sessions_count_where_their_last_request_went() -> None:
    """Each conversation's own cache-hit rate and each agent session in its
    endpoint's and replica's rows (warm-up ones in none), adding up to the
    scenario's; the rates by hand."""
    recorder = recorded()
    ends = [  # (endpoint, replica, cached, prompt, steps, outcome)
        ("a", None, 50, 100, 2, "answered"),
        ("a", None, 0, 100, 3, "answered"),
        ("b", "r1", 90, 100, 1, "failed"),
        ("b", "r2", 30, 100, 4, "unfinished"),
    ]
    for endpoint, replica, cached, prompt, steps, outcome in ends:
        where = apart(request(endpoint, replica, 40))
        recorder.record_conversation_cache("rag", cached, prompt, spans=where)
        session = SessionRecord(steps, 0, steps * 100 * MS, outcome)
        recorder.record_session("rag", session, spans=where)
    recorder.record_conversation_cache("rag", 100, 100, warmup=True, spans=["endpoint:a"])
    block = build_summary(run_data(recorder))["scenarios"]["rag"]
    assert block["sessions"]["count"] == 4
    a, b = block["endpoints"]["a"], block["endpoints"]["b"]
    assert (a["sessions"]["count"], a["sessions"]["answered"]) == (2, 2)
    assert a["sessions"]["wall_ms"]["max"] == pytest.approx(300, rel=0.01)
    assert (b["sessions"]["failed"], b["sessions"]["unfinished"]) == (1, 1)
    assert a["prefix_cache"]["conversations"]["count"] == 2
    assert a["prefix_cache"]["conversations"]["max"] == pytest.approx(0.5, abs=0.001)
    assert b["prefix_cache"]["conversations"]["count"] == 2
    replicas = block["replicas"]
    assert replicas["r1"]["prefix_cache"]["conversations"]["p50"] == pytest.approx(0.9, abs=0.001)
    assert replicas["r2"]["sessions"]["steps"]["max"] == 4
    whole = block["prefix_cache"]["conversations"]["count"]
    assert whole == sum(r["prefix_cache"]["conversations"]["count"] for r in (a, b)) == 4


def windowed() -> tuple[RunData, Recorder]:
    """Requests ending over three 5 s windows, a warm-up one in the first, the
    windows closed and the endpoints' rows shipped through a worker's payload
    (drained by one recorder, absorbed by another) as a distributed run does."""
    worker = Recorder(window_s=5.0)
    worker.origin_s = 100.0
    ends = [(101.0, "a", None, 40), (102.0, "b", "r1", 60), (106.0, "b", "r2", 900)]
    ends += [(107.0, "a", None, 50), (108.0, "a", None, 50), (112.0, "b", "r1", 70)]
    for wall, endpoint, replica, ttft in ends:
        worker.record(request(endpoint, replica, ttft), wall_s=wall)
    worker.record(request("b", "r2", 900, ok=False), wall_s=111.0)
    worker.record(request("a", None, 10), wall_s=100.5, warmup=True)
    master = Recorder(window_s=5.0)
    master.absorb(worker.drain())
    run = run_data(master)
    run.timeseries = [
        window_row(s, i, 5.0, b, {}) for (s, i), b in sorted(master.pop_windows(3).items())
    ]
    run.timeseries_apart = [
        apart_row(s, span, i, 5.0, b)
        for (s, span, i), b in sorted(master.pop_apart_windows(3).items())
    ]
    return run, master


def test_each_window_of_the_endpoints_and_replicas_adds_up_to_the_scenarios() -> None:
    run, master = windowed()
    assert not master.windows and not master.apart_windows  # all three closed
    assert [(r["requests_ok"], r["requests_failed"]) for r in run.timeseries] == [
        (3, 0), (3, 0), (1, 1)
    ]  # fmt: skip
    summary = build_summary(run)
    parse(Summary, summary, "summary.json")
    block = summary["scenarios"]["rag"]
    assert sorted(block["endpoints"]) == ["a", "b"] and sorted(block["replicas"]) == ["r1", "r2"]

    def window_sum(rows: dict, t_s: float, key: str) -> int:
        return sum(w[key] for row in rows.values() for w in row["timeseries"] if w["t_s"] == t_s)

    # every request went to an endpoint; only b's named their replica
    b = {w["t_s"]: w for w in block["endpoints"]["b"]["timeseries"]}
    for whole in run.timeseries:
        for key in ("requests_ok", "requests_failed"):
            assert window_sum(block["endpoints"], whole["t_s"], key) == whole[key]
            assert window_sum(block["replicas"], whole["t_s"], key) == b[whole["t_s"]][key]
    # the warm-up request is in endpoint a's first window (as in the scenario's), by hand:
    a = block["endpoints"]["a"]["timeseries"]
    assert [(w["t_s"], w["requests_ok"]) for w in a] == [(0.0, 2), (5.0, 2)]
    assert a[1]["ttft_p50_ms"] == pytest.approx(50, rel=0.01)
    assert a[1]["itl_p50_ms"] == run.timeseries[1]["itl_p50_ms"] == pytest.approx(20, rel=0.01)
    r2 = block["replicas"]["r2"]["timeseries"]
    assert [(w["t_s"], w["requests_ok"], w["requests_failed"]) for w in r2] == [
        (5.0, 1, 0), (10.0, 0, 1)
    ]  # fmt: skip
    assert r2[0]["ttft_p99_ms"] == pytest.approx(900, rel=0.01)
    assert r2[1]["errors"] == {"http_5xx": 1}
    assert error_share(r2) == [(5.0, 0.0), (10.0, 100.0)]  # its line in the error-rate chart


def test_each_windows_itl_is_its_endpoints_and_its_replicas_merged_exactly() -> None:
    """Every token gap is in its scenario's window and in its endpoint's and
    replica's, from the request's one batch (analysis/measurement/recorder.py ``Gaps``):
    shipped through a worker's payload, the endpoints' ITL histograms of a
    window merge into the scenario's, and the replicas' into endpoint b's."""
    worker = Recorder(window_s=5.0)
    worker.origin_s = 100.0
    ends = [  # (end, endpoint, replica, gaps in ms)
        (101.0, "a", None, (5, 6, 7)), (102.0, "b", "r1", (30, 31)), (103.0, "b", "r2", (80,)),
        (106.0, "a", None, (9,)), (107.0, "b", "r1", (33, 35, 300)), (108.0, "b", "r2", (81, 82)),
    ]  # fmt: skip
    for wall, endpoint, replica, gaps in ends:
        worker.record(request(endpoint, replica, 40, gaps_ms=gaps), wall_s=wall)
    master = Recorder(window_s=5.0)
    master.absorb(worker.drain())
    windows, apart_windows = master.pop_windows(2), master.pop_apart_windows(2)
    assert sorted(windows) == [("rag", 0), ("rag", 1)]
    for (scenario, index), whole in windows.items():
        for prefix, total in (
            ("endpoint:", whole),
            ("replica:", apart_windows[(scenario, "endpoint:b", index)]),
        ):
            merged = Bucket()
            for (s, span, i), bucket in apart_windows.items():
                if (s, i) == (scenario, index) and span.startswith(prefix):
                    merged.add(bucket)
            itl = merged.histograms.histogram("itl")
            assert itl.get_total_count() == total.histograms.histogram("itl").get_total_count()
            assert merged.histograms.encode()["itl"] == total.histograms.encode()["itl"]
    # by hand: window 1's replica r1 has the gaps 33, 35 and 300 ms
    r1 = apart_windows[("rag", "replica:r1", 1)].histograms.histogram("itl")
    assert r1.get_total_count() == 3 and 299_000 <= r1.get_max_value() <= 300_500
    row = apart_row("rag", "replica:r1", 1, 5.0, apart_windows[("rag", "replica:r1", 1)])
    assert row["itl_p50_ms"] == pytest.approx(35, rel=0.01)
    assert row["itl_p99_ms"] == pytest.approx(300, rel=0.01)


def test_the_endpoints_rows_survive_the_journal_and_the_report_draws_them(
    tmp_path: Path,
) -> None:
    run, _ = windowed()
    writer = JournalWriter(tmp_path / "killed" / DATA_DIR / JOURNAL_FILE, run.meta)
    writer.flush(run.buckets, run.timeseries[:1], run.meta, apart=run.timeseries_apart[:2])
    writer.flush(run.buckets, run.timeseries, run.meta, apart=run.timeseries_apart)
    assert RunData.load(tmp_path / "killed").timeseries_apart == run.timeseries_apart
    write_results(tmp_path / "out", run)
    page = (tmp_path / "out" / "report.html").read_text()
    for kind in ("endpoint", "replica"):
        assert f"Requests per second, by {kind}" in page
        assert f"TTFT p99 per window (ms), by {kind}" in page
        assert f"ITL p99 per window (ms), by {kind}" in page
        assert f"Error rate per window (%), by {kind}" in page


def test_timeseries_csv_has_each_endpoints_and_replicas_rows_adding_up_to_the_scenarios(
    tmp_path: Path,
) -> None:
    run, _ = windowed()
    write_results(tmp_path, run)
    with (tmp_path / "timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:4] == ["scenario", "endpoint", "replica", "t_s"]
    whole = [r for r in rows if not r["endpoint"] and not r["replica"]]
    endpoints = [r for r in rows if r["endpoint"]]
    replicas = [r for r in rows if r["replica"]]
    assert len(whole) == 3 and len(rows) == len(whole) + len(endpoints) + len(replicas)
    assert [(r["endpoint"], r["t_s"]) for r in endpoints] == [
        ("a", "0.0"), ("a", "5.0"), ("b", "0.0"), ("b", "5.0"), ("b", "10.0")
    ]  # fmt: skip
    for window in whole:
        for key in ("requests_ok", "requests_failed", "errors_http_5xx"):
            parts = [int(r[key] or 0) for r in endpoints if r["t_s"] == window["t_s"]]
            assert sum(parts) == int(window[key] or 0), (window["t_s"], key)
    # replica r2's slow request and its failure, in its own rows (by hand)
    r2 = [r for r in replicas if r["replica"] == "r2"]
    assert [(r["t_s"], r["requests_ok"], r["errors_http_5xx"]) for r in r2] == [
        ("5.0", "1", ""), ("10.0", "0", "1")
    ]  # fmt: skip
    assert float(r2[0]["ttft_p99_ms"]) == pytest.approx(900, rel=0.001)


def test_slogate_run_passes_several_hosts_on_as_endpoints() -> None:
    args = build_parser().parse_args(
        ["run", "chat", "--host", "a=http://h:1", "--host", "http://h:2", "--spread", "weighted"]
    )
    take_endpoints(args)
    assert args.host == "http://h:1"
    command = locust_command(args, Path("s.yaml"), args.host, Path("out"), (1, "one"))
    assert command[command.index("--host") + 1] == "http://h:1"
    given = [command[i + 1] for i, arg in enumerate(command) if arg == "--endpoint"]
    assert given == ["a=http://h:1", "http://h:2"]
    assert command[command.index("--spread") + 1] == "weighted"
    one = build_parser().parse_args(["run", "chat", "--host", "http://h:1"])
    take_endpoints(one)
    assert "--endpoint" not in locust_command(one, Path("s"), one.host, Path("o"), (1, "one"))
    twice = build_parser().parse_args(
        ["run", "chat", "--host", "a=http://h:1", "--host", "a=http://h:2"]
    )
    with pytest.raises(ValueError, match="named twice"):
        take_endpoints(twice)


def test_a_metrics_target_is_off_the_engine_or_a_named_replica_of_a_tier() -> None:
    assert parse_target("off") is None
    assert parse_target("http://h:1/metrics") == ScrapeTarget(None, "http://h:1/metrics")
    assert parse_target("r0=http://h:2/metrics") == ScrapeTarget("r0", "http://h:2/metrics")
    assert parse_target("decode:d1=http://h:3/m") == ScrapeTarget("d1", "http://h:3/m", "decode")
    assert parse_target("router=http://h:4/m") == ScrapeTarget(
        "router", "http://h:4/m", router=True
    )
    assert parse_target("router:gw=http://h:5/m") == ScrapeTarget("gw", "http://h:5/m", router=True)
    for bad, why in (
        ("h:1/metrics", "http"),
        ("middle:r=http://h/m", "tier 'middle': expected prefill, decode or router"),
        ("=http://h/m", "a name"),
        ("my replica=http://h/m", "a name"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_target(bad)


ROUTERS = """\
# TYPE slogate_router_requests counter
slogate_router_requests_total{reason="round-robin",replica="replica-0"} 7
slogate_router_requests_total{reason="session",replica="replica-0"} 3
slogate_router_requests_total{reason="round-robin",replica="replica-1"} 9
# TYPE slogate_router_requests_in_flight gauge
slogate_router_requests_in_flight{replica="replica-0"} 2
# TYPE slogate_router_errors counter
slogate_router_errors_total{replica="replica-1"} 1
# TYPE sgl_router_processed_requests counter
sgl_router_processed_requests_total{worker="http://10.0.0.1:8000"} 40
# TYPE sgl_router_running_requests gauge
sgl_router_running_requests{worker="http://10.0.0.1:8000"} 5
# TYPE sgl_router_cb_outcomes counter
sgl_router_cb_outcomes_total{outcome="success",worker="http://10.0.0.1:8000"} 38
sgl_router_cb_outcomes_total{outcome="failure",worker="http://10.0.0.1:8000"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{server="http://10.0.0.2:8000"} 4
vllm:num_requests_waiting 99
# TYPE vllm:current_qps gauge
vllm:current_qps{server="http://10.0.0.2:8000"} 1.5
# TYPE inference_pool_per_pod_queue_size gauge
inference_pool_per_pod_queue_size{model_server_pod="pod-a",name="pool"} 6
"""


def test_a_routers_series_are_read_per_replica_in_each_routers_spelling() -> None:
    """slogate's, SGLang's, vLLM production-stack's and llm-d EPP's names, by
    hand: reasons summed, a failure outcome kept apart, an unlabelled engine
    series (no replica) ignored."""
    assert router_routes(ROUTERS) == {
        "replica-0": {"dispatched_total": 10.0, "in_flight": 2.0},
        "replica-1": {"dispatched_total": 9.0, "errors_total": 1.0},
        "http://10.0.0.1:8000": {"dispatched_total": 40.0, "in_flight": 5.0, "errors_total": 2.0},
        "http://10.0.0.2:8000": {"waiting": 4.0, "qps": 1.5},
        "pod-a": {"waiting": 6.0},
    }
    with pytest.raises(MetricsParseError):
        router_routes("not { metrics")


def test_the_routers_view_is_its_growth_and_gauges_over_the_measured_window() -> None:
    run = run_data()
    run.meta["warmup_s"] = 5.0
    scrape = {"source": "router", "engine": "unknown", "series": {}, "counters": {}}
    readings = [  # (t_s, sent to r0, in flight on r0, errors of r1)
        (0.0, 3, 9, 0), (5.0, 10, 2, 1), (10.0, 25, 4, 1), (15.0, 40, 0, 4)
    ]  # fmt: skip
    run.server_metrics = [
        {**scrape, "t_s": t, "routes": {"r0": {"dispatched_total": sent, "in_flight": busy},
                                        "r1": {"errors_total": errors,
                                               "active_decode_blocks": 10.0 * busy}}}
        for t, sent, busy, errors in readings
    ]  # fmt: skip
    summary = build_summary(run)
    parse(Summary, summary, "summary.json")
    routes = summary["servers"]["router"]["routes"]
    # the scrape at 0 s is warm-up: growth from 5 s to 15 s, gauges over 5, 10, 15 s
    assert routes["r0"] == {"dispatched_total": 30.0, "in_flight": {"mean": 2.0, "max": 4.0}}
    assert routes["r1"] == {
        "errors_total": 3.0, "active_decode_blocks": {"mean": 20.0, "max": 40.0}
    }  # fmt: skip


SCENARIO = """
name: ep
workload: {kind: chat, text: prose, input_tokens: 100, output_tokens: 8}
load: {users: 1, duration: 5s}
endpoints:
"""


def test_a_scenario_names_its_endpoints_with_weights_and_clear_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        SCENARIO + '  - {name: a, url: "http://10.0.0.1:8000", weight: 3}\n'
        '  - {name: b, url: "http://10.0.0.2:8000/v1"}\n'
    )
    (scenario,) = scenarios.load(good)
    assert scenario.endpoints == (
        EndpointSpec("a", "http://10.0.0.1:8000", 3.0),
        EndpointSpec("b", "http://10.0.0.2:8000/v1", 1.0),
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        SCENARIO + '  - {name: a, url: "ftp://x", weight: 0}\n  - {name: a, url: "http://h:1"}\n'
    )
    with pytest.raises(scenarios.ScenarioError) as error:
        scenarios.load(bad)
    text = str(error.value)
    assert "endpoints[0].url: expected an http(s) base URL, got 'ftp://x'" in text
    assert "endpoints[0].weight: expected a number > 0, got 0" in text
    (tmp_path / "twice.yaml").write_text(
        SCENARIO + '  - {name: a, url: "http://h:1"}\n  - {name: a, url: "http://h:2"}\n'
    )
    with pytest.raises(scenarios.ScenarioError, match=r"endpoints\[1\]\.name: 'a' is named twice"):
        scenarios.load(tmp_path / "twice.yaml")


def test_a_routers_session_cookie_is_read_from_its_set_cookie_headers() -> None:
    """llm-d's later session affinity: ``Set-Cookie: llm-d-session=...``, the
    value alone sent back (repeated Set-Cookie headers arrive one a line)."""
    name = "llm-d-session"
    assert set_cookie_value(f'{name}="cmVwbGljYS0x"; Path=/; HttpOnly', name) == "cmVwbGljYS0x"
    assert set_cookie_value(f"a=1\n{name}=x1; Max-Age=0\n{name}=x2==", name) == "x2=="
    assert set_cookie_value("LLM-D-SESSION=x", name) is None  # a cookie's name keeps its case
    assert set_cookie_value(f"{name}=a b", name) is None  # a Cookie header cannot carry it back
    assert set_cookie_value(f"{name}=a,b; Path=/", name) is None
    assert set_cookie_value("", name) is None


def test_a_scenario_names_a_session_cookie_or_a_session_header_not_both(tmp_path: Path) -> None:
    base = "name: c\nworkload: {kind: chat, text: prose, input_tokens: 100, output_tokens: 8}\n"
    (tmp_path / "cookie.yaml").write_text(base + "request: {session_cookie: My-Session}\n")
    (scenario,) = scenarios.load(tmp_path / "cookie.yaml")
    assert scenario.request.session_cookie == "My-Session"
    (tmp_path / "both.yaml").write_text(
        base + "request: {session_header: x-session-token, session_cookie: llm-d-session}\n"
    )
    with pytest.raises(scenarios.ScenarioError, match=r"request\.session_cookie: .*not both"):
        scenarios.load(tmp_path / "both.yaml")
    (tmp_path / "bad.yaml").write_text(base + "request: {session_cookie: 'a b'}\n")
    with pytest.raises(
        scenarios.ScenarioError, match=r"request\.session_cookie: expected a cookie"
    ):
        scenarios.load(tmp_path / "bad.yaml")


def test_metrics_prom_has_each_endpoints_and_replicas_latency_requests_and_verdict() -> None:
    """The rows a dashboard draws per replica: the slow, failing r2 by hand,
    and each ``by``'s requests adding up (endpoints to the scenario's,
    replicas to endpoint b's: only b's responses named their replica)."""
    summary = build_summary(run_data(recorded()))
    families = {
        f.name: f.samples
        for f in text_string_to_metric_families(openmetrics_text(parse(Summary, summary, "s")))
    }
    latency = {
        (x.labels["by"], x.labels["name"], x.labels["metric"], x.labels["quantile"]): x.value
        for x in families["slogate_apart_latency_seconds"]
    }
    assert latency[("replica", "r2", "ttft", "0.5")] == pytest.approx(0.9, rel=0.01)
    assert latency[("endpoint", "a", "ttft", "0.5")] == pytest.approx(0.04, rel=0.01)
    requests = {
        (x.labels["by"], x.labels["name"], x.labels["outcome"]): x.value
        for x in families["slogate_apart_requests"]
    }
    assert requests[("replica", "r2", "failed")] == 1
    block = summary["scenarios"]["rag"]
    for outcome in ("ok", "failed"):
        endpoints = sum(
            v for (by, _, o), v in requests.items() if by == "endpoint" and o == outcome
        )
        replicas = sum(v for (by, _, o), v in requests.items() if by == "replica" and o == outcome)
        assert endpoints == block["requests"][outcome]
        assert replicas == block["endpoints"]["b"]["requests"][outcome]
    verdicts = {
        (x.labels["by"], x.labels["name"]): x.labels["slogate_apart_verdict"]
        for x in families["slogate_apart_verdict"]
        if x.value == 1
    }
    assert verdicts[("replica", "r2")] == block["replicas"]["r2"]["verdict"]
    assert len(verdicts) == 4  # a, b, r1, r2
