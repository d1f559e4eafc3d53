"""Load runs against a deployment of simulated replicas behind a router
(`slogate engine --replicas 3 --router ...`): the per-endpoint and per-replica
rows, prefix-aware routing against round-robin, a slow replica, and a
conversation kept on its replica by the router's session header."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from loadruns import ROOT, slogate, summary
from simprobe import engine_metrics

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.recorder import Bucket
from slogate.engines.simulated import Deployment, EngineProcess, start_engine

pytestmark = pytest.mark.slow  # engine processes and load runs of seconds

PROFILE = "llama-3.1-8b@h100"
ROUTER_HEADERS = {"served_by_header": "x-served-by", "session_header": "x-session-token"}
REPLICAS = ["replica-0", "replica-1", "replica-2"]
# one generous SLO: a gap SLO (ITL) on a busy shared host can be voided by the
# generator's own stalls, and these runs are about the rows, not the verdict
LOOSE = {"ttft_ms": {"p50": 5000}, "tpot_ms": None, "itl_ms": None, "goodput": None}


def scenario(tmp_path: Path, source: Path, **sections: dict[str, Any]) -> Path:
    """A copy of ``source`` with these sections' keys replaced (None: removed)."""
    data = yaml.safe_load(source.read_text())
    for key, changes in sections.items():
        merged = {**(data.get(key) or {}), **changes}
        data[key] = {k: v for k, v in merged.items() if v is not None}
    path = tmp_path / source.name
    path.write_text(yaml.safe_dump(data))
    return path


def rag(tmp_path: Path, users: int, **sections: dict[str, Any]) -> Path:
    """The built-in RAG scenario with one long document (2k to 4k tokens) of a
    pool of 30 per request (so a popular document recurs within a short run,
    and a request that finds its document cached prefills little but its
    question, a miss thousands of tokens), the
    router's headers named, in closed loop: on a shared 2-core host an open
    loop's generator lag can void the run, and these tests are about the
    replicas, not the arrival process."""
    workload = yaml.safe_load((ROOT / "scenarios" / "rag.yaml").read_text())["workload"]
    long = {"dist": "uniform", "min": 2000, "max": 4000}
    documents = {**workload["documents"], "pool": 30, "tokens": long}
    return scenario(
        tmp_path,
        ROOT / "scenarios" / "rag.yaml",
        workload={"documents": documents, "docs_per_request": 1},
        request=ROUTER_HEADERS,
        load={"rate": None, "users": users, "spawn_rate": users},
        **{"slo": LOOSE, **sections},
    )


