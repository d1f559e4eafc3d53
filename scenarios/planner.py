"""The planner: turns a validated scenario into the requests one user or one
worker sends, deterministically for ``(seed, stream)``.

The load side makes one planner per closed-loop user (``stream`` = the user's
number) or per open-loop worker (``stream`` = the worker's number, with
``rate_scale = 1/N`` so that N workers split one arrival process exactly).
Planning never does I/O; ``count_tokens`` lets the load side measure prompts
with the engine's own tokenizer instead of the local one.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Iterator

from slogate.scenarios.arrivals import arrival_events, has_arrivals
from slogate.scenarios.context_fit import ContextFit, fitted, fitted_conversation, measured
from slogate.scenarios.images import image_pool
from slogate.scenarios.model import Conversation, PlannedTurn, Scenario
from slogate.scenarios.prompt_text import TokenCounter, Writer, make_writer
from slogate.scenarios.structured import constraint, schema_pool
from slogate.scenarios.workloads import Context, TraceWorkload
from slogate.scenarios.workloads.agent_trace import TreeSession

STREAM_TAG = 0
ARRIVALS_TAG = 2  # Context.shared_rng uses 1
EXTRAS_TAG = 3  # agent tool latencies and image picks
CANCEL_TAG = 4  # which requests are cancelled, and when
STRUCTURED_TAG = 5  # which requests are constrained, and by which schema


def prepare_text(scenario: Scenario) -> None:
    """Read and tokenize the text ``scenario``'s prompts are cut from, once per
    process (about a second): planners made afterwards start at once."""
    make_writer(scenario.workload.corpus, scenario.request.tokenizer, None)


class Planner:
    """Plans ``scenario``'s requests for one stream.

    ``conversation()`` gives the next session of a closed-loop user;
    ``arrivals()`` the open-loop requests of this stream with ``arrival_s`` set.
    Text that must agree across streams (shared system prompts, RAG documents,
    trace prefix blocks, arrival times) depends on ``seed`` alone.
    """

    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        stream: int = 0,
        count_tokens: TokenCounter | None = None,
        fit: ContextFit | None = None,
        fitting: bool = True,
    ) -> None:
        """``fit``: the engine's context and how prompts are counted against it;
        ``fitting`` False plans with its counting but leaves the requests past
        it as they are (the pre-flight counts them)."""
        import numpy as np

        self.scenario = scenario
        self.fit = fit if fitting else None
        self.seed = seed
        self.stream = stream
        self._entropy = (seed, zlib.crc32(scenario.name.encode()))
        writer = make_writer(scenario.workload.corpus, scenario.request.tokenizer, count_tokens)
        self._measuring = None if writer.measured else fit  # already in the engine's count
        self._local = writer.count
        trimmer = writer
        if self._measuring is not None and self._measuring.measure is not None:
            trimmer = Writer(writer.corpus, writer.local, self._measuring.measure)
        # what a clamped prompt is counted and cut with: as the fit counts (context_fit)
        self.fit_count, self.trim = trimmer.count, trimmer.trim
        rng = np.random.default_rng([*self._entropy, STREAM_TAG, stream])
        self._kind = scenario.workload.planner(Context(scenario, writer, rng, self._entropy))
        self._extras_rng = np.random.default_rng([*self._entropy, EXTRAS_TAG, stream])
        self._cancel_rng = np.random.default_rng([*self._entropy, CANCEL_TAG, stream])
        self._structured_rng = np.random.default_rng([*self._entropy, STRUCTURED_TAG, stream])
        structured = scenario.structured
        shared = np.random.default_rng([*self._entropy, STRUCTURED_TAG])  # one pool for all
        self._schemas = () if structured is None else schema_pool(structured, shared)
        self._constrained = 0  # requests planned so far: a unique schema's number
        self._next = 0
        self.dropped_arrivals = 0  # open loop: arrivals left out by --fit-context drop

    def conversation(self) -> Conversation:
        """The next conversation (chat: several turns; other kinds: one)."""
        index = self._take_index()
        turns = self._measured(self._kind.conversation(index))
        if self.fit is not None:
            turns = fitted_conversation(turns, self.fit, self.trim)
        if self.scenario.images is not None and turns:
            turns = (self._with_images(turns[0]), *turns[1:])
        agent = self.scenario.agent
        if agent is not None:  # each turn's tool latencies, drawn up front (seeded)
            turns = tuple(
                dataclasses.replace(
                    turn,
                    tool_latencies_s=tuple(
                        float(s)
                        for s in agent.tool_latency_s.sample(self._extras_rng, agent.max_steps)
                    ),
                )
                for turn in turns
            )
        if self.scenario.cancel is not None:
            turns = tuple(self._with_cancel(turn) for turn in turns)
        if self.scenario.structured is not None:
            turns = tuple(self._with_constraint(turn) for turn in turns)
        return Conversation(self.scenario.name, index, turns)

    def session(self) -> TreeSession:
        """The next agent session of a closed-loop user (``kind: agent-trace``):
        the tree to play and the prompts of its calls."""
        return self._kind.session(self._take_index())

    def session_arrivals(self, rate_scale: float = 1.0) -> Iterator[tuple[float, TreeSession]]:
        """Open loop, ``kind: agent-trace``: this stream's share of the tree
        starts, each ``(arrival_s, session)``; the arrival process is the one
        :meth:`arrivals` follows (Poisson, gamma or constant)."""
        import numpy as np

        rng = np.random.default_rng([*self._entropy, ARRIVALS_TAG])
        for arrival_s, _ in arrival_events(self.scenario.load, None, rng, self.stream, rate_scale):
            yield arrival_s, self._kind.session(self._take_index())

    def arrivals(self, rate_scale: float = 1.0) -> Iterator[PlannedTurn]:
        """This stream's open-loop requests, ``arrival_s`` increasing from the run's
        start; ``rate_scale`` (0, 1] is its share of the scenario's arrivals."""
        import numpy as np

        load = self.scenario.load
        if not has_arrivals(load):
            raise ValueError(f"scenario {self.scenario.name!r} has no open-loop rate (load.rate)")
        workload = self.scenario.workload
        trace = workload.trace if isinstance(workload, TraceWorkload) else None
        rng = np.random.default_rng([*self._entropy, ARRIVALS_TAG])
        for arrival_s, event in arrival_events(load, trace, rng, self.stream, rate_scale):
            (planned,) = self._measured((self._kind.request(self._take_index(), event),))
            turn = planned if self.fit is None else fitted(planned, self.fit, self.trim)
            if turn is None:
                self.dropped_arrivals += 1
                continue
            if self.scenario.images is not None:
                turn = self._with_images(turn)
            if self.scenario.cancel is not None:
                turn = self._with_cancel(turn)
            if self.scenario.structured is not None:
                turn = self._with_constraint(turn)
            yield dataclasses.replace(turn, arrival_s=arrival_s)

    def arrival_offsets(self, rate_scale: float = 1.0) -> Iterator[float]:
        """The instants of :meth:`arrivals` (dropped ones included: see
        ``dropped_arrivals``) without their requests: the same seeded draw,
        so the open-loop dispatcher can count the arrivals due ahead of the
        requests it has built (``slogate.locustfiles.backlog``)."""
        import numpy as np

        workload = self.scenario.workload
        trace = workload.trace if isinstance(workload, TraceWorkload) else None
        rng = np.random.default_rng([*self._entropy, ARRIVALS_TAG])
        for arrival_s, _ in arrival_events(self.scenario.load, trace, rng, self.stream, rate_scale):
            yield arrival_s

    def _measured(self, turns: tuple[PlannedTurn, ...]) -> tuple[PlannedTurn, ...]:
        """The turns counted as the fit counts them (context_fit.measured)."""
        if self._measuring is None:
            return turns
        return measured(turns, self._measuring, self._local)

    def _with_cancel(self, turn: PlannedTurn) -> PlannedTurn:
        """The turn, cancelled with the scenario's share, after a drawn delay or
        number of output tokens (its own seeded stream: the requests stay the same)."""
        spec = self.scenario.cancel
        assert spec is not None
        rng = self._cancel_rng
        if rng.random() >= spec.share:
            return turn
        if spec.after_s is not None:
            return dataclasses.replace(turn, cancel_after_s=float(spec.after_s.sample(rng, 1)[0]))
        tokens = max(1, round(float(spec.after_tokens.sample(rng, 1)[0])))
        return dataclasses.replace(turn, cancel_after_tokens=tokens)

    def _with_constraint(self, turn: PlannedTurn) -> PlannedTurn:
        """The turn, constrained with the scenario's share (its own seeded
        stream: the requests stay the same with or without it)."""
        spec = self.scenario.structured
        assert spec is not None
        self._constrained += 1
        unique_id = f"{self.stream}-{self._constrained}"
        picked = constraint(spec, self._schemas, self._structured_rng, unique_id)
        return dataclasses.replace(turn, constraint=picked)

    def _with_images(self, turn: PlannedTurn) -> PlannedTurn:
        """The turn with the scenario's images, picked from the shared pool."""
        spec = self.scenario.images
        assert spec is not None
        pool = image_pool(spec.width, spec.height, spec.format, self.seed)
        picks = self._extras_rng.integers(0, len(pool), spec.count)
        return dataclasses.replace(turn, images=tuple(pool[int(i)] for i in picks))

    def _take_index(self) -> int:
        index = self._next
        self._next += 1
        return index
