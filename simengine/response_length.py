"""How long a response is: the request's limits plus a simulated EOS.

A real model stops when it samples EOS, so without ``ignore_eos`` outputs vary
in length even for equal ``max_tokens``. The simulator draws the EOS position
from a lognormal distribution whose default median and p90 are the Azure
conversation trace's output lengths (129 and 424 tokens, docs/design.md).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

_Z90 = 1.2815515655446004  # standard normal quantile at 0.9


@dataclass(frozen=True, slots=True)
class OutputPlan:
    """The number of tokens to generate and whether the last one is EOS."""

    tokens: int
    stops_at_eos: bool

    @property
    def finish_reason(self) -> str:
        return "stop" if self.stops_at_eos else "length"


@dataclass(frozen=True, slots=True)
class EosDistribution:
    """Lognormal EOS position, given by its median and 90th percentile."""

    median: float = 129.0
    p90: float = 424.0

    def __post_init__(self) -> None:
        if not 1 <= self.median < self.p90:
            raise ValueError("EOS distribution needs 1 <= median < p90")

    def sample(self, rng: random.Random) -> int:
        sigma = math.log(self.p90 / self.median) / _Z90
        return max(1, round(rng.lognormvariate(math.log(self.median), sigma)))


def plan_output(
    rng: random.Random,
    eos: EosDistribution,
    *,
    limit: int,
    min_tokens: int = 0,
    ignore_eos: bool = False,
) -> OutputPlan:
    """``limit`` is ``max_tokens`` lowered to the room left in ``max_model_len``.

    ``min_tokens`` suppresses EOS for that many tokens (vLLM semantics: EOS can
    be token ``min_tokens + 1`` at the earliest); the EOS token counts as an
    output token, as in vLLM's usage."""
    if ignore_eos:
        return OutputPlan(limit, False)
    at = max(eos.sample(rng), min_tokens + 1)
    if at <= limit:
        return OutputPlan(at, True)
    return OutputPlan(limit, False)