def run(file: Path, out: Path, *hosts: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    args = [arg for host in hosts for arg in ("--host", host)]
    done = slogate("run", str(file), *args, "--out", str(out), *extra, timeout=240)
    assert done.returncode in (0, 1, 4), done.stdout[-2000:] + done.stderr[-3000:]
    return summary(out)


def lasting(seconds: int, warmup: str = "2s") -> tuple[str, ...]:
    return ("--duration", f"{seconds}s", "--warmup", warmup, "--processes", "1")


def counters(engine: EngineProcess) -> dict[str, tuple[float, float]]:
    """Each replica's own prefix-cache hits and queries (tokens)."""
    out = {}
    for name, url in engine.replicas().items():
        values = engine_metrics(url)
        out[name] = (
            values["vllm:prefix_cache_hits_total"],
            values["vllm:prefix_cache_queries_total"],
        )
    return out


@pytest.fixture
def deployment(request: pytest.FixtureRequest) -> Any:
    """A fresh deployment (no cache warmed by another test): ``Deployment``'s
    arguments by param."""
    with start_engine(PROFILE, deployment=Deployment(*request.param)) as engine:
        yield engine


@pytest.mark.parametrize("deployment", [(3, "round-robin")], indirect=True)
def test_endpoint_and_replica_rows_add_up_to_the_scenario_exactly(tmp_path, deployment) -> None:
    out = tmp_path / "out"
    replicas = deployment.replicas()
    hosts = [f"{name}={url}" for name, url in replicas.items()]
    scraped = [arg for n, u in replicas.items() for arg in ("--metrics-url", f"{n}={u}/metrics")]
    s = run(rag(tmp_path, users=4), out, *hosts, extra=(*lasting(12), *scraped))
    block = s["scenarios"]["rag"]
    assert block["requests"]["ok"] > 20
    for kind in ("endpoints", "replicas"):
        rows = block[kind]
        assert sorted(rows) == REPLICAS, kind
        for key in ("ok", "failed", "total"):
            assert sum(r["requests"][key] for r in rows.values()) == block["requests"][key]
        for key in ("input", "output"):
            assert sum(r["tokens"][key] for r in rows.values()) == block["tokens"][key]
        for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
            counts = sum(r["metrics"][metric]["count"] for r in rows.values())
            assert counts == block["metrics"][metric]["count"], (kind, metric)
        assert all(r["verdict"] in ("pass", "fail", "inconclusive") for r in rows.values())
    # the endpoint each request was sent to is the replica that named itself
    for name in REPLICAS:
        assert block["endpoints"][name]["requests"] == block["replicas"][name]["requests"]
    # each replica's own metrics beside the client's rows: their counters grow
    # between the first and the last scrape after warm-up, a part of the
    # measured window, so a replica finished at most the client's row (and
    # the 4 users' requests the stop may have cut off)
    servers = s["servers"]
    assert sorted(servers) == REPLICAS
    for name, server in servers.items():
        finished = server["counters"]["requests_total"]
        assert 0 < finished <= block["replicas"][name]["requests"]["ok"] + 4, (name, server)
        assert {"running", "waiting", "kv_cache_usage"} <= set(server["gauges"])
    page = (out / "report.html").read_text()
    assert "Replicas as their servers saw them" in page
    data = RunData.load(out)
    # the time series too: in each window (warm-up included) the endpoints'
    # and the replicas' counts add up to the scenario's
    assert len(data.timeseries) >= 3
    for kind in ("endpoints", "replicas"):
        assert f"Requests per second, by {kind[:-1]}" in page
        assert f"ITL p99 per window (ms), by {kind[:-1]}" in page
        for whole in data.timeseries:
            parts = [
                w for row in block[kind].values() for w in row["timeseries"]
                if w["t_s"] == whole["t_s"]
            ]  # fmt: skip
            for key in ("requests_ok", "requests_failed"):
                assert sum(w[key] for w in parts) == whole[key], (kind, whole["t_s"], key)
            # a percentile of the merged parts is at least the least of theirs
            # (HDR's rank rounding can put it a sample or two above the
            # greatest, so only this side is exact: test_endpoints.py merges
            # the windows' histograms themselves)
            for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
                values = [w[key] for w in parts if w[key] is not None]
                assert (whole[key] is None) == (not values), (kind, whole["t_s"], key)
                if values:
                    assert min(values) <= whole[key], (kind, whole["t_s"], key)
    # timeseries.csv has the same rows: each endpoint's beside the scenario's
    with (out / "timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    for whole in (r for r in rows if not r["endpoint"] and not r["replica"]):
        for kind in ("endpoint", "replica"):
            parts = [r for r in rows if r[kind] and r["t_s"] == whole["t_s"]]
            assert sum(int(r["requests_ok"]) for r in parts) == int(whole["requests_ok"])
    merged = Bucket()
    for bucket in data.endpoints("rag").values():
        merged.add(bucket)
    whole = data.overall("rag").histograms.histogram("ttft")
    parts = merged.histograms.histogram("ttft")
    assert parts.get_total_count() == whole.get_total_count()
    for p in (1.0, 50.0, 90.0, 99.0, 100.0):
        assert parts.get_value_at_percentile(p) == whole.get_value_at_percentile(p)


def test_prefix_aware_routing_caches_more_and_answers_sooner_than_round_robin(tmp_path) -> None:
    """The same RAG requests through each router: prefix-aware sends a popular
    document back to the replica that cached it. The client's hit rate (the
    replies' cached_tokens) agrees with the replicas' own counters."""
    measured = {}
    for policy in ("round-robin", "prefix-aware"):
        with start_engine(PROFILE, deployment=Deployment(3, policy)) as engine:
            before = counters(engine)
            out = tmp_path / policy
            # no warm-up: the engines count every request, the client then too
            s = run(rag(tmp_path, users=4), out, engine.url, extra=lasting(16, "0s"))
            after = counters(engine)
        block = s["scenarios"]["rag"]
        cache = block["prefix_cache"]
        hits = sum(after[n][0] - before[n][0] for n in after)
        queries = sum(after[n][1] - before[n][1] for n in after)
        # the engines also counted the requests the stop cut off: rates, not sums
        assert abs(cache["hit_rate"] - hits / queries) < 0.05, (policy, cache, hits, queries)
        for name, row in block["replicas"].items():
            replica_hits = after[name][0] - before[name][0]
            assert row["prefix_cache"]["cached_tokens"] <= replica_hits
        measured[policy] = (cache["hit_rate"], block["metrics"]["ttft_ms"]["p50"])
    (rr_rate, rr_ttft), (pa_rate, pa_ttft) = measured["round-robin"], measured["prefix-aware"]
    assert pa_rate > rr_rate + 0.05, measured
    assert pa_ttft < rr_ttft, measured


@pytest.mark.parametrize(
    "deployment",
    [(3, "round-robin", {"replica-1": {"header_delay_s": 1.0, "header_delay_rate": 1.0}})],
    indirect=True,
)
def test_a_slow_replica_fails_its_own_row_and_the_diagnosis_names_it(tmp_path, deployment) -> None:
    file = rag(tmp_path, users=6, slo={**LOOSE, "ttft_ms": {"p50": 700}})
    s = run(file, tmp_path / "out", deployment.url, extra=lasting(14))
    rows = s["scenarios"]["rag"]["replicas"]
    assert rows["replica-1"]["verdict"] == "fail"
    assert rows["replica-0"]["verdict"] == rows["replica-2"]["verdict"] == "pass"
    slow = [f for f in s["diagnosis"] if f["cause"] == "slow_replica"]
    assert len(slow) == 1 and slow[0]["evidence"]["replica"] == "replica-1", s["diagnosis"]
    assert "replica-1" in slow[0]["text"]


@pytest.mark.parametrize(
    "deployment", [(3, "least-loaded", {"replica-1": {"http_500_rate": 0.3}})], indirect=True
)
def test_the_routers_dispatch_counts_agree_with_the_served_by_headers(tmp_path, deployment) -> None:
    """The router's own metrics (``--metrics-url router=URL``): the requests it
    sent each replica over the run equal the requests the client saw each
    replica serve, and the server errors it counted those the client got from
    each (replica-1 fails 30% of its requests with HTTP 500). No warm-up and a
    drain: every request the router sent is measured."""
    out = tmp_path / "out"
    extra = ("--metrics-url", f"router={deployment.url}/metrics", "--drain", "20s")
    s = run(rag(tmp_path, users=4), out, deployment.url, extra=(*lasting(10, "0s"), *extra))
    rows = s["scenarios"]["rag"]["replicas"]
    assert sorted(rows) == REPLICAS
    routes = s["servers"]["router"]["routes"]
    assert sorted(routes) == REPLICAS
    for name in REPLICAS:
        assert routes[name]["dispatched_total"] == rows[name]["requests"]["total"], (name, routes)
        assert routes[name]["errors_total"] == rows[name]["requests"]["failed"], (name, routes)
        assert routes[name]["in_flight"]["max"] <= 4
    assert sum(r["dispatched_total"] for r in routes.values()) >= 12
    assert routes["replica-1"]["errors_total"] > 0
    assert "The router's view: router" in (out / "report.html").read_text()


def served_by_conversation(out: Path) -> dict[int, list[str]]:
    """Each conversation's replicas, turn by turn (one user: conversations are unique)."""
    turns: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for line in (out / "requests.jsonl").read_text().splitlines():
        request = json.loads(line)
        if request["ok"]:
            turns[request["conversation"]].append((request["turn"], request["served_by"]))
    return {c: [name for _, name in sorted(t)] for c, t in turns.items() if len(t) > 1}


@pytest.mark.parametrize("deployment", [(3, "round-robin")], indirect=True)
def test_the_session_header_keeps_every_turn_on_its_replica(tmp_path, deployment) -> None:
    source = ROOT / "tests" / "data" / "chat-turns.yaml"
    extra = ("--users", "1", "--duration", "8s", "--warmup", "1s", "--save-requests")
    kept = scenario(tmp_path, source, request=ROUTER_HEADERS)
    run(kept, tmp_path / "kept", deployment.url, extra=extra)
    by_conversation = served_by_conversation(tmp_path / "kept")
    assert len(by_conversation) >= 2
    assert all(len(set(names)) == 1 for names in by_conversation.values()), by_conversation
    assert len({names[0] for names in by_conversation.values()}) >= 2  # the router still spreads
    # without the session header round-robin moves the turns from replica to replica
    (tmp_path / "loose").mkdir()
    loose = scenario(tmp_path / "loose", source, request={"served_by_header": "x-served-by"})
    run(loose, tmp_path / "loose-out", deployment.url, extra=extra)
    spread = served_by_conversation(tmp_path / "loose-out")
    assert any(len(set(names)) > 1 for names in spread.values()), spread


def kept_on_their_replicas(tmp_path: Path, deployment: Any, request: dict[str, str]) -> dict:
    """A conversation run through the round-robin router with these request
    settings (and a drain: no turn cut off): every conversation stays on one
    replica, the router still spreads them, and it routed every later turn
    by the session (its own decisions). The run's summary."""
    source = ROOT / "tests" / "data" / "chat-turns.yaml"
    extra = ("--users", "1", "--duration", "8s", "--warmup", "0s", "--save-requests")
    out = tmp_path / "out"
    s = run(
        scenario(tmp_path, source, request={"served_by_header": "x-served-by", **request}),
        out,
        deployment.url,
        extra=(*extra, "--drain", "20s"),
    )
    kept = served_by_conversation(out)
    assert len(kept) >= 2
    assert all(len(set(names)) == 1 for names in kept.values()), kept
    assert len({names[0] for names in kept.values()}) >= 2  # the router still spreads
    decisions = engine_metrics(deployment.url)
    bound = sum(v for k, v in decisions.items() if "reason=session" in k)
    assert bound == sum(len(names) - 1 for names in kept.values()), decisions
    return s


@pytest.mark.parametrize("deployment", [(3, "round-robin")], indirect=True)
def test_the_routers_session_cookie_keeps_every_turn_on_its_replica(tmp_path, deployment) -> None:
    """llm-d's later way: the router sets ``llm-d-session`` on a reply only
    when the request lacked it, and the client sends the cookie back on
    every later turn of the conversation."""
    kept_on_their_replicas(tmp_path, deployment, {"session_cookie": "llm-d-session"})


@pytest.mark.parametrize("deployment", [(3, "round-robin")], indirect=True)
def test_the_clients_own_session_id_keeps_every_turn_on_its_replica(tmp_path, deployment) -> None:
    """Dynamo's way: no token from the router, the client names each
    conversation in ``x-dynamo-session-id`` on every turn; the round-robin
    router binds the id to the replica of its first turn."""
    s = kept_on_their_replicas(tmp_path, deployment, {"session_id_header": "x-dynamo-session-id"})
    # each conversation's own numbers by the replica it stayed on: they add up
    block = s["scenarios"]["chat-turns"]
    whole = block["prefix_cache"]["conversations"]["count"]
    rows = block["replicas"].values()
    assert whole >= 2
    assert (
        sum(r["prefix_cache"]["conversations"]["count"] for r in rows if r["prefix_cache"]) == whole
    )
    assert "own hit rate p50" in (tmp_path / "out" / "report.html").read_text()


@pytest.mark.parametrize("deployment", [(3, "round-robin", {}, (1, 2))], indirect=True)
def test_a_disaggregated_deployment_shows_both_tiers(tmp_path, deployment) -> None:
    """1 prefill and 2 decode workers: the decode workers serve (their rows),
    and each tier's own metrics come in the summary and the report."""
    tiers = {"prefill-0": "prefill", "decode-0": "decode", "decode-1": "decode"}
    scraped = [
        arg
        for name, url in deployment.replicas().items()
        for arg in ("--metrics-url", f"{tiers[name]}:{name}={url}/metrics")
    ]
    out = tmp_path / "out"
    s = run(rag(tmp_path, users=3), out, deployment.url, extra=(*lasting(12), *scraped))
    assert sorted(s["scenarios"]["rag"]["replicas"]) == ["decode-0", "decode-1"]
    servers = s["servers"]
    assert {name: server["tier"] for name, server in servers.items()} == tiers
    for server in servers.values():
        assert server["counters"]["prompt_tokens_total"] > 0
    # time in each tier: the prefill worker's prefill, the decode workers' KV
    # transfers (the link's share of TTFT) and decode
    prefill = servers["prefill-0"]["time_ms"]
    assert prefill["prefill"] > 0 and "kv_transfer" not in prefill
    for name in ("decode-0", "decode-1"):
        decode = servers[name]["time_ms"]
        assert decode["kv_transfer"] > 0 and decode["decode"] > decode["prefill"] > 0, decode
    report = (out / "report.html").read_text()
    assert '<td class="l">prefill</td>' in report and '<td class="l">decode</td>' in report
