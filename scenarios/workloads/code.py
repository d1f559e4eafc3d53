"""Code assistance: real standard-library source as context, short answers.

Two styles, mixed by weight: ``completion`` (continue the code; with the
completions API the prompt is the bare source) and ``edit`` (an instruction plus
the code to change). Default lengths resample the Azure 2023 code trace, whose
outputs are short with a long tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slogate.scenarios.distributions import Dist
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import nonce
from slogate.scenarios.schema import (
    Reader,
    choice,
    nested,
    number,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.workloads.common import (
    Context,
    SystemPrompt,
    SystemTexts,
    seconds,
    system,
    tokens,
)

COMPLETE = "Complete the following Python code."
EDITS = (
    "Refactor the following Python code for readability, keeping its behaviour.",
    "Add type hints and docstrings to the following Python code.",
    "Find and fix any bugs in the following Python code.",
    "Rewrite the following Python code to be more efficient.",
)
FENCE_OPEN = "```python\n"
FENCE_CLOSE = "\n```"

STYLE_FIELDS = {
    "completion": optional(number(ge=0), 0.8),
    "edit": optional(number(ge=0), 0.2),
}


def read_styles(reader: Reader, value: Any, path: str) -> tuple[float, float] | None:
    f = reader.section(value, path, STYLE_FIELDS)
    if f is None:
        return None
    if f["completion"] + f["edit"] <= 0:
        reader.problem(path, "expected weights with a sum > 0, got all zero")
        return None
    return f["completion"], f["edit"]


FIELDS = {
    "kind": required(choice("code")),
    "system": system({}),
    "styles": nested(read_styles, section_shape(STYLE_FIELDS), {}),
    "input_tokens": tokens(
        {"dist": "empirical", "file": "azure-code", "column": "ContextTokens", "min": 32}
    ),
    "output_tokens": tokens(
        {"dist": "empirical", "file": "azure-code", "column": "GeneratedTokens"}
    ),
    "think_time_s": seconds(0),
}


@dataclass(frozen=True, slots=True)
class CodeWorkload:
    styles: tuple[float, float]  # weights of (completion, edit)
    input_tokens: Dist
    output_tokens: Dist
    think_time_s: Dist
    system: SystemPrompt
    kind: str = "code"

    @property
    def corpus(self) -> str:
        return "code"

    def planner(self, ctx: Context) -> CodePlanner:
        return CodePlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> CodeWorkload:
    del reader, path  # no checks beyond the field tables
    f.pop("kind")
    return CodeWorkload(**f)


class CodePlanner:
    def __init__(self, ctx: Context, spec: CodeWorkload) -> None:
        import numpy as np

        self.ctx = ctx
        self.spec = spec
        self.systems = SystemTexts(ctx, spec.system)
        weights = np.array(spec.styles)
        self.edit_share = float(weights[1] / weights.sum())

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        return (self.request(index, 0),)

    def request(self, index: int, event: int) -> PlannedTurn:
        del event
        ctx, spec = self.ctx, self.spec
        system, system_tokens, prefix_id = self.systems.next()
        tag = nonce(ctx.rng)
        if ctx.rng.random() < self.edit_share:
            prefix, suffix = f"[{tag}] {ctx.pick(EDITS)}\n{FENCE_OPEN}", FENCE_CLOSE
        elif ctx.scenario.api == "completions":
            prefix, suffix = f"# {tag}\n", ""
        else:
            prefix, suffix = f"[{tag}] {COMPLETE}\n{FENCE_OPEN}", FENCE_CLOSE
        want = ctx.draw(spec.input_tokens) - system_tokens
        text, used = ctx.writer.fill(ctx.rng, want, prefix, suffix)
        output = ctx.draw(spec.output_tokens)
        return ctx.turn(
            index,
            0,
            user_text=text,
            max_tokens=output,
            intended_input_tokens=system_tokens + used,
            intended_output_tokens=output,
            system_text=system,
            think_time_s=float(spec.think_time_s.sample(ctx.rng, 1)[0]),
            prefix_id=prefix_id,
        )
