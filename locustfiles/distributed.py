"""Master and workers on different hosts: the handshake over Locust's message channel.

1. A worker, once its handlers are in place, greets the master
   (``slogate_hello``, again each second until answered: either side's
   handlers may not be registered yet when Locust connects them); the master
   sends it the scenario (``slogate_scenario``, docs/load.md "What crosses
   the wire").
2. The worker loads it, measures its clock against the master's
   (``slogate_clock`` round trips) and answers ``slogate_ready`` with its
   version, the scenario's digest as its code resolved it, its clock offset,
   its pid and host.
3. The master accepts it, or refuses it (``slogate_refused``) naming both
   versions or both digests; a refused worker quits with exit 2.

The master does not start the load before every connected worker has been
accepted: a worker never receives its users before its scenario.

At the end the master waits for the final data of the workers still alive;
one Locust's heartbeat marks missing (about 3 s of silence) is lost, and the
run is incomplete with a reason that says how much of its load is missing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import STATE_MISSING, MasterRunner

from slogate.analysis.verdict.slo import EXIT_CONFIG
from slogate.locustfiles.provenance import tool_version
from slogate.locustfiles.shipping import Shipment, ShippingError, refusal, unpack
from slogate.locustfiles.worker_clocks import ClockOffset, best_offset, wall
from slogate.scenarios import ScenarioError
from slogate.scenarios.model import Scenario

log = logging.getLogger("slogate")

HELLO_INTERVAL_S = 1.0
HELLO_TRIES = 120
CLOCK_SAMPLES = 8
CLOCK_REPLY_TIMEOUT_S = 2.0
CLOCK_GAP_S = 0.02
ACCEPT_TIMEOUT_S = 120.0


@dataclass(slots=True)
class WorkerInfo:
    """An accepted worker as the master knows it."""

    pid: int
    host: str
    clock: dict[str, float]

    def describe(self, worker: str) -> str:
        return f"worker {worker} (pid {self.pid} on {self.host})"


@dataclass
class Coordinator:
    """The master's side: ships the scenario, accepts or refuses workers."""

    runner: MasterRunner
    shipment: Shipment
    expected: int
    accepted: dict[str, WorkerInfo] = field(default_factory=dict)

    def install(self) -> None:
        self.runner.register_message("slogate_hello", self.on_hello)
        self.runner.register_message("slogate_ready", self.on_ready)
        self.runner.register_message("slogate_clock", self.on_clock)

    def on_hello(self, environment: Any, msg: Any, **_: Any) -> None:
        self.runner.send_message("slogate_scenario", self.shipment.to_message(), msg.node_id)

    def on_clock(self, environment: Any, msg: Any, **_: Any) -> None:
        reply = {"sent": msg.data["sent"], "master": wall()}
        self.runner.send_message("slogate_clock", reply, msg.node_id)

    def on_ready(self, environment: Any, msg: Any, **_: Any) -> None:
        data = msg.data
        info = WorkerInfo(data["pid"], data["host"], data.get("clock") or {})
        reason = refusal(self.shipment, data["version"], data.get("digest"), data.get("error"))
        if reason:
            log.error("slogate: refused %s: %s", info.describe(msg.node_id), reason)
            self.runner.send_message("slogate_refused", {"reason": reason}, msg.node_id)
            return
        self.accepted[msg.node_id] = info
        offset = info.clock.get("offset_ms", 0.0)
        log.info("slogate: accepted %s, clock offset %+.1f ms", info.describe(msg.node_id), offset)

    def wait_until_accepted(self) -> None:
        """Hold the start until every connected worker is accepted (refused
        ones quit and leave), and at least the expected number are."""
        deadline = time.monotonic() + ACCEPT_TIMEOUT_S
        while time.monotonic() < deadline:
            connected = {c.id for c in self.runner.clients.all}
            if len(self.accepted.keys() & connected) >= self.expected and connected <= set(
                self.accepted
            ):
                return
            gevent.sleep(0.05)
        log.error(
            "slogate: after %.0f s, %d of %d workers accepted: starting with them",
            ACCEPT_TIMEOUT_S,
            len(self.accepted),
            self.expected,
        )

    def alive(self) -> set[str]:
        """Workers Locust still hears from (its heartbeat marks the silent missing)."""
        return {c.id for c in self.runner.clients.all if c.state != STATE_MISSING}

    def workers_meta(self) -> dict[str, dict[str, Any]]:
        return {
            worker: {"pid": info.pid, "host": info.host, "clock": info.clock}
            for worker, info in self.accepted.items()
        }


