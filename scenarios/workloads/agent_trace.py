"""Agent sessions replayed as the KV cache saw them: each recorded session is
a tree of agents (a root and the subagents it started), and each call's prompt
is rebuilt from its KV-block ids to its recorded token count.

Every block id of a session gets one text of ``block_tokens`` tokens, drawn
for that session (another replay of the same tree gets other texts, so
replays never hit each other's cache), and a prompt is its blocks' texts in
order plus a unique tail up to its recorded length: a call that extends the
context of the call before it sends those bytes again, and the engine's
prefix cache serves what production's served. A subagent's first prompt
carries the reply its parent's call before it got from the engine (the task
the parent wrote), in place of the text of the blocks it did not share; those
blocks keep that text for the rest of the session.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slogate.scenarios import traces
from slogate.scenarios.agent_synthesis import FIELDS as GENERATE_FIELDS
from slogate.scenarios.agent_synthesis import generate, read_generate
from slogate.scenarios.datasets import DatasetReport, otel_genai, weka
from slogate.scenarios.datasets.agent_trees import (
    Agent,
    AgentCall,
    AgentTraceSet,
    AgentTree,
    read_trees,
)
from slogate.scenarios.distributions import Dist, Fixed
from slogate.scenarios.limits import MAX_SECONDS, MAX_TOKENS
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import Writer
from slogate.scenarios.schema import (
    TEXT,
    Reader,
    choice,
    integer,
    join,
    nested,
    number,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.workloads.common import Context

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

SALT_SESSION = 6
FORMATS = {"weka": weka.parse, "otel": otel_genai.parse}

WARM_FIELDS = {
    "min": optional(number(ge=0, le=1), 0.0),
    "max": optional(number(ge=0, le=1), 1.0),
}


@dataclass(frozen=True, slots=True)
class WarmStart:
    """Where a user's first session starts, as a share of its root's calls,
    drawn uniformly between ``min`` and ``max``: the call before it is sent
    unmeasured to warm the cache (AgentX's trajectory start t*)."""

    min: float
    max: float


def read_warm_start(reader: Reader, value: Any, path: str) -> WarmStart | None:
    f = reader.section(value, path, WARM_FIELDS)
    if f is None:
        return None
    if f["max"] < f["min"]:
        reader.problem(join(path, "max"), f"expected at least min ({f['min']:g}), got {f['max']:g}")
        return None
    return WarmStart(**f)


FIELDS = {
    "kind": required(choice("agent-trace")),
    "file": optional(TEXT),
    "generate": nested(read_generate, section_shape(GENERATE_FIELDS)),
    "format": optional(choice("auto", *FORMATS), "auto"),
    "block_tokens": optional(integer(ge=2, le=MAX_TOKENS), 64),
    "wait_cap_s": optional(number(ge=0, le=MAX_SECONDS), 10.0),
    "max_output_tokens": optional(integer(ge=1, le=MAX_TOKENS)),
    "text": optional(choice("prose", "code"), "code"),
    "warm_start": nested(read_warm_start, section_shape(WARM_FIELDS)),
}


@dataclass(frozen=True, slots=True)
class AgentTraceWorkload:
    """``wait_cap_s`` caps each replayed wait (tool or think time): a session
    that sat idle for minutes in production would hold its slot for minutes."""

    data: AgentTraceSet
    wait_cap_s: float
    max_output_tokens: int | None
    text: str = "code"
    warm_start: WarmStart | None = None
    kind: str = "agent-trace"

    @property
    def corpus(self) -> str:
        return self.text

    @property
    def report(self) -> DatasetReport:
        return self.data.report

    @property
    def output_tokens(self) -> Dist:
        """The calls' mean output, as the process planner sizes a run by."""
        calls = [c for t in self.data.trees for c in t.root.calls()]
        return Fixed(value=sum(c.output_tokens for c in calls) / len(calls))

    @property
    def think_time_s(self) -> Dist:
        """The calls' mean replayed wait."""
        calls = [c for t in self.data.trees for c in t.root.calls()]
        return Fixed(value=sum(min(c.wait_s, self.wait_cap_s) for c in calls) / len(calls))

    def lengths(self, scenario: str) -> list[PlannedTurn]:
        """Every call of every session as a request without text: its input
        length and max_tokens, for the check against the engine's context."""
        return [
            PlannedTurn(scenario, k, j, "", out, call.input_tokens, out)
            for k, tree in enumerate(self.data.trees)
            for j, call in enumerate(tree.root.calls())
            for out in (self.output_of(call),)
        ]

    def output_of(self, call: AgentCall) -> int:
        """The call's max_tokens: its recorded output, capped, at least 1."""
        out = call.output_tokens
        if self.max_output_tokens is not None:
            out = min(out, self.max_output_tokens)
        return max(out, 1)

    def planner(self, ctx: Context) -> AgentTracePlanner:
        return AgentTracePlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> AgentTraceWorkload | None:
    if (f["file"] is None) == (f["generate"] is None):
        reader.problem(path, "expected one of file: (recorded sessions) or generate: (made ones)")
        return None
    if f["generate"] is not None:
        data = generate(f["generate"])
    else:
        try:
            file = traces.resolve(f["file"], reader.base_dir)
            parse = FORMATS[f["format"]] if f["format"] != "auto" else _detect(file)
            data = read_trees(file, parse, f["block_tokens"])
        except traces.TraceError as exc:
            reader.problem(join(path, exc.key), str(exc))
            return None
    return AgentTraceWorkload(
        data=data,
        wait_cap_s=f["wait_cap_s"],
        max_output_tokens=f["max_output_tokens"],
        text=f["text"],
        warm_start=f["warm_start"],
    )


def _detect(file: Any) -> Any:
    """OTLP JSON names its spans' container; anything else is read as Weka."""
    with open(file, "rb") as handle:
        head = handle.read(4096)
    return otel_genai.parse if b'"resourceSpans"' in head else weka.parse


class AgentTracePlanner:
    """Each closed-loop stream walks the sessions from its own random start;
    each session is a :class:`TreeSession` with texts of its own."""

    def __init__(self, ctx: Context, spec: AgentTraceWorkload) -> None:
        self.ctx = ctx
        self.spec = spec
        self.trees = spec.data.trees
        self.start = int(ctx.rng.integers(0, len(self.trees)))

    def session(self, index: int) -> TreeSession:
        """A stream's first session starts mid-way with ``warm_start``; later
        ones play whole, as a lane recycles."""
        tree = self.trees[(self.start + index) % len(self.trees)]
        warm = self.spec.warm_start
        start = 0
        if warm is not None and index == 0:
            calls = sum(1 for s in tree.root.steps if isinstance(s, AgentCall))
            start = int(self.ctx.rng.uniform(warm.min, warm.max) * calls)
        return TreeSession(self.ctx, self.spec, tree, index, start)

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        """The root agent's calls alone, as one conversation (``scenario sample``)."""
        session = self.session(index)
        root = session.tree.root
        return tuple(
            session.turn(c, k) for k, c in enumerate(root.steps) if isinstance(c, AgentCall)
        )


@dataclass(frozen=True, slots=True)
class Region:
    """Text sent for one or more blocks as a whole: ``ids`` in order."""

    text: str
    tokens: int
    ids: tuple[int, ...]


class TreeSession:
    """The prompts of one replay of a tree, built as the calls come: a block's
    text is fixed the first time a prompt holds it."""

    def __init__(
        self, ctx: Context, spec: AgentTraceWorkload, tree: AgentTree, index: int, start: int = 0
    ) -> None:
        self.ctx = ctx
        self.start = start  # the root's first measured call; the one before it warms
        self.spec = spec
        self.tree = tree
        self.index = index
        self.tag = int(ctx.rng.integers(1, 2**63))
        self.regions: dict[int, Region] = {}  # block id -> the region it is sent in
        self.calls = 0

    @property
    def root(self) -> Agent:
        return self.tree.root

    def turn(self, call: AgentCall, step: int, task: str | None = None) -> PlannedTurn:
        """The request of ``call``; ``task`` (a subagent's first call) is the
        reply its parent got, sent in place of the blocks not sent before."""
        import numpy as np

        writer, ids = self.ctx.writer, call.blocks
        rng = np.random.default_rng([*self.ctx.entropy, SALT_SESSION, self.tag, 1, self.calls])
        self.calls += 1
        texts: list[str] = []
        used = at = 0
        while at < len(ids):
            region = self.regions.get(ids[at])
            if region is not None and ids[at : at + len(region.ids)] != region.ids:
                break  # a region sent whole before, held here in part: the tail takes over
            if region is None and task is not None:
                run = tuple(itertools.takewhile(lambda i: i not in self.regions, ids[at:]))
                region = self._task_region(writer, rng, task, run)
                task = None
            elif region is None:
                region = self._block(ids[at])
            texts.append(region.text)
            used += region.tokens
            at += len(region.ids)
        text = "".join(texts)
        if task is not None or used < call.input_tokens or not texts:
            head = _cut(writer, task.strip() + "\n", call.input_tokens - used - 1) if task else ""
            known = used + writer.count(head)
            text, used = writer.fill(rng, call.input_tokens, text + head, "", known)
        output = self.spec.output_of(call)
        return self.ctx.turn(
            self.index,
            step,
            user_text=text,
            max_tokens=output,
            intended_input_tokens=used,
            intended_output_tokens=output,
            think_time_s=self.wait_s(call),  # slept by the player, shown by scenario sample
        )

    def wait_s(self, call: AgentCall) -> float:
        return min(call.wait_s, self.spec.wait_cap_s)

    def _block(self, block_id: int) -> Region:
        import numpy as np

        tag = 0 if block_id < self.tree.shared_below else self.tag  # shared: every session's
        rng = np.random.default_rng([*self.ctx.entropy, SALT_SESSION, tag, 0, block_id])
        text, tokens = self.ctx.writer.fill(rng, self.tree.block_tokens, suffix="\n")
        region = self.regions[block_id] = Region(text, tokens, (block_id,))
        return region

    def _task_region(
        self, writer: Writer, rng: np.random.Generator, task: str, ids: tuple[int, ...]
    ) -> Region:
        """The parent's reply, then filler, as the text of the blocks ``ids``."""
        tokens = len(ids) * self.tree.block_tokens
        head = _cut(writer, task.strip() + "\n", tokens - 2)
        text, count = writer.fill(rng, tokens, head, "\n", writer.count(head))
        region = Region(text, count, ids)
        for i in ids:
            self.regions[i] = region
        return region


def _cut(writer: Writer, text: str, most: int) -> str:
    """``text`` cut (at a character) to at most ``most`` tokens, ending in a newline."""
    if most <= 0:
        return ""
    if writer.count(text) <= most:
        return text
    low, high = 0, len(text)
    while high - low > 1:
        mid = (low + high) // 2
        if writer.count(text[:mid] + "\n") <= most:
            low = mid
        else:
            high = mid
    return text[:low] + "\n" if low else ""
