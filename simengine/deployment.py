"""A deployment on one machine: N simulated replicas behind a router, for tests and demos.

``slogate engine --replicas N --router round-robin|least-loaded|prefix-aware``
serves, in one process, N simulated engines (each its own port, its own
``/metrics``, ``/admin/faults`` and ``/admin/stats``) and a router on the
main port that sends each request to one of them (:mod:`.router`), names
the replica in the reply's ``x-served-by`` header, hands out a session token
(``x-session-token``, and the cookie ``llm-d-session``) that brings a
conversation's later turns back to the same replica (as does an id the
client chose, in ``x-dynamo-session-id``),
and exports its own decisions and queue per replica on its
``/metrics``.

One process, one event loop, and the router calls the chosen replica's
handler directly rather than forwarding over a socket: on the 2 cores slogate
is built on, N + 1 processes and a proxy hop that copies every chunk would
take CPU from the load generator beside them, and that CPU is measurement
error (docs/load.md, "The generator's own error"). The simulated engines
mostly sleep between steps, so one loop serves them all; each keeps its own
step lateness (``/admin/stats`` of its port), which says whether it kept real
time. A real router adds a hop this one does not: its own latency is the
real deployment's to measure.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from slogate.simengine import server
from slogate.simengine.config import EngineConfig
from slogate.simengine.engine import FULL_GC_INTERVAL_S
from slogate.simengine.router import (
    SESSION_COOKIE,
    SESSION_HEADER,
    SESSION_ID_HEADER,
    Router,
    session_token,
)
from slogate.simengine.simulate import kv_transfer_seconds

REPLICA_PREFIX = "SIMENGINE_REPLICA "  # one stderr line per replica: name and URL
GC_POLL_S = 0.5
PREFILLED_BY = "x-prefilled-by"  # disaggregated: the response header naming the prefill worker

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
GENERATE: dict[str, Handler] = {
    "/v1/chat/completions": server.chat_completions,
    "/v1/completions": server.completions,
    "/v1/responses": server.responses,
    "/v1/messages": server.messages,
    "/v1/embeddings": server.embeddings,
}
APIS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
}


def replica_names(count: int, disaggregated: tuple[int, int] | None = None) -> list[str]:
    """``replica-<i>``; disaggregated, ``prefill-<i>`` then ``decode-<j>``."""
    if disaggregated is None:
        return [f"replica-{i}" for i in range(count)]
    prefill, decode = disaggregated
    return [f"prefill-{i}" for i in range(prefill)] + [f"decode-{j}" for j in range(decode)]


def replica_configs(
    config: EngineConfig,
    count: int,
    faults: Mapping[str, Mapping[str, Any]],
    disaggregated: tuple[int, int] | None = None,
) -> dict[str, EngineConfig]:
    """Each replica's config: the deployment's, a seed of its own (so replicas
    do not draw the same output lengths in step) and its own faults.
    ValueError for a fault on a replica the deployment does not have."""
    names = replica_names(count, disaggregated)
    unknown = sorted(set(faults) - set(names))
    if unknown:
        raise ValueError(
            f"--replica-fault {unknown[0]}: no such replica; the replicas are "
            f"{names[0]} to {names[-1]}"
        )
    return {
        name: replace(
            config, seed=config.seed + i, faults=config.faults.updated(faults.get(name, {}))
        )
        for i, name in enumerate(names)
    }


@dataclass
class Replica:
    name: str
    app: web.Application
    url: str = ""

    @property
    def state(self) -> server.State:
        return self.app[server.STATE]


class Deployment:
    """The replicas and the router's state; :meth:`app` is the router's face."""

    def __init__(
        self, configs: Mapping[str, EngineConfig], policy: str, prefill_workers: int = 0
    ) -> None:
        self.replicas = [
            Replica(name, server.create_app(config, name=name)) for name, config in configs.items()
        ]
        capacity = min(c.profile.kv_capacity_tokens for c in configs.values())
        self.prefill = self.replicas[:prefill_workers]
        self.decode = self.replicas[prefill_workers:]
        self.prefill_router = (
            Router([r.name for r in self.prefill], policy, capacity) if self.prefill else None
        )
        self.router = Router([r.name for r in self.decode], policy, capacity)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        app[ROUTER] = self
        app.on_response_prepare.append(server.mark_served_by)
        app.on_response_prepare.append(_session_header)
        routes = [web.post(path, _routed(handler)) for path, handler in GENERATE.items()]
        routes += [
            web.get("/v1/models", _first_replica(server.models)),
            web.post("/tokenize", _first_replica(server.tokenize)),
            web.get("/health", server.health),
            web.get("/metrics", _metrics),
            web.get("/admin/replicas", _replicas),
            web.get("/admin/stats", _stats),
            web.post("/reset_prefix_cache", _reset_prefix_cache),
        ]
        app.add_routes(routes)
        return app

    def collect(self) -> Iterator[Metric]:
        """The router's own series: its decisions, its queue and the server
        errors it saw, per replica."""
        decisions = CounterMetricFamily(
            "slogate_router_requests",
            "Requests the router sent to each replica, by the reason it chose that one.",
            labels=["replica", "reason"],
        )
        in_flight = GaugeMetricFamily(
            "slogate_router_requests_in_flight",
            "Requests the router sent to each replica that have not finished.",
            labels=["replica"],
        )
        errors = CounterMetricFamily(
            "slogate_router_errors",
            "Requests each replica answered with a server error (5xx).",
            labels=["replica"],
        )
        routers = (
            [self.router] if self.prefill_router is None else [self.prefill_router, self.router]
        )
        for load in (load for router in routers for load in router.replicas):
            for reason, count in sorted(load.decisions.items()):
                decisions.add_metric([load.name, reason], count)
            in_flight.add_metric([load.name], load.in_flight)
            errors.add_metric([load.name], load.errors)
        yield decisions
        yield in_flight
        yield errors

    def idle(self) -> bool:
        return not any(r.state.engine.scheduler.has_work() for r in self.replicas)


ROUTER = web.AppKey("simengine_router", Deployment)


def _routed(handler: Handler) -> Handler:
    """The route's handler, run with the state of the replica the router chose."""

    async def route(request: web.Request) -> web.StreamResponse:
        deployment = request.app[ROUTER]
        api = APIS.get(request.path)
        prompt = ""
        if api is not None and deployment.router.policy == "prefix-aware":
            try:
                body = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                body = None  # the replica answers 400
            if isinstance(body, dict):
                prompt = server.prompt_text(body, api)
        headers = request.headers
        token = headers.get(SESSION_HEADER) or request.cookies.get(SESSION_COOKIE)
        decision = deployment.router.choose(prompt, token, headers.get(SESSION_ID_HEADER))
        decoder = deployment.decode[decision.index].state
        failed = False  # a client that went away is no server error
        try:
            if deployment.prefill_router is not None and api is not None:
                await _prefill(deployment, request, api, prompt, decoder)
            request[server.ROUTED] = decoder
            response = await handler(request)
            failed = response.status >= 500
            return response
        except Exception:
            failed = True  # aiohttp answers it with a 500
            raise
        finally:
            deployment.router.finished(decision.index, failed)

    return route


