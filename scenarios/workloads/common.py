"""What every workload kind shares: the planning context, system prompts, and
the field helpers their tables are written with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slogate.scenarios.distributions import Dist, dist_field
from slogate.scenarios.limits import MAX_SECONDS, MAX_TOKENS
from slogate.scenarios.model import PlannedTurn, Scenario
from slogate.scenarios.prompt_text import CORPORA, Writer, nonce
from slogate.scenarios.schema import (
    BOOLEAN,
    Field,
    Reader,
    choice,
    integer,
    nested,
    optional,
    section_shape,
)

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

SHARED_TAG = 1  # planner.py tags stream (0) and arrival (2) randomness
SALT_SYSTEM = 1
SALT_DOCUMENTS = 2
SALT_BLOCKS = 3


def tokens(default: Any) -> Field:
    """A token-length distribution field (values >= 1); ``default`` as a file writes it."""
    return dist_field(1, MAX_TOKENS, default)


def counts(default: Any, most: int) -> Field:
    """A distribution of a count per request or conversation (turns, documents)."""
    return dist_field(1, most, default)


def seconds(default: Any) -> Field:
    """A think-time distribution field in seconds (values >= 0)."""
    return dist_field(0, MAX_SECONDS, default)


TEXT_FIELD = optional(choice(*CORPORA), "prose")


@dataclass(frozen=True, slots=True)
class SystemPrompt:
    """A system prompt of ``tokens`` tokens; ``shared`` gives every conversation
    the same one (a prefix-cache hit by design), else each gets its own."""

    tokens: int = 0
    shared: bool = True


SYSTEM_FIELDS = {
    "tokens": optional(integer(ge=0, le=MAX_TOKENS), 0),
    "shared": optional(BOOLEAN, True),
}


def read_system(reader: Reader, value: Any, path: str) -> SystemPrompt | None:
    f = reader.section(value, path, SYSTEM_FIELDS)
    return None if f is None else SystemPrompt(**f)


def system(default: Any) -> Field:
    """The ``system:`` prompt field of a workload; ``default`` as a file writes it."""
    return nested(read_system, section_shape(SYSTEM_FIELDS), default)


@dataclass(frozen=True, slots=True)
class Context:
    """What a kind's planner works with. ``rng`` is this stream's; ``entropy``
    seeds randomness that must agree across streams and workers (shared prompts,
    RAG documents, trace prefix blocks)."""

    scenario: Scenario
    writer: Writer
    rng: np.random.Generator
    entropy: tuple[int, ...]

    def shared_rng(self, *salt: int) -> np.random.Generator:
        import numpy as np

        return np.random.default_rng([*self.entropy, SHARED_TAG, *salt])

    def turn(self, conversation: int, turn: int, **fields: Any) -> PlannedTurn:
        return PlannedTurn(
            scenario=self.scenario.name, conversation=conversation, turn=turn, **fields
        )

    def pick(self, options: tuple[str, ...]) -> str:
        return options[int(self.rng.integers(0, len(options)))]

    def draw(self, dist: Dist) -> int:
        return int(dist.sample_int(self.rng, 1)[0])


class SystemTexts:
    """Hands out system prompts: one shared text, or a fresh one per call that
    starts with a unique tag so different conversations never share it."""

    def __init__(self, ctx: Context, spec: SystemPrompt) -> None:
        self.ctx = ctx
        self.spec = spec
        self.shared: tuple[str, int] | None = None
        if spec.tokens and spec.shared:
            self.shared = ctx.writer.fill(ctx.shared_rng(SALT_SYSTEM), spec.tokens, suffix="\n")

    def next(self) -> tuple[str | None, int, str | None]:
        """(text, tokens, prefix id) for the next conversation or request."""
        if not self.spec.tokens:
            return None, 0, None
        if self.shared is not None:
            return self.shared[0], self.shared[1], f"system:{self.ctx.scenario.name}"
        prefix = f"Session {nonce(self.ctx.rng)}.\n"
        text, count = self.ctx.writer.fill(self.ctx.rng, self.spec.tokens, prefix, suffix="\n")
        return text, count, None
