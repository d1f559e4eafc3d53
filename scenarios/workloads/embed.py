"""Embeddings: each request sends a batch of texts to be embedded.

``inputs`` is how many texts one request carries (the batch a retrieval
pipeline sends), ``input_tokens`` the length of each text. Nothing is
generated: the latency of the whole request is what is gated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slogate.scenarios.distributions import Dist
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import nonce
from slogate.scenarios.schema import Reader, choice, required
from slogate.scenarios.workloads.common import TEXT_FIELD, Context, seconds, tokens

FIELDS = {
    "kind": required(choice("embed")),
    "text": TEXT_FIELD,
    "inputs": tokens({"dist": "uniform", "min": 1, "max": 16}),
    "input_tokens": tokens({"dist": "lognormal", "median": 256, "p90": 800, "min": 8, "max": 8192}),
    "think_time_s": seconds(0),
}


@dataclass(frozen=True, slots=True)
class EmbedWorkload:
    inputs: Dist
    input_tokens: Dist
    think_time_s: Dist
    text: str = "prose"
    kind: str = "embed"

    @property
    def corpus(self) -> str:
        return self.text

    def planner(self, ctx: Context) -> EmbedPlanner:
        return EmbedPlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> EmbedWorkload:
    del reader, path  # no checks beyond the field table
    f.pop("kind")
    return EmbedWorkload(**f)


class EmbedPlanner:
    def __init__(self, ctx: Context, spec: EmbedWorkload) -> None:
        self.ctx = ctx
        self.spec = spec

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        """A closed-loop user's next request (one per "conversation")."""
        return (self._request(index, float(self.spec.think_time_s.sample(self.ctx.rng, 1)[0])),)

    def request(self, index: int, event: int) -> PlannedTurn:
        """An open-loop arrival."""
        del event
        return self._request(index, 0.0)

    def _request(self, index: int, think_time_s: float) -> PlannedTurn:
        ctx, spec = self.ctx, self.spec
        count = max(1, ctx.draw(spec.inputs))
        lengths = spec.input_tokens.sample_int(ctx.rng, count)
        texts, total = [], 0
        for length in lengths:
            text, used = ctx.writer.fill(ctx.rng, int(length), f"[{nonce(ctx.rng)}] ")
            texts.append(text)
            total += used
        return ctx.turn(
            index,
            0,
            user_text=texts[0],
            max_tokens=1,
            intended_input_tokens=total,
            intended_output_tokens=0,
            think_time_s=think_time_s,
            inputs=tuple(texts),
        )
