"""slogate inside Locust: options, per-process setup, shipping data to the master, the gate.

Importing this module (every locustfile of slogate does) registers listeners on
Locust's events, which are its extension seam:

- ``init_command_line_parser``: slogate's options, generated from
  :mod:`slogate.locustfiles.options` (a bad value exits 2 as Locust parses it);
- ``init``: the local runner or master loads and validates the scenarios
  (exit 2 when they are bad), finds the engine's model (exit 3 when the host
  cannot be reached) and prepares the run session;
- ``test_start``: every process builds its load context; workers get the
  scenario path, model, origin and shard count from the master's options;
  each load process starts watching its own loop, once it has built its
  planners and frozen its start-up objects (out of the cyclic collector's
  sight: a local runner at ``init``, a worker here); ``spawning_complete``
  freezes the users too;
- ``report_to_master`` / ``worker_report``: workers ship their encoded
  histograms and counters (then reset), the master merges them exactly;
- ``test_stop`` on a worker sends its final payload; the master waits for
  every worker's final payload before judging (Locust itself would drop the
  last reports, docs/design.md);
- ``quitting``: the session writes the results folder and sets the exit code,
  also after SIGINT/SIGTERM, then marked incomplete;
- ``quit``, after Locust's own output: the verdict table, the last thing a run
  prints. Locust's statistics tables only with ``--locust-stats``.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import gevent
from locust import events
from locust.runners import MasterRunner, WorkerRunner

from slogate import scenarios
from slogate.analysis.documents.history import auto_baseline, results_folder, unwritable
from slogate.analysis.documents.neutral import neutralise_logs
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.engine_side.server_metrics import parse_target
from slogate.analysis.measurement.costs import Pricing
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.client.endpoints import Endpoint, check_endpoints, parse_endpoint
from slogate.client.engine_info import (
    EngineError,
    RouteNotServed,
    TokenizeError,
    discover,
    probe_route,
)
from slogate.client.identity import Identity, new_trace_id
from slogate.client.streaming import PROTOCOLS
from slogate.locustfiles import state
from slogate.locustfiles.context import LoadContext
from slogate.locustfiles.context_count import ContextCount, find_count, run_fit
from slogate.locustfiles.distributed import Coordinator, WorkerSide, lost_reason
from slogate.locustfiles.loopwatch import freeze_spawned, freeze_startup
from slogate.locustfiles.memory import release_freed_memory
from slogate.locustfiles.options import add_locust_options, scenario_overrides
from slogate.locustfiles.request_log import REQUESTS_FILE, RequestLog
from slogate.locustfiles.session import RunSession
from slogate.locustfiles.shipping import ShippingError, pack
from slogate.locustfiles.web_access import (
    AUTH_ENV,
    exposure_problem,
    fill_start_form,
    install_login,
)
from slogate.locustfiles.webview import install_web_view
from slogate.locustfiles.worker_clocks import wall
from slogate.reports.crashlog import crash_line, write_crash_log
from slogate.reports.progress import LiveView
from slogate.scenarios.context_fit import Overflow, sampled_overflow
from slogate.scenarios.loader import resolve
from slogate.scenarios.model import Scenario

if TYPE_CHECKING:
    from slogate.locustfiles.otlp_export import MetricsPush, SpanPush
    from slogate.locustfiles.scraper import MetricsScraper

log = logging.getLogger("slogate")

# Locust prints its statistics tables through this logger.
LOCUST_STATS_LOGGER = "locust.stats_logger"
FINALS_TIMEOUT_S = 30.0
OTLP_EXTRA = "pip install 'slogate[otlp]'"
SELFTEST_S = 5.0
PARENT_POLL_S = 0.5

_default_scenario: str | None = None
_session: RunSession | None = None
_coordinator: Coordinator | None = None
_view: LiveView | None = None
_worker_side: WorkerSide | None = None


def use(default_scenario: str) -> None:
    """Name the scenario a locustfile runs when ``--scenario`` is not given."""
    global _default_scenario
    _default_scenario = default_scenario


def scenario_path(options: Any) -> Path:
    """``--scenario`` (or SLOGATE_SCENARIO), else the locustfile's own scenario;
    a ValueError for a locustfile that names none (it never called ``use``)."""
    named = options.scenario or _default_scenario
    if not named:
        raise ValueError("no scenario: pass --scenario FILE (or set SLOGATE_SCENARIO)")
    return resolve(named)


events.init_command_line_parser.add_listener(add_locust_options)


def build_context(
    options: Any, loaded: list[Scenario], host: str, model: str, shards: int, origin: float | None
) -> LoadContext:
    """This process's load context; every process logs requests into the folder
    the master chose (``--out`` reaches workers with the master's options)."""
    saving = options.save_requests and options.out
    header = options.request_id_header
    ctx = LoadContext(
        scenarios=loaded,
        host=host,
        endpoints=run_endpoints(options, loaded),
        spread=options.spread,
        affinity=options.affinity,
        model=model,
        owned_by=options.slogate_engine,
        seed=loaded[0].seed,
        shards=shards,
        window_s=options.window,
        origin_s=origin,
        request_log=RequestLog(Path(options.out) / REQUESTS_FILE) if saving else None,
        spans=span_push(options, model),
        identity=Identity(
            options.slogate_trace_id or new_trace_id(),
            None if header == "off" else header,
            options.tracestate,
        ),
    )
    if options.slogate_context:
        count = ContextCount(options.slogate_count_with, options.slogate_framing)
        mode = options.fit_context or ""
        ctx.fit = run_fit(options.slogate_context, mode, count, ctx.engine_count)
    return ctx


def span_push(options: Any, model: str) -> SpanPush | None:
    """``--otlp-traces``: this load process's spans, named by the run's folder."""
    if not (options.otlp_traces and options.otlp_endpoint):
        return None
    from slogate.locustfiles.otlp_export import SpanPush

    return SpanPush(options.otlp_endpoint, Path(options.out).name, model)


def metrics_push(options: Any, out_dir: Path) -> MetricsPush | None:
    """``--otlp-endpoint``: the judging process's exporter (exit 2 without the SDK,
    or with ``--otlp-traces`` alone)."""
    if options.otlp_traces and not options.otlp_endpoint:
        fail(EXIT_CONFIG, "--otlp-traces needs --otlp-endpoint URL")
    if not options.otlp_endpoint:
        return None
    try:
        from slogate.locustfiles.otlp_export import MetricsPush
    except ImportError as error:
        fail(EXIT_CONFIG, f"--otlp-endpoint: {error.name} is not installed: {OTLP_EXTRA}")
    return MetricsPush(options.otlp_endpoint, out_dir.name)


def run_endpoints(options: Any, loaded: list[Scenario]) -> list[Endpoint]:
    """The run's endpoints: the command line's (``--endpoint``), else the
    first scenario's ``endpoints:``, else none (the host alone)."""
    if options.endpoint:
        return [parse_endpoint(text) for text in options.endpoint]
    return [Endpoint(e.name, e.url, e.weight) for e in loaded[0].endpoints]


def fail(code: int, message: object) -> NoReturn:
    """Stop before any load is sent: 2 for bad configuration, 3 for an unreachable engine."""
    log.error("slogate: %s", message)
    sys.exit(code)


@events.init.add_listener
def on_init(environment: Any, runner: Any, web_ui: Any = None, **_: Any) -> None:
    global _session, _worker_side
    options = environment.parsed_options
    if options is None:
        return
    neutralise_logs()  # after Locust set its handlers up: every process's lines
    gevent.spawn(watch_parent, os.getppid())
    if isinstance(runner, MasterRunner):
        runner.register_message("slogate_final", on_final)
    if isinstance(runner, WorkerRunner):
        _worker_side = WorkerSide(runner, environment)
        _worker_side.install()
        return
    if web_ui is not None:
        guard_web_ui(web_ui, options)
    if not options.locust_stats:
        logging.getLogger(LOCUST_STATS_LOGGER).disabled = True
    try:
        _session = start_session(options, runner)
    except Exception as error:  # exit codes are a contract: 3, one line, a log file
        fail(EXIT_INVALID, crash_line(error, write_crash_log(error, shlex.join(sys.argv))))
    if isinstance(runner, MasterRunner):
        coordinate(runner, options, _session)
    else:
        prepare_process(_session.ctx)  # before the run's clock starts
    if web_ui is not None:
        install_web_view(web_ui, _session)
        load = _session.ctx.scenarios[0].load
        rate = load.rate.rps if load.rate is not None else None
        fill_start_form(web_ui, load.users, load.spawn_rate, rate, _session.ctx.timeline.total_s)
    gevent.signal_handler(signal.SIGTERM, on_sigterm, environment)


def guard_web_ui(web_ui: Any, options: Any) -> None:
    """The web UI listens beyond this machine only behind a login or when told
    to (``web_access``); exit 2 before it listens."""
    problem = exposure_problem(options.web_host, options.slogate_web_auth, options.web_insecure)
    if problem is not None:
        fail(EXIT_CONFIG, problem)
    if options.web_login != bool(options.slogate_web_auth):
        fail(EXIT_CONFIG, f"--web-login and --slogate-web-auth (or {AUTH_ENV}) go together")
    if options.web_login:
        install_login(web_ui, options.slogate_web_auth)


def start_session(options: Any, runner: Any) -> RunSession:
    """Validate everything, find the engine's model, prepare the judging session."""
    if options.run_time:
        options.slogate_duration = float(options.run_time)
        options.run_time = None  # the shape ends the run; Locust's own timer would cut warm-up
    check_slice(options.slice, options.window)
    try:
        loaded = scenarios.load(scenario_path(options), scenario_overrides(options))
    except (scenarios.ScenarioError, ValueError, OSError) as error:
        fail(EXIT_CONFIG, error)
    endpoints = run_endpoints(options, loaded)
    try:
        check_endpoints(endpoints)
    except ValueError as error:
        fail(EXIT_CONFIG, f"--endpoint: {error}")
    if not options.host and endpoints:
        options.host = endpoints[0].url
    if not options.host:
        fail(EXIT_CONFIG, "no host: pass --host URL")
    try:
        pricing = Pricing.from_options(options.gpu_price_per_hour, options.gpus)
        engine = discover(options.host, loaded[0].request.api_key_env, timeout=10.0)
        probe_routes(options.host, loaded, engine.model)
    except (scenarios.ScenarioError, ValueError, OSError, RouteNotServed) as error:
        fail(EXIT_CONFIG, error)
    except EngineError as error:
        fail(EXIT_INVALID, error)
    if options.probes and loaded[0].api == "embeddings":
        fail(
            EXIT_CONFIG,
            f"--probes: {loaded[0].name} is an embeddings scenario: no token to wait for",
        )
    shards = options.processes if options.processes and options.processes > 0 else 1
    if isinstance(runner, MasterRunner):
        shards = max(shards, options.expect_workers or 1)
    options.slogate_model = engine.model
    options.slogate_engine = engine.owned_by
    options.slogate_shards = shards
    try:
        count, counter = find_count(options.host, loaded, engine)
        options.slogate_context, fits = context_check(
            loaded, engine.context, options.fit_context or "", count, counter
        )
    except TokenizeError as error:
        fail(EXIT_INVALID, error)
    options.slogate_count_with, options.slogate_framing = count.method, count.framing
    options.slogate_trace_id = options.slogate_trace_id or new_trace_id()  # workers receive it
    out_dir = results_folder(loaded[0].name, options.out)
    problem = unwritable(out_dir)
    if problem:
        fail(EXIT_CONFIG, problem)
    options.out = str(out_dir)  # workers receive it, and log requests there
    if options.save_requests:
        (out_dir / REQUESTS_FILE).write_bytes(b"")  # this run's requests only, even if none
    otlp = metrics_push(options, out_dir)
    names = [s.name for s in loaded]
    baseline = load_baseline(options.baseline, out_dir, names, engine.owned_by, engine.model)
    ctx = build_context(options, loaded, options.host, engine.model, shards, origin=None)
    state.install(ctx)
    session = RunSession(
        ctx,
        engine,
        out_dir,
        host=options.host,
        command=shlex.join(sys.argv),
        max_lag_ms=options.max_lag_ms or loaded[0].load.max_lag_ms,
        processes_reason=options.slogate_processes_reason or processes_reason(options),
        context_fits=fits,
        context_count=count if engine.context else None,
        baseline=baseline,
        pricing=pricing,
        push_url=options.push_metrics or None,
        allow_uncertain=options.allow_uncertain,
        abort_min_window_s=options.abort_min_window if options.abort_on_fail else None,
        saturation=options.saturation,
        slice_s=options.slice,
        probes_per_s=options.probes,
        otlp=otlp,
    )
    if options.selftest > 0:
        session.selftest = measure_generator(options.selftest)
    return session


def probe_routes(host: str, loaded: list[Scenario], model: str) -> None:
    """Pre-flight: each scenario's API route is served (RouteNotServed if not),
    asked once per route with that scenario's key."""
    asked = set()
    for scenario in loaded:
        path = PROTOCOLS[scenario.api].path
        if path not in asked:
            asked.add(path)
            probe_route(host, path, model, scenario.request.api_key_env)


def context_check(
    loaded: list[Scenario],
    context: int | None,
    mode: str,
    count: ContextCount,
    counter: Callable[[str], int] | None,
) -> tuple[int, list[Overflow]]:
    """Pre-flight: the planned requests against the engine's announced context,
    counted as ``count`` says (``counter``: the engine's). Refused (exit 2,
    with the counts) when some are longer and ``mode`` (``--fit-context``)
    says nothing; else the context that fits them (0: the engine announced
    none) and what a sample of each scenario gives."""
    if not context:
        return 0, []
    # a sampled prompt is counted whole, then (no system text) as the text a clamp
    # would cut: asked of the engine once
    measure = None if counter is None else functools.lru_cache(maxsize=8)(counter)
    fit = run_fit(context, mode, count, measure)
    found = [sampled_overflow(s, fit) for s in loaded]
    refused = [
        o.refusal(context, mode) for o in found if o.over and (not mode or o.dropped == o.sampled)
    ]
    if refused:
        fail(EXIT_CONFIG, "; ".join(refused))
    return context, [o for o in found if o.over]


def coordinate(runner: MasterRunner, options: Any, session: RunSession) -> None:
    """A master ships the scenario to each worker that connects, and accepts
    or refuses it (``distributed``)."""
    global _coordinator
    try:
        shipment = pack(scenario_path(options), scenario_overrides(options), session.ctx.scenarios)
    except (ShippingError, OSError) as error:
        fail(EXIT_CONFIG, error)
    _coordinator = Coordinator(runner, shipment, options.expect_workers)
    _coordinator.install()


def check_slice(slice_s: float, window_s: float) -> None:
    """A slice is made of whole windows (each window's requests go to one slice)."""
    if slice_s and (
        slice_s < window_s or not math.isclose(slice_s / window_s, round(slice_s / window_s))
    ):
        fail(EXIT_CONFIG, f"--slice {slice_s:g}s: expected a multiple of --window ({window_s:g}s)")


def processes_reason(options: Any) -> str:
    """Why this run has the processes it has, when `slogate run` did not say."""
    if options.processes and options.processes > 0:
        return f"--processes {options.processes}"
    if options.master:
        return f"--master, {options.expect_workers} workers expected"
    return "one process (no --processes)"


def load_baseline(
    given: str, out_dir: Path, names: list[str], owned_by: str, model: str
) -> tuple[str, RunData] | None:
    """The baseline's folder and data: the one given, or with ``auto`` the newest
    earlier run of the same scenarios and target beside ``out_dir`` (none on a first run)."""
    if given == "auto":
        found = auto_baseline(out_dir.parent, names, owned_by, model, exclude=out_dir)
        log.info("slogate: --baseline auto: %s", found or "no earlier run of this scenario")
        given = str(found) if found else ""
    try:
        return (given, RunData.load(given)) if given else None
    except (ValueError, OSError) as error:
        fail(EXIT_CONFIG, f"--baseline {given}: {error}")


def measure_generator(streams: int) -> dict[str, Any]:
    """The selftest's error bound at ``streams``, for the summary of this run."""
    from slogate.locustfiles.selftest import run_selftest

    result = run_selftest(streams=streams, duration_s=SELFTEST_S)
    for line in result.lines():
        log.info("slogate selftest: %s", line)
    return result.to_dict()


def on_sigterm(environment: Any) -> None:
    """End the run early, keeping what was measured.

    Headless Locust with a load shape joins the shape greenlet before it
    installs its own SIGTERM handler, so without this one SIGTERM would kill
    the process with nothing written. Ending the shape lets Locust shut down
    its usual way; ``on_quitting`` then writes the results marked incomplete.
    A master first stops its workers so their final data arrives.

    A master whose load has not started is still in Locust's wait for
    workers, which no stop ends, so it exits at once. Its runner's state
    cannot tell: a worker that connected and then went silent makes Locust
    "stop the test", and the master waits on, STOPPED, for the others.
    """
    runner = environment.runner
    if isinstance(runner, MasterRunner) and (_session is None or _session.start_wall is None):
        log.error("slogate: SIGTERM while waiting for workers: no load was sent")
        sys.exit(EXIT_INVALID)
    log.warning("slogate: SIGTERM: stopping the run and writing partial results")

    def stop() -> None:
        if isinstance(runner, MasterRunner):
            runner.stop()
        shape = runner.shape_greenlet
        if shape is not None and not shape.dead:
            shape.kill(block=False)
        else:
            runner.quit()

    gevent.spawn(stop)


def watch_parent(parent: int) -> None:
    """The load stops when the process that started this one dies (a SIGKILLed
    ``slogate run``, a master killed under its workers): a SIGTERM to itself
    stops the users and writes the results marked incomplete, so no orphan
    keeps loading the server (docs/reliability.md)."""
    while os.getppid() == parent:
        gevent.sleep(PARENT_POLL_S)
    log.error("slogate: parent process %d is gone: stopping the run", parent)
    os.kill(os.getpid(), signal.SIGTERM)


def on_final(environment: Any, msg: Any, **_: Any) -> None:
    if _session is not None:
        _session.absorb(msg.data, worker=msg.node_id)
        _session.finals.add(msg.node_id)


def gauges(ctx: LoadContext) -> dict[str, Any]:
    return {
        "in_flight": ctx.in_flight,
        **ctx.backlog(),
        "cancelled": ctx.cancelled,
        "cpu_warning": ctx.cpu_warning,
        "finished": ctx.finished,
        "failure": ctx.failure,
    }


def payload(ctx: LoadContext) -> dict[str, Any]:
    """A worker's data for the master: what it recorded since the last payload,
    its gauges, and its own health so far (the master keeps the latest)."""
    return {
        "recorder": ctx.recorder.drain(),
        "gauges": gauges(ctx),
        "generator": ctx.watch.health().to_dict(),
    }


@events.test_start.add_listener
def on_test_start(environment: Any, **_: Any) -> None:
    runner = environment.runner
    options = environment.parsed_options
    if isinstance(runner, WorkerRunner):
        if _worker_side is None or _worker_side.scenarios is None:
            raise RuntimeError("slogate: the master started the load before this worker's scenario")
        ctx = build_context(
            options,
            _worker_side.scenarios,
            environment.host,  # a worker gets the host with its spawn message, not as an option
            options.slogate_model,
            options.slogate_shards,
            origin=_worker_side.origin(options.slogate_origin),
        )
        state.install(ctx)
        prepare_process(ctx)
        ctx.watch_loop()
        if ctx.spans is not None:
            gevent.spawn(send_spans, ctx)
        return
    if _session is None:
        return
    if _coordinator is not None:
        _coordinator.wait_until_accepted()
        _session.workers = _coordinator.workers_meta()
    origin = _session.ctx.origin_s or _session.ctx.start_clock()
    options.slogate_origin = origin
    _session.start(origin)
    if not isinstance(runner, MasterRunner):
        _session.ctx.watch_loop()
        if _session.ctx.spans is not None:
            gevent.spawn(send_spans, _session.ctx)
    _session.scraper = start_scraper(options, _session.start_wall)
    gevent.spawn(housekeeping, environment, _session)
    if _session.otlp is not None:
        gevent.spawn(push_otlp, _session)
    if options.probes:
        gevent.spawn(send_probes, _session, options.probes)


def prepare_process(ctx: LoadContext) -> None:
    """A load process is set up before its clock starts: tokenize the prompt text
    in a thread (the loop keeps running meanwhile: a worker blocked for 3 s
    misses its heartbeats and is dropped by the master), build what its users
    would build lazily, then freeze what start-up allocated, so the collector
    never traverses it during the run (docs/load.md, "The generator's own error")."""
    gevent.get_hub().threadpool.apply(ctx.prepare_text)
    ctx.prepare()
    freeze_startup()
    release_freed_memory()


def start_scraper(options: Any, origin_s: float | None) -> MetricsScraper | None:
    """The engine's metrics (``--metrics-url``, else HOST/metrics; ``off``:
    none) and each named replica's beside them, on the run's clock (``origin_s``)."""
    given = [parse_target(text) for text in options.metrics_url or ()]
    if None in given:
        return None
    from slogate.locustfiles.scraper import MetricsScraper, metrics_url_for

    targets = [t for t in given if t is not None]
    url = next((t.url for t in targets if t.name is None), metrics_url_for(options.host))
    scraper = MetricsScraper(
        url,
        dcgm_url=options.dcgm_url or None,
        members=[t for t in targets if t.name is not None],
        origin_s=origin_s,
    )
    scraper.start()
    return scraper


def housekeeping(environment: Any, session: RunSession) -> None:
    """Once a second: close finished windows, sample users, flush the journal,
    see whether the run may stop early, show the progress (headless: the web UI
    has its own)."""
    global _view
    runner = environment.runner
    options = environment.parsed_options
    if options.headless:
        terminal = sys.stdout if sys.stdout.isatty() else sys.stderr
        _view = LiveView(terminal, options.status_interval)
    clearance = session.ctx.clearance
    while session.finished_code is None:
        gevent.sleep(1.0)
        session.users = runner.user_count
        with clearance.clear("windows"):
            session.close_windows()
        journal = clearance.steps("journal")
        session.flush_journal(pause=journal)
        journal.done()
        with clearance.clear("early stop"):
            session.check_early_stop()
        with clearance.clear("saturation"):
            session.check_saturation()
        if _view is not None and session.finished_code is None:
            with clearance.clear("view"):
                _view.show(session.progress(), time.monotonic())


def push_otlp(session: RunSession) -> None:
    """``--otlp-endpoint``: the metrics so far, every ``PUSH_INTERVAL_S`` until
    the run is judged (the session pushes the last, with the verdict)."""
    from slogate.locustfiles.otlp_export import PUSH_INTERVAL_S

    while session.otlp is not None and session.finished_code is None:
        gevent.sleep(PUSH_INTERVAL_S)
        if session.finished_code is None:
            with session.ctx.clearance.clear("otlp"):
                session.otlp.send(session.otlp_metrics())


def send_spans(ctx: LoadContext) -> None:
    """``--otlp-traces``: this load process's spans, one export at a time in
    the gaps between its open-loop instants, until its load stops (closing
    the context sends the rest). An export waits on the network inside its
    gap, which other greenlets keep running through."""
    from slogate.locustfiles.otlp_export import SPANS_INTERVAL_S

    while ctx.spans is not None:
        gevent.sleep(SPANS_INTERVAL_S)
        more = True
        while more and ctx.spans is not None:
            with ctx.clearance.clear("spans"):
                more = ctx.spans.send_some()


def send_probes(session: RunSession, rate: float) -> None:
    """``--probes``: from the process that judges the run, until its load ends."""
    from slogate.locustfiles.probes import Probes

    ctx = session.ctx
    probes = Probes(ctx, ctx.scenarios[0], rate)
    probes.run(lambda: session.finished_code is not None or ctx.elapsed_s() >= ctx.timeline.total_s)


@events.spawning_complete.add_listener
def on_spawning_complete(user_count: int, **_: Any) -> None:
    """A load process's users are up: their objects leave the collector's sight."""
    ctx = state.current_or_none()
    if ctx is not None and ctx.watch.running:  # a load process, not the master
        freeze_spawned()


@events.report_to_master.add_listener
def on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
    ctx = state.current_or_none()
    if ctx is not None:
        data["slogate"] = payload(ctx)


@events.worker_report.add_listener
def on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    if _session is not None and "slogate" in data:
        _session.absorb(data["slogate"], worker=client_id)


@events.cpu_warning.add_listener
def on_cpu_warning(environment: Any, cpu_usage: float, **_: Any) -> None:
    """A generator above 90% CPU delays its own timestamps: the run is invalid."""
    ctx = state.current_or_none()
    if ctx is not None:
        ctx.cpu_warning = True
    if _session is not None:
        _session.cpu_warning = True


_final_sent = False


def send_final(environment: Any) -> None:
    """A worker's last data, sent once its users have stopped."""
    global _final_sent
    ctx = state.current_or_none()
    if ctx is None or _final_sent:
        return
    _final_sent = True
    environment.runner.send_message("slogate_final", payload(ctx))


@events.test_stop.add_listener
def on_test_stop(environment: Any, **_: Any) -> None:
    runner = environment.runner
    ctx = state.current_or_none()
    if ctx is not None:
        ctx.close()
    if isinstance(runner, WorkerRunner):
        send_final(environment)
    elif isinstance(runner, MasterRunner) and _session is not None:
        wait_for_finals(_session, _coordinator, environment.stop_timeout or 0)
    web_run = _session if environment.web_ui is not None else None
    if web_run is not None and web_run.finished_code is None and web_run.ctx.timeline_done:
        finish_run(environment, web_run)


def wait_for_finals(session: RunSession, coordinator: Coordinator | None, drain_s: float) -> None:
    """Every worker's final data, from those still alive (a worker's comes once
    its requests in flight have finished, up to ``drain_s``): one Locust's
    heartbeat has marked missing sends nothing more, so it is not waited for."""
    deadline = time.monotonic() + FINALS_TIMEOUT_S + drain_s
    while time.monotonic() < deadline:
        expected = session.workers_seen | set(coordinator.accepted if coordinator else ())
        waiting = expected - session.finals
        if coordinator is not None:
            waiting &= coordinator.alive()
        if not waiting:
            break
        gevent.sleep(0.1)
    session.missing_finals = sorted(expected - session.finals)
    if session.missing_finals:
        log.error("slogate: no final data from workers %s", ", ".join(session.missing_finals))


@events.quitting.add_listener
def on_quitting(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        send_final(environment)
        return
    if _session is None or _session.finished_code is not None:
        return
    finish_run(environment, _session)


def finish_run(environment: Any, session: RunSession) -> None:
    """Judge the run and write its results folder: when the load ends under the
    web UI (which then links to the report), else as Locust quits, interrupted
    or not."""
    runner = environment.runner
    done = session.ctx.timeline_done
    if isinstance(runner, MasterRunner) and not done:
        runner.stop()  # interrupted: stop the workers, and collect their final data
    reason = None if done else "interrupted before the load profile ended"
    if session.ctx.failure is not None:
        reason = session.ctx.failure
    if _view is not None:
        session.close_windows(everything=True)
        _view.close(session.progress())  # the last panel, then the verdict table
    if session.missing_finals:
        reason = lost_reason(
            session.missing_finals,
            _coordinator.accepted if _coordinator else {},
            session.worker_last_s,
            {w: g.get("finished", 0) for w, g in session.worker_gauges.items()},
            session.start_wall or 0.0,
            min(wall(), (session.start_wall or 0.0) + session.ctx.timeline.total_s),
        )
    try:
        code = session.finish(complete=reason is None, reason=reason)
    except Exception as error:  # exit codes are a contract: 3, one line, a log file
        where = write_crash_log(error, shlex.join(sys.argv), session.out_dir)
        log.error("slogate: %s", crash_line(error, where))
        code = EXIT_INVALID
    environment.process_exit_code = code


@events.quit.add_listener
def on_quit(**_: Any) -> None:
    """The verdict table, after everything Locust prints on its way out."""
    if _session is not None and _session.verdict_table is not None:
        print(_session.verdict_table, flush=True)
