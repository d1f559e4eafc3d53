"""A replayed agent session (``kind: agent-trace``), played as its tree: one
closed-loop user holds one tree at a time, whose agents run as the recording
ran them.

An agent sends its calls in order, each after its recorded wait (tool or
think time, capped by the workload); subagents in a row start together, each
in its own greenlet, with the reply of the call before them as their task, and
the agent waits for all of them before its next call. A failed request ends
its agent and the session is ``failed``; the stop of the run kills the
subagents with their parent.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol

import gevent

from slogate.analysis.measurement.records import SessionRecord
from slogate.client.identity import new_trace_id
from slogate.client.protocol import chat_messages
from slogate.client.streaming import PreparedRequest, StreamClient, StreamResult
from slogate.scenarios.datasets.agent_trees import Agent
from slogate.scenarios.workloads.agent_trace import TreeSession


class Adds(Protocol):
    def add(self, result: StreamResult) -> None: ...


Send = Callable[[StreamClient, PreparedRequest, bool], StreamResult]


class TreePlay:
    """One session's tree, played once, as one trace (every agent's requests
    are spans of it); :meth:`play` returns its record."""

    def __init__(
        self, send: Send, client: StreamClient, session: TreeSession, chat: bool, cache: Adds
    ) -> None:
        self.send = send
        self.client = client
        self.session = session
        self.chat = chat
        self.cache = cache
        self.trace_id = new_trace_id()
        self.steps = 0
        self.engine_ns = self.tool_ns = self.tokens = 0
        self.start_ns: int | None = None
        self.end_ns = 0
        self.outcome = "answered"

    def play(self) -> SessionRecord | None:
        """Play the tree; its record, or None when no call was measured. A
        session started mid-way (``warm_start``) is ``unfinished``: its wall
        time is not a whole session's."""
        self._agent(self.session.root, None, self.session.start)
        if self.start_ns is None:
            return None
        outcome = self.outcome
        if outcome == "answered" and self.session.start > 0:
            outcome = "unfinished"
        return SessionRecord(
            steps=self.steps,
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            outcome=outcome,
            engine_ns=self.engine_ns,
            tool_ns=self.tool_ns,
            tokens=self.tokens,
        )

    def _agent(self, agent: Agent, task: str | None, start: int = 0) -> None:
        """Play ``agent``; ``task`` is the parent's reply its first call
        carries. Calls before the ``start``-th are skipped, with their
        subagents, but the one right before it, sent unmeasured (warm)."""
        reply: str | None = None
        children: list[gevent.Greenlet] = []
        calls = itertools.count()
        try:
            for number, step in enumerate(agent.steps):
                if self.outcome != "answered":
                    return
                if isinstance(step, Agent):
                    if number > self._first_kept(agent, start):
                        children.append(gevent.spawn(self._agent, step, reply))
                    continue
                call = next(calls)
                if call < start - 1:
                    continue
                gevent.joinall(children, raise_error=True)
                children = []
                warm = call == start - 1
                wait = 0.0 if warm else self.session.wait_s(step)
                if wait > 0:
                    gevent.sleep(wait)
                    self.tool_ns += int(wait * 1e9)
                turn = self.session.turn(step, number, task)
                task = None
                messages = chat_messages(turn) if self.chat else None
                prepared = self.client.prepare(turn, messages, trace_id=self.trace_id)
                result = self.send(self.client, prepared, warm)
                if not warm:
                    self._note(result)
                reply = result.text
            gevent.joinall(children, raise_error=True)
        finally:
            gevent.killall(children)

    @staticmethod
    def _first_kept(agent: Agent, start: int) -> int:
        """The step index of the warm call (-1 when all is played)."""
        if start <= 0:
            return -1
        calls = [n for n, s in enumerate(agent.steps) if not isinstance(s, Agent)]
        return calls[start - 1]

    def _note(self, result: StreamResult) -> None:
        record = result.record
        self.cache.add(result)
        self.steps += 1
        if self.start_ns is None or record.start_ns < self.start_ns:
            self.start_ns = record.start_ns
        self.end_ns = max(self.end_ns, record.end_ns)
        self.engine_ns += record.end_ns - record.start_ns
        self.tokens += (record.input_tokens or 0) + (record.output_tokens or 0)
        if record.cancelled:
            self.outcome = "unfinished"
        elif not record.ok:
            self.outcome = "failed"
