"""Probes (``--probes RATE``): what a new user waits while the server is under the load.

After vLLM's benchmark (``--probe-request-rate``): short requests sent beside
the load, outside its concurrency limit, and reported apart. A probe asks the
first scenario's API and model for one output token. They are sent at a
constant RATE per second by the process that judges the run (never by a
worker: the rate is the run's, whatever its processes), each in a greenlet
of its own on a client and connection pool of their own, so neither the
scenario's users nor its pool hold a probe back and no probe takes a place
of theirs. Probes go to their own bucket (``probe``), never into the
scenario's requests, latencies, SLOs, goodput or time series; those that end
during warm-up are left out, as the scenario's own are.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gevent
from gevent.pool import Pool

from slogate.client.streaming import PROTOCOLS, CutOff, StreamClient, chat_messages
from slogate.locustfiles.context import LoadContext
from slogate.scenarios.model import PlannedTurn, Scenario

PROBE_TEXT = "Answer with one word: are you ready?"
MAX_IN_FLIGHT = 256  # probes waiting on a server that answers none: the rest are skipped


class Probes:
    """Sends the probes of one run and records each into the run's recorder."""

    def __init__(self, ctx: LoadContext, scenario: Scenario, rate: float) -> None:
        self.ctx = ctx
        self.scenario = scenario
        self.rate = rate
        self.client = StreamClient(
            ctx.host,
            api=scenario.api,
            model=ctx.model if scenario.model == "auto" else scenario.model,
            options=scenario.request,
            timeouts=scenario.timeouts,
            concurrency=MAX_IN_FLIGHT,
            identity=ctx.identity,
        )
        self.pool = Pool(MAX_IN_FLIGHT)
        self.skipped = 0  # due while MAX_IN_FLIGHT probes were still unanswered

    def turn(self, index: int) -> PlannedTurn:
        return PlannedTurn(
            scenario=self.scenario.name,
            conversation=index,
            turn=0,
            user_text=PROBE_TEXT,
            max_tokens=1,
            intended_input_tokens=0,
            intended_output_tokens=1,
        )

    def run(self, done: Callable[[], bool]) -> None:
        """Send a probe every 1/rate seconds from now until ``done()``; those
        still unanswered then are left to end with the run."""
        start = time.monotonic()
        index = 0
        while not done():
            if self.pool.full():
                self.skipped += 1
            else:
                self.pool.spawn(self.send, index)
            index += 1
            gevent.sleep(max(start + index / self.rate - time.monotonic(), 0.0))

    def send(self, index: int) -> None:
        turn = self.turn(index)
        chat = PROTOCOLS[self.scenario.api].conversational
        try:
            result = self.client.send(turn, chat_messages(turn, []) if chat else None)
        except CutOff:
            return  # the run ended under it: neither ok nor failed
        self.ctx.record_probe(result.record)
