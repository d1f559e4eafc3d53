"""Locust users: closed-loop sessions and open-loop arrival dispatchers.

Closed loop: a user plays one conversation after another, each turn waiting
for the previous reply and the think time, so load follows the engine's speed.
Open loop: a user is a dispatcher shard that follows the scenario's arrival
process, starting one greenlet per arrival into a bounded pool, so load does
not slow down when the engine does; latency is also measured from each
arrival's scheduled instant (coordinated omission). Each arrival's request is
built ahead of its instant (:mod:`slogate.locustfiles.lookahead`), so the
dispatch itself is only a write.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import gevent
from gevent.pool import Pool
from locust import User, task
from locust.exception import StopUser
from locust.user.task import LOCUST_STATE_STOPPING

from slogate.analysis.measurement.recorder import apart
from slogate.analysis.measurement.records import (
    SESSION,
    SLOT,
    SessionRecord,
    reported_cached,
    sender,
)
from slogate.client.identity import new_trace_id
from slogate.client.protocol import user_message
from slogate.client.streaming import (
    PROTOCOLS,
    CutOff,
    PreparedRequest,
    StreamClient,
    StreamResult,
    chat_messages,
    new_conversation_id,
)
from slogate.locustfiles.agent_sessions import TreePlay
from slogate.locustfiles.backlog import Backlog, HeldTime
from slogate.locustfiles.lookahead import Due, LookAhead
from slogate.locustfiles.state import current_context
from slogate.scenarios import Planner
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.workloads.agent_trace import TreeSession

REQUEST_TYPE = "SSE"
TOOL_RESULT = "The tool ran and found what was asked for; use it in the answer."


class _ConversationCache:
    """A conversation's prompt tokens and those its replies said were cached;
    ``reported`` once a reply said so (a server that never does has no rate);
    ``where``: the endpoint and replica of its last reply (``apart``), whose
    rows its per-conversation numbers go to."""

    __slots__ = ("cached", "prompt", "reported", "where")

    def __init__(self) -> None:
        self.cached = self.prompt = 0
        self.reported = False
        self.where: list[str] = []

    def add(self, result: StreamResult) -> None:
        record = result.record
        self.where = apart(record)
        if record.ok and record.input_tokens:
            self.prompt += record.input_tokens
            cached = reported_cached(record)
            self.cached += cached or 0
            self.reported |= cached is not None


class _ScenarioUser(User):
    abstract = True

    @property
    def draining(self) -> bool:
        """The run has ended and ``--drain`` lets the requests in flight finish:
        Locust stops this user once its task returns, so none may start."""
        return self._state == LOCUST_STATE_STOPPING

    def on_start(self) -> None:
        self.ctx = current_context()
        worker = getattr(self.environment.runner, "worker_index", 0) or 0
        self.scenario, self.stream, self.user = self.ctx.next_user(worker)

    @functools.cached_property
    def planner(self) -> Planner:
        """The user's planner, built in its first task: planning may ask the
        engine's ``/tokenize``, whose failure stops the user quietly there
        (``StopUser``), where in ``on_start`` Locust would print a traceback."""
        return self.ctx.planner(self.scenario, self.stream)

    def send(
        self,
        client: StreamClient,
        prepared: PreparedRequest,
        user: int,
        due: Due | None = None,
        writing: Callable[[], None] | None = None,
        cap_ns: int = 0,
        warm: bool = False,
    ) -> StreamResult:
        """Send one request and record it, in slogate's histograms and in Locust's
        own statistics. A request the end of the run cuts off after it was
        sent is counted as cancelled at the stop, outside latencies and errors,
        and kept in the timelines flagged as cut off (one cut off while it
        waited for a connection or was being written never reached the
        server: it is not counted); one the scenario
        cancels is recorded as such (Locust's statistics leave it out).
        ``user``: who sent it (:func:`~slogate.analysis.measurement.records.sender`); ``due``:
        open loop, its instant, the dispatcher's wait for it and the gate its
        write waits at (it is handed over ahead); ``writing``: as
        :meth:`StreamClient.send_prepared` takes it; ``cap_ns``: open loop, how
        long after its instant the dispatcher waited for a free slot under the
        in-flight cap (:class:`~slogate.locustfiles.backlog.HeldTime`); ``warm``: sent to warm the
        engine's cache, recorded with the warm-up's requests."""
        ctx = self.ctx
        ctx.sending(client, 1)
        try:
            if due is None:
                result = client.send_prepared(prepared, None, writing)
            else:
                result = client.send_prepared(prepared, due.due_ns, writing, due.gate.wait)
        except CutOff as cut:
            if cut.sent:
                ctx.cancelled += 1
                cut.record.user = user
                ctx.record_cut_off(cut.record, warm)
            raise
        finally:
            ctx.sending(client, -1)
        record = result.record
        record.user = user
        if due is not None:
            record.prepare_wait_ns = due.waited_ns
            record.cap_wait_ns = cap_ns
        ended_s = ctx.elapsed_s()
        with ctx.clearance.clear("record"):
            ctx.record(record, warm, ended_s)
            if not record.cancelled:  # neither a success nor a failure for Locust
                self.environment.events.request.fire(
                    request_type=REQUEST_TYPE,
                    name=self.scenario.name,
                    response_time=(record.end_ns - record.start_ns) / 1e6,
                    response_length=record.output_tokens or len(record.chunk_ns),
                    exception=None if record.error is None else RuntimeError(record.error.value),
                    context={},
                )
        return result

    def play_tree(self, client: StreamClient, chat: bool, session: TreeSession, user: int) -> None:
        """One replayed agent session, its subagents included
        (:mod:`slogate.locustfiles.agent_sessions`), sent as ``user``."""
        cache = _ConversationCache()

        def send(client: StreamClient, prepared: PreparedRequest, warm: bool) -> StreamResult:
            return self.send(client, prepared, user, warm=warm)

        play = TreePlay(send, client, session, chat, cache)
        try:
            record = play.play()
            if record is not None:
                self.ctx.record_session(self.scenario.name, record, cache.where)
        finally:
            self.record_cache(cache)

    def record_cache(self, cache: _ConversationCache) -> None:
        """A finished conversation's (or session's) own prefix-cache hit rate."""
        if cache.reported:
            self.ctx.record_conversation_cache(
                self.scenario.name, cache.cached, cache.prompt, cache.where
            )


class SlogateUser(_ScenarioUser):
    """Closed loop: one conversation at a time, think time between turns."""

    @task
    def converse(self) -> None:
        """One conversation, on one endpoint (unless the run's affinity is per
        request), sending back the router's session token when the scenario
        names its header, and the conversation's own id on every turn when it
        names a ``session_id_header``; a replayed agent tree as a whole, on
        one endpoint. A conversation of several requests is a trace of its
        own; a single request is a span of the run's trace."""
        ctx = self.ctx
        users = ctx.timeline.max_users()
        sticky = ctx.pick_endpoint()
        chat = PROTOCOLS[self.scenario.api].conversational
        if self.scenario.workload.kind == "agent-trace":
            client = ctx.client(self.scenario, users, sticky)
            self.play_tree(client, chat, self.planner.session(), self.user)
            return
        conversation = self.planner.conversation()
        history: list[dict] = []
        cache = _ConversationCache()
        session: str | None = None
        own = new_conversation_id() if self.scenario.request.session_id_header else None
        several = len(conversation.turns) > 1 or self.scenario.agent is not None
        trace = new_trace_id() if several else None
        try:
            for turn in conversation.turns:
                if turn.think_time_s > 0:
                    gevent.sleep(turn.think_time_s)
                if self.draining:
                    return
                client = ctx.client(self.scenario, users, ctx.turn_endpoint(sticky))
                if self.scenario.agent is not None:
                    result = self.agent_turn(client, turn, history, cache, session, own, trace)
                else:
                    messages = chat_messages(turn, history) if chat else None
                    result = self.send(
                        client, client.prepare(turn, messages, session, own, trace), self.user
                    )
                    cache.add(result)
                session = result.record.session or session
                if not result.record.ok:
                    return
                if chat:
                    history.append(user_message(turn))
                    history.append({"role": "assistant", "content": result.text})
        finally:
            self.record_cache(cache)

    def agent_turn(
        self,
        client: StreamClient,
        turn: PlannedTurn,
        history: list[dict],
        cache: _ConversationCache,
        session: str | None,
        own: str | None,
        trace: str | None,
    ) -> StreamResult:
        """One user message played as an agent: every reply that calls tools is
        answered after the step's tool latency (the calls of one reply run in
        parallel) and the conversation goes on, until a reply without a tool
        call or the step limit. The session's steps and time to the final
        answer are recorded; the next user message's history keeps only the
        final answer."""
        agent = self.scenario.agent
        assert agent is not None
        messages = chat_messages(turn, history)
        result = self.send(client, client.prepare(turn, messages, session, own, trace), self.user)
        cache.add(result)
        start_ns = result.record.start_ns
        steps = 1
        while True:
            record = result.record
            if not record.ok or not result.tool_calls or steps >= agent.max_steps:
                break
            gevent.sleep(turn.tool_latencies_s[steps - 1])
            if self.draining:
                break
            messages = [
                *messages,
                {
                    "role": "assistant",
                    "content": result.text or None,
                    "tool_calls": result.tool_calls,
                },
                *(
                    {"role": "tool", "tool_call_id": call["id"], "content": TOOL_RESULT}
                    for call in result.tool_calls
                ),
            ]
            session = result.record.session or session
            result = self.send(
                client, client.prepare(turn, messages, session, own, trace), self.user
            )
            cache.add(result)
            steps += 1
        if record.error is not None:
            outcome = "failed"
        elif record.cancelled or result.tool_calls:  # an aborted session is unfinished
            outcome = "unfinished"
        else:
            outcome = "answered"
        self.ctx.record_session(
            self.scenario.name, SessionRecord(steps, start_ns, record.end_ns, outcome), cache.where
        )
        return result


