"""Multi-turn chat: conversations whose context grows turn by turn.

``input_tokens`` is the whole context a request carries (system prompt, history
and the new message), as in the Azure conversation trace. A conversation draws
one context size per turn and sorts them, so history grows and every turn's
size keeps the declared distribution; the new message is what the history does
not already cover. The load side sends the history with the assistant's actual
replies, so a turn's real context can differ from the plan by the reply lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slogate.scenarios.distributions import Dist
from slogate.scenarios.limits import MAX_TURNS
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import nonce
from slogate.scenarios.schema import Reader, choice, required
from slogate.scenarios.workloads.common import (
    TEXT_FIELD,
    Context,
    SystemPrompt,
    SystemTexts,
    counts,
    seconds,
    system,
    tokens,
)

OPENERS = (
    "Read the following passage and explain what it says.",
    "Summarize this text for a colleague who has not seen it.",
    "What are the key points of the following documentation?",
    "Explain the following text in simpler words.",
)
FOLLOW_UPS = (
    "Here is the next part. How does it relate to what we discussed?",
    "Continue with this section and point out anything surprising.",
    "What does this part add?",
)

FIELDS = {
    "kind": required(choice("chat")),
    "text": TEXT_FIELD,
    "system": system({}),
    "input_tokens": tokens(
        {"dist": "empirical", "file": "azure-conv", "column": "ContextTokens", "min": 32}
    ),
    "output_tokens": tokens(
        {"dist": "empirical", "file": "azure-conv", "column": "GeneratedTokens"}
    ),
    "turns": counts({"dist": "uniform", "min": 1, "max": 4}, MAX_TURNS),
    "think_time_s": seconds({"dist": "exponential", "mean": 3, "max": 30}),
}


@dataclass(frozen=True, slots=True)
class ChatWorkload:
    input_tokens: Dist
    output_tokens: Dist
    turns: Dist
    think_time_s: Dist
    system: SystemPrompt
    text: str = "prose"
    kind: str = "chat"

    @property
    def corpus(self) -> str:
        return self.text

    def planner(self, ctx: Context) -> ChatPlanner:
        return ChatPlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> ChatWorkload:
    del reader, path  # no checks beyond the field table
    f.pop("kind")
    return ChatWorkload(**f)


class ChatPlanner:
    def __init__(self, ctx: Context, spec: ChatWorkload) -> None:
        self.ctx = ctx
        self.spec = spec
        self.systems = SystemTexts(ctx, spec.system)

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        import numpy as np

        ctx, spec = self.ctx, self.spec
        count = ctx.draw(spec.turns)
        contexts = np.sort(spec.input_tokens.sample_int(ctx.rng, count))
        outputs = spec.output_tokens.sample_int(ctx.rng, count)
        thinks = spec.think_time_s.sample(ctx.rng, count)
        system, history, prefix_id = self.systems.next()
        turns = []
        for k in range(count):
            if k == 0:
                header = f"[{nonce(ctx.rng)}] {ctx.pick(OPENERS)}\n"
            else:
                header = ctx.pick(FOLLOW_UPS) + "\n"
            text, used = ctx.writer.fill(ctx.rng, int(contexts[k]) - history, header)
            output = int(outputs[k])
            turns.append(
                ctx.turn(
                    index,
                    k,
                    user_text=text,
                    max_tokens=output,
                    intended_input_tokens=history + used,
                    intended_output_tokens=output,
                    system_text=system,
                    think_time_s=float(thinks[k]),
                    prefix_id=prefix_id,
                )
            )
            history += used + output
        return tuple(turns)

    def request(self, index: int, event: int) -> PlannedTurn:
        """An open-loop arrival: one self-contained turn of the planned context size."""
        del event
        ctx, spec = self.ctx, self.spec
        system, system_tokens, prefix_id = self.systems.next()
        header = f"[{nonce(ctx.rng)}] {ctx.pick(OPENERS)}\n"
        text, used = ctx.writer.fill(ctx.rng, ctx.draw(spec.input_tokens) - system_tokens, header)
        output = ctx.draw(spec.output_tokens)
        return ctx.turn(
            index,
            0,
            user_text=text,
            max_tokens=output,
            intended_input_tokens=system_tokens + used,
            intended_output_tokens=output,
            system_text=system,
            prefix_id=prefix_id,
        )
