"""Scrape the engine's Prometheus metrics (and optionally DCGM's) during a run.

The report shows the engine's own view (running, waiting, KV-cache usage, token
counters) beside the client's, so every few seconds the load side fetches the
metrics text and keeps the mapped series. A scrape that fails or exceeds its
timeout is counted and skipped: the run never depends on the metrics endpoint.

It runs in a daemon thread with ``urllib``: inside Locust, gevent's monkey
patching turns both into a cooperative greenlet and sockets, and outside it
(tests, plain Python) they stay a real thread, so the same code works in both.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slogate.analysis.engine_side.router_metrics import router_routes
from slogate.analysis.engine_side.server_metrics import DCGM, Dialect, ScrapeTarget, snapshot
from slogate.client.deadline import within

ENGINE = "engine"
GPU = "dcgm"
DEFAULT_INTERVAL_S = 5.0
DEFAULT_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 16 * 1024 * 1024


def metrics_url_for(host: str) -> str:
    """The conventional metrics URL of an engine served at ``host`` (also when
    the host is given with its ``/v1`` path)."""
    return host.rstrip("/").removesuffix("/v1") + "/metrics"


@dataclass(frozen=True)
class Target:
    source: str
    url: str
    dialect: Dialect | None
    tier: str | None = None
    router: bool = False


class MetricsScraper:
    """Fetches metrics periodically; ``samples()`` holds what it mapped.

    Each sample is ``{"t_s": seconds since origin_s, "source": "engine"|"dcgm"
    or a replica's name (``members``, with its ``"tier"`` when it has one),
    "engine": dialect name, "series": {canonical: value}, "counters": {raw
    counter: value}, "histograms": {canonical: Histogram.as_dict()}}``; a
    router's has ``"routes": {replica: {canonical: value}}`` too
    (``slogate.analysis.engine_side.router_metrics``).
    ``origin_s`` is the run's wall-clock origin, so scrape times line up with
    the client's time series.
    """

    def __init__(
        self,
        metrics_url: str,
        *,
        dcgm_url: str | None = None,
        members: Sequence[ScrapeTarget] = (),
        interval_s: float = DEFAULT_INTERVAL_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        origin_s: float | None = None,
    ) -> None:
        if interval_s <= 0 or timeout_s <= 0:
            raise ValueError(
                f"scrape interval and timeout must be > 0 s, got {interval_s} and {timeout_s}"
            )
        self.targets = [Target(ENGINE, metrics_url, None)]
        if dcgm_url:
            self.targets.append(Target(GPU, dcgm_url, DCGM))
        taken = {t.source for t in self.targets}
        for member in members:
            if member.name is None or member.name in taken:
                raise ValueError(f"metrics of {member.name!r}: a replica needs a name of its own")
            taken.add(member.name)
            self.targets.append(Target(member.name, member.url, None, member.tier, member.router))
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.origin_s = origin_s
        self.errors = {t.source: 0 for t in self.targets}
        self.last_error = {t.source: "" for t in self.targets}
        self.scrapes = {t.source: 0 for t in self.targets}
        self._samples: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Scrape now (before any load: the engine's levels before the run),
        then every ``interval_s`` until ``stop()``."""
        if self._thread is not None:
            raise RuntimeError("scraper already started")
        if self.origin_s is None:
            self.origin_s = time.time()
        self.scrape_once()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
        self._thread.start()

    def stop(self) -> list[dict[str, Any]]:
        """Stop the loop, take one last scrape (so counters cover the whole run), return samples."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=self.timeout_s * len(self.targets) + 1.0)
            self._thread = None
            self.scrape_once()
        return self.samples()

    def samples(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._samples)

    def summary(self) -> dict[str, Any]:
        """Scrape counts, error counts and the last error per source, for run metadata."""
        engines = {s["source"]: s["engine"] for s in self.samples()}
        return {
            t.source: {
                "url": t.url,
                "engine": engines.get(t.source),
                "scrapes": self.scrapes[t.source],
                "errors": self.errors[t.source],
                "last_error": self.last_error[t.source],
            }
            for t in self.targets
        }

    def scrape_once(self) -> None:
        """Scrape every target once; failures are counted, never raised."""
        for target in self.targets:
            self._scrape(target)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape_once()

    def engine_series(self, name: str) -> list[float]:
        """The engine's readings of canonical series ``name`` so far, in order."""
        return [
            s["series"][name]
            for s in self.samples()
            if s["source"] == ENGINE and name in s["series"]
        ]

    def poll_until(
        self, name: str, done: Callable[[float], bool], bound_s: float, poll_s: float
    ) -> list[tuple[float, float]]:
        """Scrape the engine every ``poll_s`` until its series ``name`` reads
        ``done`` or ``bound_s`` passed: (seconds since the call, reading) for
        each scrape that had it (the scrapes are kept as samples too)."""
        start = time.monotonic()
        readings: list[tuple[float, float]] = []
        while True:
            had = len(self.engine_series(name))
            self._scrape(self.targets[0])
            series = self.engine_series(name)
            elapsed = time.monotonic() - start
            if len(series) > had:
                readings.append((elapsed, series[-1]))
                if done(series[-1]):
                    return readings
            if elapsed + poll_s > bound_s:
                return readings
            time.sleep(poll_s)

    def _scrape(self, target: Target) -> None:
        origin = self.origin_s if self.origin_s is not None else time.time()
        t_s = round(time.time() - origin, 3)
        try:
            text = fetch_text(target.url, self.timeout_s)
            snap = snapshot(text, target.dialect)
            routes = router_routes(text) if target.router else {}
        except Exception as exc:  # any failure of a scrape is an error count, never a crash
            with self._lock:
                self.errors[target.source] += 1
                self.last_error[target.source] = f"{type(exc).__name__}: {exc}"
            return
        sample = {
            "t_s": t_s,
            "source": target.source,
            "engine": snap.engine,
            "series": snap.series,
            "counters": snap.counters,
            "histograms": {name: h.as_dict() for name, h in snap.histograms.items()},
        }
        if target.tier is not None:
            sample["tier"] = target.tier
        if target.router:
            sample["routes"] = routes
        with self._lock:
            self.scrapes[target.source] += 1
            self._samples.append(sample)


def _close(response: Any) -> None:
    response.close()


def fetch_text(url: str, timeout_s: float) -> str:
    """GET ``url`` and return its body as text; HTTP errors raise. ``timeout_s``
    bounds the whole answer, not each read: an endpoint that drips bytes
    forever must not hold the run's end (the last scrape comes after the load)."""
    deadline = time.monotonic() + timeout_s
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    pieces: list[bytes] = []
    size = 0
    answer = within(lambda: urllib.request.urlopen(request, timeout=timeout_s), timeout_s, _close)
    with answer as response:
        while size <= MAX_BODY_BYTES:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: no complete answer within {timeout_s:g} s")
            piece = response.read1(MAX_BODY_BYTES + 1 - size)
            if not piece:
                break
            pieces.append(piece)
            size += len(piece)
    if size > MAX_BODY_BYTES:
        raise ValueError(f"{url}: metrics body larger than {MAX_BODY_BYTES} bytes")
    return b"".join(pieces).decode("utf-8", errors="replace")