class OpenLoopUser(_ScenarioUser):
    """Open loop: this user dispatches its shard of the scenario's arrivals.

    Every dispatcher of a scenario generates the same global arrival process
    and keeps its own shard of it (``Planner.arrivals``), so the arrivals of
    all processes together are exactly the scenario's, bursts included. The
    shard is the process's worker index: one dispatcher per scenario and
    process. A mix member takes its weight's share of the mix's rate.
    """

    def on_start(self) -> None:
        self.ctx = current_context()
        self.shard = getattr(self.environment.runner, "worker_index", 0) or 0
        claimed = self.ctx.claim_dispatcher()
        if claimed is None:
            raise StopUser()
        self.scenario = claimed
        self.stream = self.shard

    @task
    def dispatch(self) -> None:
        ctx = self.ctx
        limit = max(1, self.scenario.load.max_in_flight // ctx.shards)
        clients = [ctx.client(self.scenario, limit, i) for i in range(max(len(ctx.endpoints), 1))]

        def prepare(turn: PlannedTurn) -> tuple[StreamClient, PreparedRequest]:
            """An arrival's endpoint is chosen as it is built, ahead of its instant."""
            client = clients[ctx.pick_endpoint()]
            return client, client.prepare(turn)

        def ready(wanted: int) -> None:
            for client in clients:
                client.pool.open_ahead(wanted)

        pool = Pool(limit)
        if self.scenario.workload.kind == "agent-trace":
            self.start_trees(pool, clients)
            raise StopUser()
        # The schedule starts when the look-ahead has built its first requests,
        # not at the run's origin: a dispatcher spawned a few hundred
        # milliseconds late would otherwise begin with a burst of overdue
        # arrivals and charge its own start-up to the engine as lag. Each
        # request's send (connect, write, the stream) is a greenlet of its own,
        # so a server slow to read one body delays that request alone.
        share = self.scenario.weight / ctx.shards
        ahead = LookAhead(
            self.planner.arrivals(rate_scale=share),
            offset_ns=lambda turn: int(turn.arrival_s * 1e9),
            prepare=prepare,
            until_ns=time.perf_counter_ns() + int((ctx.timeline.total_s - ctx.elapsed_s()) * 1e9),
            ready=ready,
        )
        # arrivals held back by the cap stay a queue the saturation check sees
        backlog = Backlog(
            self.planner.arrival_offsets(rate_scale=share),
            origin_ns=lambda: ahead.origin_ns,
            dropped=lambda: self.planner.dropped_arrivals,
        )
        held = HeldTime()
        slots = ctx.slots

        def send(
            client: StreamClient, prepared: PreparedRequest, due: Due, slot: int, cap_ns: int
        ) -> None:
            try:
                self.send(
                    client, prepared, sender(SLOT, self.shard, slot), due, ahead.written, cap_ns
                )
            finally:
                slots.give(slot)

        ctx.clearance.watch(ahead)
        ctx.backlogs.append(backlog)
        try:
            for due in ahead:
                if self.draining:
                    break
                if pool.full():
                    waited_ns = time.perf_counter_ns()
                    backlog.waiting = due.due_ns
                    pool.wait_available()
                    backlog.waiting = 0
                    held.add(waited_ns, time.perf_counter_ns())
                held.forget_before(due.due_ns)
                cap_ns = held.within(due.due_ns, time.perf_counter_ns())
                client, prepared = due.item
                pool.spawn(send, client, prepared, due, slots.take(), cap_ns)
                backlog.dispatched += 1
            ahead.close()  # after a drain's break: what waits at a gate is not sent
            pool.join()
        finally:
            ctx.backlogs.remove(backlog)
            ctx.clearance.forget(ahead)
            ahead.close()
            pool.kill()
        raise StopUser()

    def start_trees(self, pool: Pool, clients: list[StreamClient]) -> None:
        """Agent trees started on the arrival schedule, each played whole in a
        greenlet of the pool (``max_in_flight`` sessions at most); the schedule
        counts from this dispatcher's start, as the look-ahead's does."""
        ctx = self.ctx
        chat = PROTOCOLS[self.scenario.api].conversational
        started = time.perf_counter()
        left_s = ctx.timeline.total_s - ctx.elapsed_s()
        arrivals = self.planner.session_arrivals(rate_scale=self.scenario.weight / ctx.shards)
        try:
            for arrival_s, session in arrivals:
                if arrival_s >= left_s:
                    break
                gevent.sleep(max(0.0, started + arrival_s - time.perf_counter()))
                pool.wait_available()
                user = sender(SESSION, self.shard, next(ctx.session_numbers))
                pool.spawn(self.play_tree, clients[ctx.pick_endpoint()], chat, session, user)
            pool.join()
        finally:
            pool.kill()
