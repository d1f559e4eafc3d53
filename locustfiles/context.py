"""State of the load side inside one Locust process.

Each process of a run (the local runner, or each worker) has one ``LoadContext``:
the scenarios, one streaming client per scenario, the recorder every finished
request goes into, and the shared run origin that places requests on the
timeline. The master has one too, with no clients: it only absorbs the
workers' recorders.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slogate.analysis.recorder import GoodputLimits, Recorder
from slogate.analysis.records import RequestRecord, SessionRecord
from slogate.locustfiles.client import StreamClient
from slogate.locustfiles.engine_info import remote_token_counter
from slogate.locustfiles.timeline import Timeline, build_timeline
from slogate.scenarios import Planner
from slogate.scenarios.model import Scenario


def goodput_limits(scenarios: list[Scenario]) -> dict[str, GoodputLimits]:
    limits = {}
    for s in scenarios:
        g = s.slo.goodput
        if g is not None:
            limits[s.name] = GoodputLimits(
                ttft_ms=g.ttft_ms, ttfa_ms=g.ttfa_ms, tpot_ms=g.tpot_ms, e2e_ms=g.e2e_ms
            )
    return limits


class WeightedRoundRobin:
    """Picks indexes in exact weight proportions (smooth weighted round robin),
    so N users split across a mix as declared rather than by chance."""

    def __init__(self, weights: list[float]) -> None:
        self.weights = weights
        self.total = sum(weights)
        self.current = [0.0] * len(weights)

    def next(self) -> int:
        for i, w in enumerate(self.weights):
            self.current[i] += w
        best = max(range(len(self.weights)), key=self.current.__getitem__)
        self.current[best] -= self.total
        return best


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
    timeline_done: bool = False
    cpu_warning: bool = False
    _clients: dict[str, StreamClient] = field(default_factory=dict)
    _user_numbers: itertools.count = field(default_factory=itertools.count)
    _picker: WeightedRoundRobin = field(init=False)
    _dispatching: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.timeline = build_timeline(self.scenarios[0].load, self.dispatchers)
        self.recorder = Recorder(goodput_limits(self.scenarios), self.window_s)
        if self.origin_s is not None:
            self.start_clock(self.origin_s)
        self._picker = WeightedRoundRobin([s.weight for s in self.scenarios])

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
            self.origin_s = time.time()
        self.recorder.origin_s = self.origin_s
        return self.origin_s

    def elapsed_s(self) -> float:
        if self.origin_s is None:
            self.start_clock()
        return time.time() - self.origin_s

    def next_user(self, worker_index: int) -> tuple[Scenario, int]:
        """The scenario of the next user started here and its planner stream.

        Streams are disjoint across workers (worker index in the high bits),
        so a distributed run never replays one conversation twice."""
        number = next(self._user_numbers)
        scenario = self.scenarios[self._picker.next()]
        return scenario, (worker_index << 20) | number

    def claim_dispatcher(self) -> Scenario | None:
        """The next scenario of this process still without an open-loop
        dispatcher; None when each has one (a second would replay its shard)."""
        for scenario in self.scenarios:
            if scenario.weight > 0 and scenario.name not in self._dispatching:
                self._dispatching.add(scenario.name)
                return scenario
        return None

    def planner(self, scenario: Scenario, stream: int) -> Planner:
        counter = self.server_token_counter if scenario.request.tokenizer == "server" else None
        return Planner(scenario, seed=self.seed, stream=stream, count_tokens=counter)

    @functools.cached_property
    def server_token_counter(self) -> Callable[[str], int] | None:
        """The engine's /tokenize, asked once per process whether it has one."""
        return remote_token_counter(self.host)

    def client(self, scenario: Scenario, concurrency: int) -> StreamClient:
        found = self._clients.get(scenario.name)
        if found is None:
            model = self.model if scenario.model == "auto" else scenario.model
            found = self._clients[scenario.name] = StreamClient(
                self.host,
                api=scenario.api,
                model=model,
                options=scenario.request,
                timeouts=scenario.timeouts,
                concurrency=concurrency,
            )
        return found

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def record_session(self, scenario: str, session: SessionRecord) -> None:
        elapsed = self.elapsed_s()
        self.recorder.record_session(
            scenario,
            session,
            stage=self.timeline.stage_name(elapsed),
            warmup=self.timeline.in_warmup(elapsed),
        )

    def record(self, record: RequestRecord) -> None:
        elapsed = self.elapsed_s()
        wall = self.origin_s + elapsed
        self.recorder.record(
            record,
            wall_s=wall,
            stage=self.timeline.stage_name(elapsed),
            warmup=self.timeline.in_warmup(elapsed),
        )
