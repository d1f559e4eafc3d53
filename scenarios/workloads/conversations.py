"""Recorded conversations replayed as sessions: ShareGPT dumps and OpenAI
messages logs, each conversation one session of its user turns in order.

``history: recorded`` sends each turn with the recorded earlier messages, so
every request is the one the recording implies, whatever the engine answers;
``history: live`` sends the engine's own replies instead, as a real user
would see them (closed loop only: an open-loop arrival is one request and
cannot wait for an earlier reply). Output lengths are the recorded replies'
token counts (capped by ``max_output_tokens``) or a distribution. The text
is sent as recorded; only a unique tag before the first user message
(``unique_start``) keeps repeated replays from hitting the prefix cache.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from slogate.scenarios import traces
from slogate.scenarios.datasets import DatasetReport
from slogate.scenarios.datasets.conversations import (
    FORMATS,
    ConversationSet,
    Filters,
    Recorded,
    load_conversations,
)
from slogate.scenarios.datasets.counts import token_counts
from slogate.scenarios.distributions import Dist, dist_shape, read_dist
from slogate.scenarios.limits import MAX_TOKENS, MAX_TURNS
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, nonce, tokenizer_file
from slogate.scenarios.schema import (
    BOOLEAN,
    TEXT,
    Reader,
    choice,
    integer,
    join,
    nested,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.workloads.common import Context, seconds

SALT_ORDER = 4
SALT_VISIT = 5
RECORDED = "recorded"
FILTER_FIELDS = {
    "min_turns": optional(integer(ge=1, le=MAX_TURNS), 1),
    "max_turns": optional(integer(ge=1, le=MAX_TURNS)),
    "min_tokens": optional(integer(ge=1, le=MAX_TOKENS)),
    "max_tokens": optional(integer(ge=1, le=MAX_TOKENS)),
}


def read_filters(reader: Reader, value: Any, path: str) -> Filters | None:
    f = reader.section(value, path, FILTER_FIELDS)
    return None if f is None else Filters(**f)


def read_output(reader: Reader, value: Any, path: str) -> Dist | str | None:
    """``recorded`` (the replies' own lengths) or a token-length distribution."""
    if value == RECORDED:
        return RECORDED
    return read_dist(reader, value, path, least=1, most=MAX_TOKENS)


OUTPUT_SHAPE = {"anyOf": [{"const": RECORDED}, dist_shape(1, MAX_TOKENS)]}


FIELDS = {
    "kind": required(choice("conversations")),
    "file": required(TEXT),
    "format": optional(choice(*FORMATS), "auto"),
    "history": optional(choice(RECORDED, "live"), RECORDED),
    "output_tokens": nested(read_output, OUTPUT_SHAPE, RECORDED),
    "max_output_tokens": optional(integer(ge=1, le=MAX_TOKENS)),
    "filter": nested(read_filters, section_shape(FILTER_FIELDS), {}),
    "sample": optional(integer(ge=1)),
    "unique_start": optional(BOOLEAN, True),
    "think_time_s": seconds(0),
}


@dataclass(frozen=True, slots=True)
class ConversationsWorkload:
    data: ConversationSet
    history: str
    output_tokens: Dist | str
    max_output_tokens: int | None
    sample: int | None
    unique_start: bool
    think_time_s: Dist
    kind: str = "conversations"

    @property
    def corpus(self) -> str:
        return "prose"  # recorded text is sent as is; the writer only counts tokens

    @property
    def report(self) -> DatasetReport:
        return self.data.report

    def planner(self, ctx: Context) -> ConversationsPlanner:
        return ConversationsPlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> ConversationsWorkload | None:
    filters = f["filter"]
    if filters.max_turns is not None and filters.max_turns < filters.min_turns:
        reader.problem(
            join(path, "filter.max_turns"), f"expected at least min_turns ({filters.min_turns})"
        )
        return None
    try:
        file = traces.resolve(f["file"], reader.base_dir)
        data = load_conversations(
            file, f["format"], filters, functools.partial(token_counts, str(LOCAL_TOKENIZER))
        )
    except traces.TraceError as exc:
        reader.problem(join(path, exc.key), str(exc))
        return None
    if f["sample"] is not None and f["sample"] > len(data.conversations):
        reader.problem(
            join(path, "sample"),
            f"expected at most the {len(data.conversations)} conversations left after the "
            f"filters, got {f['sample']}",
        )
        return None
    return ConversationsWorkload(
        data=data,
        history=f["history"],
        output_tokens=f["output_tokens"],
        max_output_tokens=f["max_output_tokens"],
        sample=f["sample"],
        unique_start=f["unique_start"],
        think_time_s=f["think_time_s"],
    )


@dataclass(frozen=True, slots=True)
class Counted:
    """A conversation's token counts under the scenario's tokenizer."""

    system: int
    users: tuple[int, ...]
    replies: tuple[int, ...]


class ConversationsPlanner:
    """Closed loop: each stream walks the (sampled) conversations from its own
    random start, one session each. Open loop: the arrivals walk every turn
    of every conversation in order, each turn a request of its own."""

    def __init__(self, ctx: Context, spec: ConversationsWorkload) -> None:
        import numpy as np

        self.ctx = ctx
        self.spec = spec
        self.items = spec.data.conversations
        n = len(self.items)
        order = ctx.shared_rng(SALT_ORDER).permutation(n)[: spec.sample] if spec.sample else None
        self.order = np.arange(n) if order is None else order
        self.start = int(ctx.rng.integers(0, len(self.order)))
        turns = [len(self.items[i].turns) for i in self.order]
        self.first_turn = np.concatenate(([0], np.cumsum(turns)))
        self.counted = functools.lru_cache(maxsize=1024)(self._counted)

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        position = int(self.order[(self.start + index) % len(self.order)])
        tag = nonce(self.ctx.rng) if self.spec.unique_start else None
        conversation = self.items[position]
        outputs: list[int] = []
        return tuple(
            self._turn(index, position, k, tag, outputs) for k in range(len(conversation.turns))
        )

    def request(self, index: int, event: int) -> PlannedTurn:
        """The arrival's turn, with the recorded history before it. Turns of one
        pass over a conversation share its tag, so they share a prefix."""
        import numpy as np

        total = int(self.first_turn[-1])
        slot = int(np.searchsorted(self.first_turn, event % total, side="right")) - 1
        position = int(self.order[slot])
        tag = None
        if self.spec.unique_start:
            tag = nonce(self.ctx.shared_rng(SALT_VISIT, event // total, slot))
        return self._turn(index, position, event % total - int(self.first_turn[slot]), tag, [])

    def _counted(self, position: int) -> Counted:
        """Counts from loading (the bundled tokenizer's) when the scenario counts
        with that tokenizer, else counted again with the scenario's own."""
        conversation, count = self.items[position], self.ctx.writer.local
        if tokenizer_file(self.ctx.scenario.request.tokenizer) == str(LOCAL_TOKENIZER):
            return Counted(
                system=conversation.system_tokens,
                users=tuple(t.user_tokens for t in conversation.turns),
                replies=tuple(t.reply_tokens for t in conversation.turns),
            )
        return Counted(
            system=count(conversation.system) if conversation.system else 0,
            users=tuple(count(t.user) for t in conversation.turns),
            replies=tuple(count(t.reply) for t in conversation.turns),
        )

    def _turn(
        self, index: int, position: int, k: int, tag: str | None, outputs: list[int]
    ) -> PlannedTurn:
        """Turn ``k``; ``outputs`` holds the planned output of the turns before
        it in this session (live history counts them as the replies' size)."""
        ctx, spec = self.ctx, self.spec
        conversation, counted = self.items[position], self.counted(position)
        users = [t.user for t in conversation.turns]
        user_tokens = list(counted.users)
        if tag is not None:
            # a line of its own: its tokens add to the message's (as the writer's parts do)
            users[0] = f"[{tag}]\n{users[0]}"
            user_tokens[0] += ctx.writer.local(f"[{tag}]\n")
        output = self._output(counted.replies[k])
        outputs.append(output)
        replies = outputs[:k] if spec.history == "live" else counted.replies[:k]
        history = None
        if spec.history == RECORDED:
            history = tuple(_recorded(conversation, users, k))
        return ctx.turn(
            index,
            k,
            user_text=users[k],
            max_tokens=output,
            intended_input_tokens=counted.system + sum(user_tokens[: k + 1]) + sum(replies),
            intended_output_tokens=output,
            system_text=conversation.system,
            think_time_s=float(spec.think_time_s.sample(ctx.rng, 1)[0]),
            history=history,
        )

    def _output(self, recorded: int) -> int:
        spec = self.spec
        output = (
            self.ctx.draw(spec.output_tokens) if isinstance(spec.output_tokens, Dist) else recorded
        )
        if spec.max_output_tokens is not None:
            output = min(output, spec.max_output_tokens)
        return max(1, output)


def _recorded(conversation: Recorded, users: list[str], k: int) -> list[tuple[str, str]]:
    """The recorded messages before turn ``k``."""
    out = []
    for j in range(k):
        out += [("user", users[j]), ("assistant", conversation.turns[j].reply)]
    return out