async def _prefill(
    deployment: Deployment, request: web.Request, api: str, prompt: str, decoder: server.State
) -> None:
    """Prefill on a prefill worker, then wait while the prompt's KV travels to
    the ``decoder`` (its bytes over the link, as the offline simulator times
    it; the decode worker counts the transfer in its metrics, as vLLM's NIXL
    connector does): the request's TTFT holds both."""
    assert deployment.prefill_router is not None
    decision = deployment.prefill_router.choose(prompt)
    worker = deployment.prefill[decision.index].state
    try:
        prefilled = await server.prefill(worker, request, api)
    finally:
        deployment.prefill_router.finished(decision.index)
    if prefilled is None:
        return  # the decode worker answers the request's error
    transfer_s = kv_transfer_seconds(worker.config.profile, prefilled.prompt_tokens)
    await asyncio.sleep(transfer_s / worker.config.speedup)
    decoder.engine.metrics.kv_transfer.observe(transfer_s)
    request[server.PREFILLED] = prefilled
    request[PREFILLED_BY] = deployment.prefill[decision.index].name


def _first_replica(handler: Handler) -> Handler:
    """What every replica answers alike (models, tokenizer): the first one answers."""

    async def answer(request: web.Request) -> web.StreamResponse:
        request[server.ROUTED] = request.app[ROUTER].replicas[0].state
        return await handler(request)

    return answer