@dataclass
class WorkerSide:
    """A worker's side: takes the shipped scenario, measures its clock, reports ready."""

    runner: Any
    environment: Any
    scenarios: list[Scenario] | None = None
    clock: ClockOffset | None = None
    _samples: list[tuple[float, float, float]] = field(default_factory=list)
    _reply: Event = field(default_factory=Event)
    _shipped: Event = field(default_factory=Event)

    def install(self) -> None:
        self.runner.register_message("slogate_scenario", self.on_scenario)
        self.runner.register_message("slogate_clock", self.on_clock)
        self.runner.register_message("slogate_refused", self.on_refused)
        gevent.spawn(self.greet)

    def greet(self) -> None:
        for _ in range(HELLO_TRIES):
            self.runner.send_message("slogate_hello", {})
            if self._shipped.wait(HELLO_INTERVAL_S):
                return
        log.error("slogate: no scenario from the master after %d greetings", HELLO_TRIES)

    def on_scenario(self, environment: Any, msg: Any, **_: Any) -> None:
        """Loaded in the message loop, so it is in place before any spawn
        message; the clock is measured in a greenlet (the loop must run to
        receive the master's replies)."""
        if self._shipped.is_set():
            return  # an answer to a repeated greeting
        self._shipped.set()
        shipment = Shipment.from_message(msg.data)
        try:
            self.scenarios, got = unpack(shipment)
            error = None
        except (ScenarioError, ShippingError, OSError) as exc:
            got, error = None, str(exc)
            log.error("slogate: the shipped scenario does not load here: %s", error)
        gevent.spawn(self.report_ready, got, error)

    def on_clock(self, environment: Any, msg: Any, **_: Any) -> None:
        self._samples.append((msg.data["sent"], msg.data["master"], wall()))
        self._reply.set()

    def on_refused(self, environment: Any, msg: Any, **_: Any) -> None:
        log.error("slogate: the master refused this worker: %s", msg.data["reason"])
        self.environment.process_exit_code = EXIT_CONFIG
        gevent.spawn(self.runner.quit)

    def measure_clock(self) -> ClockOffset | None:
        for _ in range(CLOCK_SAMPLES):
            self._reply.clear()
            self.runner.send_message("slogate_clock", {"sent": wall()})
            self._reply.wait(CLOCK_REPLY_TIMEOUT_S)
            gevent.sleep(CLOCK_GAP_S)
        return best_offset(self._samples) if self._samples else None

    def report_ready(self, got_digest: str | None, error: str | None) -> None:
        self.clock = self.measure_clock()
        ready = {
            "version": tool_version(),
            "digest": got_digest,
            "error": error,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "clock": self.clock.to_dict() if self.clock else None,
        }
        self.runner.send_message("slogate_ready", ready)

    def origin(self, master_origin_s: float) -> float:
        """The master's origin on this worker's clock."""
        return master_origin_s + (self.clock.offset_s if self.clock else 0.0)


def lost_reason(
    lost: list[str],
    accepted: dict[str, WorkerInfo],
    last_s: dict[str, float],
    finished: dict[str, int],
    origin_s: float,
    ended_s: float,
) -> str:
    """Why the run is incomplete: each lost worker, when its last data came,
    and an estimate of what it would have measured from then to ``ended_s``
    (at its own rate so far)."""
    parts = []
    for worker in lost:
        info = accepted.get(worker)
        name = info.describe(worker) if info else f"worker {worker}"
        since = last_s.get(worker, origin_s) - origin_s
        missing_s = max(ended_s - origin_s - since, 0.0)
        done = finished.get(worker, 0)
        requests = round(done / since * missing_s) if since > 0 else 0
        parts.append(
            f"{name} was lost: its last data came {since:.0f} s into the run; about "
            f"{requests} requests and {missing_s:.0f} s of its load are missing"
        )
    return "; ".join(parts)
