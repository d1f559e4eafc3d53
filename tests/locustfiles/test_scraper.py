"""The metrics scraper against a real HTTP server on 127.0.0.1: success, failures, timeouts."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from slogate.analysis.engine_side.server_metrics import ScrapeTarget
from slogate.locustfiles.scraper import MetricsScraper, metrics_url_for

DCGM_TEXT = (
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 75\n'
    "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    'DCGM_FI_DEV_FB_USED{gpu="0"} 1024\n'
)


def llamacpp_text(predicted: int) -> str:
    return (
        "# TYPE llamacpp:tokens_predicted_total counter\n"
        f"llamacpp:tokens_predicted_total {predicted}\n"
        "# TYPE llamacpp:requests_processing gauge\n"
        "llamacpp:requests_processing 2\n"
    )


@dataclass
class MetricsServer:
    url: str
    hits: dict[str, int]


@pytest.fixture(scope="module")
def server() -> Iterator[MetricsServer]:
    """An aiohttp server in its own thread: /metrics counts up 10 tokens per scrape."""
    hits = {"metrics": 0}

    async def metrics(_: web.Request) -> web.Response:
        hits["metrics"] += 1
        return web.Response(text=llamacpp_text(10 * hits["metrics"]))

    async def dcgm(_: web.Request) -> web.Response:
        return web.Response(text=DCGM_TEXT)

    async def broken(_: web.Request) -> web.Response:
        return web.Response(status=500, text="engine exploded")

    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(2.0)
        return web.Response(text=llamacpp_text(1))

    async def html(_: web.Request) -> web.Response:
        return web.Response(text="<html><body>502 Bad Gateway</body></html>")

    app = web.Application()
    app.add_routes(
        [
            web.get("/metrics", metrics),
            web.get("/dcgm", dcgm),
            web.get("/broken", broken),
            web.get("/slow", slow),
            web.get("/html", html),
        ]
    )
    loop = asyncio.new_event_loop()
    # the handler of /slow a test gave up on is cancelled at the end, not awaited (2 s)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield MetricsServer(url=f"http://127.0.0.1:{port}", hits=hits)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


def wait_for(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_engine_and_dcgm_are_scraped_periodically(server: MetricsServer) -> None:
    scraper = MetricsScraper(
        metrics_url_for(server.url), dcgm_url=server.url + "/dcgm", interval_s=0.05
    )
    scraper.start()
    wait_for(lambda: scraper.summary()["engine"]["scrapes"] >= 3)
    scraper.stop()

    engine = [s for s in scraper.samples() if s["source"] == "engine"]
    gpu = [s for s in scraper.samples() if s["source"] == "dcgm"]
    assert len(engine) >= 4  # three in the loop, one final at stop
    assert [s["t_s"] for s in engine] == sorted(s["t_s"] for s in engine)
    assert engine[0]["engine"] == "llamacpp"
    assert engine[0]["series"]["running"] == 2.0
    predicted = [s["series"]["generation_tokens_total"] for s in engine]
    assert predicted == sorted(predicted) and predicted[-1] > predicted[0]
    assert engine[-1]["counters"] == {"llamacpp:tokens_predicted_total": predicted[-1]}
    assert gpu[0]["series"] == {"gpu_utilization": 0.75, "gpu_memory_used_bytes": 1024**3}
    summary = scraper.summary()
    assert summary["engine"]["errors"] == 0 and summary["dcgm"]["errors"] == 0
    assert summary["engine"]["engine"] == "llamacpp"


def test_named_replicas_are_scraped_beside_the_engine_with_their_tier(
    server: MetricsServer,
) -> None:
    members = [
        ScrapeTarget("p0", server.url + "/metrics", "prefill"),
        ScrapeTarget("d0", server.url + "/metrics", "decode"),
    ]
    scraper = MetricsScraper(server.url + "/metrics", members=members, interval_s=60.0)
    scraper.scrape_once()
    by_source = {s["source"]: s for s in scraper.samples()}
    assert sorted(by_source) == ["d0", "engine", "p0"]
    assert by_source["p0"]["tier"] == "prefill" and by_source["d0"]["tier"] == "decode"
    assert "tier" not in by_source["engine"]
    assert by_source["d0"]["series"]["running"] == 2.0
    assert scraper.summary()["p0"]["url"] == server.url + "/metrics"
    with pytest.raises(ValueError, match="a name of its own"):
        MetricsScraper(server.url, members=[ScrapeTarget("engine", server.url)])


def test_stop_takes_a_final_scrape_so_counters_cover_the_whole_run(
    server: MetricsServer,
) -> None:
    scraper = MetricsScraper(metrics_url_for(server.url), interval_s=60.0, origin_s=time.time())
    scraper.start()
    wait_for(lambda: len(scraper.samples()) == 1)
    first, last = scraper.stop()
    assert scraper.stop() == [first, last]  # a second stop neither scrapes nor fails
    assert last["series"]["generation_tokens_total"] > first["series"]["generation_tokens_total"]


@pytest.mark.parametrize(
    ("path", "error"),
    [("/broken", "HTTPError"), ("/html", "MetricsParseError"), ("/missing", "HTTPError")],
)
def test_failed_scrapes_are_counted_and_never_raise(
    server: MetricsServer, path: str, error: str
) -> None:
    scraper = MetricsScraper(server.url + path, interval_s=0.05)
    scraper.start()
    wait_for(lambda: scraper.summary()["engine"]["errors"] >= 2)
    scraper.stop()
    summary = scraper.summary()["engine"]
    assert scraper.samples() == []
    assert summary["scrapes"] == 0
    assert summary["last_error"].startswith(error)


def test_a_slow_endpoint_times_out_without_holding_up_stop(server: MetricsServer) -> None:
    scraper = MetricsScraper(server.url + "/slow", interval_s=0.05, timeout_s=0.2)
    scraper.start()
    wait_for(lambda: scraper.summary()["engine"]["errors"] >= 1)
    started = time.monotonic()
    scraper.stop()
    assert time.monotonic() - started < 1.5  # the final scrape gives up after 0.2 s too
    summary = scraper.summary()["engine"]
    assert summary["scrapes"] == 0
    assert "timed out" in summary["last_error"]


def test_a_refused_connection_is_an_error_count(server: MetricsServer) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    scraper = MetricsScraper(f"http://127.0.0.1:{closed_port}/metrics", interval_s=0.05)
    scraper.scrape_once()
    assert scraper.summary()["engine"]["errors"] == 1
    assert "Connection refused" in scraper.summary()["engine"]["last_error"]


def test_bad_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match="interval and timeout must be > 0"):
        MetricsScraper("http://127.0.0.1:1/metrics", interval_s=0)


GEVENT_SCRIPT = """
from gevent import monkey
monkey.patch_all()
import json, sys, time, gevent
from slogate.locustfiles.scraper import MetricsScraper
scraper = MetricsScraper(sys.argv[1], interval_s=0.05)
busy = gevent.spawn(lambda: [gevent.sleep(0.01) for _ in range(30)])
scraper.start()
deadline = time.monotonic() + 20
while len(scraper.samples()) < 3 and time.monotonic() < deadline:
    gevent.sleep(0.01)
busy.join()
scraper.stop()
print(json.dumps({"samples": len(scraper.samples()), "summary": scraper.summary()}))
"""


def test_scraper_runs_as_a_greenlet_in_a_gevent_patched_process(server: MetricsServer) -> None:
    """Inside Locust every process is monkey-patched; scrapes must go on beside other greenlets."""
    done = subprocess.run(
        [sys.executable, "-c", GEVENT_SCRIPT, metrics_url_for(server.url)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["samples"] >= 3
    assert result["summary"]["engine"]["errors"] == 0


def test_metrics_live_at_the_engines_root_also_for_a_v1_host() -> None:
    assert metrics_url_for("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url_for("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/metrics"
    assert metrics_url_for("http://gw/llm/v1") == "http://gw/llm/metrics"