async def _session_header(request: web.Request, response: web.StreamResponse) -> None:
    """The session token of the replica that served, in a header and, when
    the request did not carry it already, in a cookie (as llm-d's
    session-affinity scorer sets its ``llm-d-session``); and disaggregated,
    the prefill worker in ``x-prefilled-by``."""
    routed = request.get(server.ROUTED)
    if isinstance(routed, server.State) and routed.name is not None:
        token = session_token(routed.name)
        response.headers[SESSION_HEADER] = token
        if request.cookies.get(SESSION_COOKIE) != token:
            response.headers.add("Set-Cookie", f"{SESSION_COOKIE}={token}; Path=/; HttpOnly")
    prefilled_by = request.get(PREFILLED_BY)
    if isinstance(prefilled_by, str):
        response.headers[PREFILLED_BY] = prefilled_by


async def _metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[ROUTER].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _replicas(request: web.Request) -> web.Response:
    deployment = request.app[ROUTER]
    listing = {
        "router": deployment.router.policy,
        "replicas": [
            {"name": r.name, "url": r.url, "tier": tier}
            for tier, members in (("prefill", deployment.prefill), ("decode", deployment.decode))
            for r in members
        ],
    }
    return web.json_response(listing)


async def _stats(request: web.Request) -> web.Response:
    reset = request.query.get("reset", "0") not in ("0", "", "false")
    stats = {r.name: r.state.engine.stats(reset=reset) for r in request.app[ROUTER].replicas}
    return web.json_response(stats)


async def _reset_prefix_cache(request: web.Request) -> web.Response:
    """Every replica's prefix cache, as the route does on one engine."""
    return server.reset_prefix_caches(r.state for r in request.app[ROUTER].replicas)


async def _collect_when_idle(deployment: Deployment) -> None:
    """The process's full collections, as one engine's loop runs them alone
    (simengine/engine.py): when every replica is idle, or once overdue; an
    engine that collected while another streamed would stall that one."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1 << 30)
    last = time.monotonic()
    while True:
        await asyncio.sleep(GC_POLL_S)
        elapsed = time.monotonic() - last
        if elapsed > FULL_GC_INTERVAL_S or (elapsed > 1.0 and deployment.idle()):
            gc.collect()
            last = time.monotonic()


async def serve_deployment(
    configs: Mapping[str, EngineConfig],
    policy: str,
    host: str,
    port: int,
    *,
    prefill_workers: int = 0,
    exit_with_stdin: bool = False,
) -> None:
    """Serve the replicas (each on a free port) and the router on ``host:port``
    until stopped; print ``SIMENGINE_READY <router URL>`` once all listen.
    ``prefill_workers``: the first ones of ``configs`` prefill, the rest decode."""
    server.raise_open_files_limit()
    deployment = Deployment(configs, policy, prefill_workers)
    started = []
    try:
        for replica in deployment.replicas:
            runner, listener, replica.url = await server.start_app(replica.app, host, 0)
            started.append((runner, listener))
        runner, listener, url = await server.start_app(deployment.app(), host, port)
        started.append((runner, listener))
        first = next(iter(configs.values()))
        print(f"simengine: {server.describe(first)}", file=sys.stderr)
        for replica in deployment.replicas:
            print(f"{REPLICA_PREFIX}{replica.name} {replica.url}", file=sys.stderr)
        print(f"simengine: router {policy} at {url}", file=sys.stderr, flush=True)
        print(f"{server.READY_PREFIX}{url}", flush=True)
        collector = asyncio.get_running_loop().create_task(_collect_when_idle(deployment))
        try:
            await server.stop_requested(exit_with_stdin)
        finally:
            collector.cancel()
    finally:
        for runner, listener in reversed(started):
            listener.close()
            await runner.cleanup()
