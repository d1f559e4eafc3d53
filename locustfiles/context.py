"""State of the load side inside one Locust process.

Each process of a run (the local runner, or each worker) has one ``LoadContext``:
the scenarios, one streaming client per scenario, the recorder every finished
request goes into (and, with ``--save-requests``, the request log), and the
shared run origin that places requests on the timeline. The master has one too,
with no clients: it only absorbs the workers' recorders.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NoReturn

from slogate.analysis.documents.export import request_line
from slogate.analysis.measurement.recorder import GoodputLimits, Recorder
from slogate.analysis.measurement.records import USER, RequestRecord, SessionRecord, sender
from slogate.client.endpoints import Endpoint, Spread, WeightedRoundRobin
from slogate.client.engine_info import TokenizeError, remote_token_counter
from slogate.client.identity import Identity
from slogate.client.streaming import StreamClient
from slogate.locustfiles.backlog import Backlog
from slogate.locustfiles.clearance import Clearance
from slogate.locustfiles.context_count import tokenize_timeout
from slogate.locustfiles.loopwatch import LoopWatch
from slogate.locustfiles.request_log import RequestLog
from slogate.locustfiles.timeline import Timeline, build_timeline
from slogate.locustfiles.worker_clocks import wall
from slogate.scenarios import Planner
from slogate.scenarios.context_fit import ContextFit
from slogate.scenarios.model import Scenario
from slogate.scenarios.planner import prepare_text

if TYPE_CHECKING:  # the OpenTelemetry SDK only where --otlp-traces is given
    from slogate.locustfiles.otlp_export import SpanPush

log = logging.getLogger("slogate")


def _stop_user() -> NoReturn:
    """Stop the Locust user planning now, quietly. Imported here: importing
    Locust patches the process for gevent, which a module the tests import
    alone must not do; in a load process Locust is imported already."""
    from locust.exception import StopUser

    raise StopUser()


def goodput_limits(scenarios: list[Scenario]) -> dict[str, GoodputLimits]:
    limits = {}
    for s in scenarios:
        g = s.slo.goodput
        if g is not None:
            limits[s.name] = GoodputLimits(
                ttft_ms=g.ttft_ms, ttfa_ms=g.ttfa_ms, tpot_ms=g.tpot_ms, e2e_ms=g.e2e_ms
            )
    return limits


class Slots:
    """A process's open-loop sending slots (its dispatchers share them): a
    request takes the lowest free one and gives it back when it ends, so a
    slot's requests never overlap and the slots are as many as were ever in
    flight at once. A slot is the open-loop run's sender, as a user is the
    closed-loop run's."""

    __slots__ = ("_free", "_opened")

    def __init__(self) -> None:
        self._free: list[int] = []
        self._opened = 0

    def take(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        self._opened += 1
        return self._opened - 1

    def give(self, slot: int) -> None:
        heapq.heappush(self._free, slot)


@dataclass
class LoadContext:
    scenarios: list[Scenario]
    host: str
    model: str
    seed: int
    shards: int
    window_s: float
    origin_s: float | None = None
    timeline: Timeline = field(init=False)
    recorder: Recorder = field(init=False)
    in_flight: int = 0
    cancelled: int = 0
    finished: int = 0
    timeline_done: bool = False
    stop_early: bool = False
    failure: str | None = None  # why the run ended before its time: it is incomplete
    cpu_warning: bool = False
    watch: LoopWatch = field(init=False)
    request_log: RequestLog | None = None
    spans: SpanPush | None = None  # --otlp-traces
    fit: ContextFit | None = None
    owned_by: str = ""  # the engine as its /v1/models named itself
    # several endpoints (docs/load.md, "Several endpoints"): none means the host alone
    endpoints: list[Endpoint] = field(default_factory=list)
    spread: str = "round-robin"
    affinity: str = "conversation"
    endpoint_in_flight: list[int] = field(init=False)
    _spread: Spread = field(init=False)
    _clients: dict[tuple[str, int], StreamClient] = field(default_factory=dict)
    _endpoint_of: dict[StreamClient, int] = field(default_factory=dict)
    _token_counters: dict[str | None, Callable[[str], int] | None] = field(default_factory=dict)
    _user_numbers: itertools.count = field(default_factory=itertools.count)
    # open loop: who sends each request (analysis.measurement.records.sender)
    slots: Slots = field(default_factory=Slots)
    session_numbers: itertools.count = field(default_factory=itertools.count)
    _picker: WeightedRoundRobin = field(init=False)
    _dispatching: set[str] = field(default_factory=set)
    # where bookkeeping waits for a gap between the open-loop instants
    clearance: Clearance = field(default_factory=Clearance)
    # open loop: each dispatcher's arrivals due and not yet sent
    backlogs: list[Backlog] = field(default_factory=list)
    # how requests are named: the run's trace, the request id's header, the tracestate
    identity: Identity = field(default_factory=Identity.fresh)

    def __post_init__(self) -> None:
        self.timeline = build_timeline(self.scenarios[0].load, self.dispatchers)
        self.recorder = Recorder(goodput_limits(self.scenarios), self.window_s)
        if self.origin_s is not None:
            self.start_clock(self.origin_s)
        self._picker = WeightedRoundRobin([s.weight for s in self.scenarios])
        self.endpoint_in_flight = [0] * max(len(self.endpoints), 1)
        self._spread = Spread(self.endpoints or [Endpoint("", self.host)], self.spread)
        self.watch = LoopWatch(busy=self.streaming)

    def streaming(self) -> bool:
        """Whether a request of this process is in flight."""
        return self.in_flight > 0

    def prepare(self) -> None:
        """Build now what the first user of each scenario would build on the loop:
        its planner's tokenizer and text corpus (seconds of CPU, once per
        process), so it neither stalls the run nor escapes the start-up freeze."""
        for scenario in self.scenarios:
            self.planner(scenario, stream=0)
            if self.failure is not None:  # the engine's /tokenize failed: said once
                return

    @property
    def dispatchers(self) -> int:
        """Open loop: one dispatcher user per scenario of the mix in every process."""
        return self.shards * len(self.scenarios)

    def start_clock(self, origin_s: float | None = None) -> float:
        """Fix the run's origin (wall time, shared by every process of the run):
        the one given (a worker gets the master's), else now unless already set."""
        if origin_s is not None:
            self.origin_s = origin_s
        elif self.origin_s is None:
            self.origin_s = wall()
        self.recorder.origin_s = self.origin_s
        return self.origin_s

    def elapsed_s(self) -> float:
        return self._since_origin()[1]

    def _since_origin(self) -> tuple[float, float]:
        """The run's origin (fixed now if it is not yet) and the seconds since."""
        origin = self.origin_s if self.origin_s is not None else self.start_clock()
        return origin, wall() - origin

    def next_user(self, worker_index: int) -> tuple[Scenario, int, int]:
        """The scenario of the next user started here, its planner stream and
        its id as a sender (:func:`~slogate.analysis.measurement.records.sender`).

        Streams are disjoint across workers (worker index in the high bits),
        so a distributed run never replays one conversation twice; so are ids."""
        number = next(self._user_numbers)
        scenario = self.scenarios[self._picker.next()]
        return scenario, (worker_index << 20) | number, sender(USER, worker_index, number)

    def claim_dispatcher(self) -> Scenario | None:
        """The next scenario of this process still without an open-loop
        dispatcher; None when each has one (a second would replay its shard)."""
        for scenario in self.scenarios:
            if scenario.weight > 0 and scenario.name not in self._dispatching:
                self._dispatching.add(scenario.name)
                return scenario
        return None

    def prepare_text(self) -> None:
        """Tokenize every scenario's prompt text (blocking; call it in a thread)."""
        for scenario in self.scenarios:
            prepare_text(scenario)

    def planner(self, scenario: Scenario, stream: int) -> Planner:
        counter = None
        if scenario.request.tokenizer == "server":
            counter = self.server_token_counter(scenario.request.api_key_env)
        return Planner(scenario, self.seed, stream, count_tokens=counter, fit=self.fit)

    def server_token_counter(self, api_key_env: str | None) -> Callable[[str], int] | None:
        """The engine's /tokenize, asked once per process and key whether it has
        one, with the scenario's own key; guarded (:meth:`_guarded`)."""
        if api_key_env not in self._token_counters:
            try:
                timeout = tokenize_timeout(self.scenarios)
                found = remote_token_counter(self.host, api_key_env, timeout, self.model)
            except TokenizeError as error:
                self.fail(str(error))
                found = None
            self._token_counters[api_key_env] = None if found is None else self._guarded(found)
        return self._token_counters[api_key_env]

    def engine_count(self, text: str) -> int:
        """``text``'s tokens by the engine's /tokenize (with the first
        scenario's key, as the pre-flight asked it): what a fit measures with
        once the pre-flight found the engine counts (``ContextFit.measure``)."""
        counter = self.server_token_counter(self.scenarios[0].request.api_key_env)
        if counter is None:
            self.fail("the engine's /tokenize, found before the load, no longer counts")
            _stop_user()
        return counter(text)

    def _guarded(self, counter: Callable[[str], int]) -> Callable[[str], int]:
        """``counter``, whose failure ends the run (:meth:`fail`) and stops the
        user planning with it (``StopUser``: no traceback): a prompt it cannot
        measure would be sent with an unknown length. Once failed, it fails at
        once, so no user waits for it again."""

        def count(text: str) -> int:
            if self.failure is not None:
                _stop_user()
            try:
                return counter(text)
            except TokenizeError as error:
                self.fail(str(error))
                _stop_user()

        return count

    def fail(self, reason: str) -> None:
        """End the load now for ``reason``, said once: what was measured is
        kept, and the run is incomplete (exit 3)."""
        if self.failure is None:
            self.failure = reason
            log.error("slogate: %s: stopping the run", reason)
        self.stop_early = True

    def pick_endpoint(self) -> int:
        """The endpoint the next conversation (or request) goes to; 0 with one."""
        if len(self.endpoints) < 2:
            return 0
        return self._spread.pick(self.endpoint_in_flight)

    def turn_endpoint(self, sticky: int) -> int:
        """A conversation's next request: its own endpoint, unless the run's
        affinity is per request."""
        return sticky if self.affinity == "conversation" else self.pick_endpoint()

    def client(self, scenario: Scenario, concurrency: int, endpoint: int = 0) -> StreamClient:
        """The scenario's client of one endpoint (by index), made on first use."""
        found = self._clients.get((scenario.name, endpoint))
        if found is None:
            model = self.model if scenario.model == "auto" else scenario.model
            named = self.endpoints[endpoint] if self.endpoints else None
            found = self._clients[(scenario.name, endpoint)] = StreamClient(
                named.url if named else self.host,
                api=scenario.api,
                model=model,
                options=scenario.request.for_engine(self.owned_by),
                timeouts=scenario.timeouts,
                concurrency=concurrency,
                endpoint=named.name if named else None,
                identity=self.identity,
            )
            self._endpoint_of[found] = endpoint
        return found

    def sending(self, client: StreamClient, delta: int) -> None:
        """A request of ``client`` starts (+1) or ends (-1): the process's and
        its endpoint's requests in flight."""
        self.in_flight += delta
        self.endpoint_in_flight[self._endpoint_of.get(client, 0)] += delta

    def backlog(self) -> dict[str, float]:
        """Open loop: the arrivals of this process whose instant has passed and
        that no send has taken yet (``backlog``: held back by the in-flight
        cap, mostly), and how long the oldest held at the cap has waited
        (``backlog_wait_ms``)."""
        now_ns = time.perf_counter_ns()
        return {
            "backlog": sum(backlog.held(now_ns) for backlog in self.backlogs),
            "backlog_wait_ms": max((b.waited_ms(now_ns) for b in self.backlogs), default=0.0),
        }

    def watch_loop(self) -> None:
        """Start measuring this process's loop delays and collector pauses from
        the end of warm-up (docs/load.md, "The generator's own error")."""
        warmup_left_s = self.timeline.warmup_s - self.elapsed_s()
        self.watch.start(time.perf_counter_ns() + max(int(warmup_left_s * 1e9), 0))

    def close(self) -> None:
        self.watch.stop()
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        if self.request_log is not None:
            self.request_log.close()
        if self.spans is not None:
            self.spans.close()
            self.spans = None

    def record_session(
        self, scenario: str, session: SessionRecord, where: Sequence[str] = ()
    ) -> None:
        """A finished agent session; ``where``: its endpoint and replica spans."""
        elapsed = self.elapsed_s()
        self.recorder.record_session(
            scenario,
            session,
            stage=self.timeline.stage_name(elapsed),
            warmup=self.timeline.in_warmup(elapsed),
            head=self.timeline.head_segment(elapsed),
            spans=where,
        )

    def record_conversation_cache(
        self, scenario: str, cached: int, prompt: int, where: Sequence[str] = ()
    ) -> None:
        """A finished conversation's prefix-cache tokens: cached of prompt;
        ``where``: its endpoint and replica spans."""
        elapsed = self.elapsed_s()
        self.recorder.record_conversation_cache(
            scenario,
            cached,
            prompt,
            stage=self.timeline.stage_name(elapsed),
            warmup=self.timeline.in_warmup(elapsed),
            head=self.timeline.head_segment(elapsed),
            spans=where,
        )

    def record_probe(self, record: RequestRecord) -> None:
        """A probe (``--probes``) that ended after warm-up, as the scenario's requests are."""
        origin, elapsed = self._since_origin()
        if not self.timeline.in_warmup(elapsed):
            self.recorder.record_probe(record, wall_s=origin + elapsed)

    def record_cut_off(self, record: RequestRecord, warm: bool = False) -> None:
        """A request the run's end cut off after it was sent (``record.end_ns``:
        the cut), kept in the timelines only, as :meth:`record` would place it."""
        origin, elapsed = self._since_origin()
        warmup = warm or self.timeline.in_warmup(elapsed)
        self.recorder.record_cut_off(record, wall_s=origin + elapsed, warmup=warmup)

    def record(
        self, record: RequestRecord, warm: bool = False, ended_s: float | None = None
    ) -> None:
        """One finished request; ``warm`` ones (sent to warm the engine's cache)
        go where the warm-up's requests go, out of the measurements.
        ``ended_s``: when it ended, in seconds since the run's origin (now when
        None): one recorded after waiting for a gap between instants
        (:attr:`clearance`) still lands in its own window and stage."""
        chunks = record.chunk_ns
        together = [chunks[i] for i in range(1, len(chunks)) if chunks[i] == chunks[i - 1]]
        if together:
            record.stalled_same_reads = self.watch.stalled_reads(together)
        self.finished += 1
        origin, elapsed = self._since_origin()
        if ended_s is not None:
            elapsed = ended_s
        wall = origin + elapsed
        stage = self.timeline.stage_name(elapsed)
        warmup = warm or self.timeline.in_warmup(elapsed)
        head = self.timeline.head_segment(elapsed)
        metrics = self.recorder.record(record, wall_s=wall, stage=stage, warmup=warmup, head=head)
        if self.request_log is not None:
            self.request_log.write(request_line(record, metrics, wall, stage, warmup))
        if self.spans is not None:
            self.spans.add(record, warmup)
