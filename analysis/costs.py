"""Capacity arithmetic: KV-cache plans, cost per million tokens, the max-load search, knees.

Pure functions and small state machines, no I/O: the command line feeds them
numbers (a simulated engine profile, measured throughputs, trial verdicts) and
prints or saves what they return.

- **KV plan**: how much of a GPU the weights take, how many bytes one token of
  context costs in the KV cache, how many tokens fit, and so how many sequences
  of a given context length can run at once. Every number comes from the
  profile (``slogate.simengine.profiles.Profile``), which derives them from the model's
  architecture; this module only combines them for one context length.
- **Cost**: GPU price per hour x GPU count over tokens per hour. Each figure
  charges the whole GPU-hour to one kind of token (as published $/Mtok tables
  do), so the input and output figures are alternatives, not parts of a sum.
- **Max-load search** (:class:`MaxSearch`): the bookkeeping of MLPerf's server
  scenario: grow the load until an SLO fails, bisect between the last pass and
  the first fail, confirm the result with a final, longer run.
- **Knee**: where a latency-vs-load curve turns from flat to steep (Kneedle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from slogate.analysis.contracts import SloEntry
    from slogate.simengine.profiles import Profile

E = TypeVar("E", bound="SloEntry")

SECONDS_PER_HOUR = 3600.0
MILLION = 1_000_000


# -- KV-cache plan -----------------------------------------------------------------
@dataclass(frozen=True)
class KvPlan:
    """What one deployment holds at one context length. Bytes and tokens are
    totals over all GPUs of the deployment."""

    profile: str
    gpus: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    weight_bytes: int
    runtime_reserve_bytes: int
    kv_budget_bytes: int
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    block_size: int
    context_tokens: int
    max_model_len: int
    blocks_per_sequence: int
    max_sequences_by_kv: int
    max_num_seqs: int
    batch: int | None
    batch_kv_bytes: int | None

    @property
    def max_concurrent_sequences(self) -> int:
        """Sequences of ``context_tokens`` that run at once: the KV cache's limit
        or the scheduler's ``max_num_seqs``, whichever is lower."""
        return min(self.max_sequences_by_kv, self.max_num_seqs)

    @property
    def limited_by(self) -> str:
        return "kv_cache" if self.max_sequences_by_kv <= self.max_num_seqs else "max_num_seqs"

    @property
    def batch_fits(self) -> bool | None:
        if self.batch is None:
            return None
        return self.batch <= self.max_sequences_by_kv and self.context_tokens <= self.max_model_len

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data.update(
            max_concurrent_sequences=self.max_concurrent_sequences,
            limited_by=self.limited_by,
            batch_fits=self.batch_fits,
        )
        return data


def blocks_for(tokens: int, block_size: int) -> int:
    """Paged KV cache: a sequence holds whole blocks, the last one partly filled."""
    return -(-tokens // block_size)


def kv_plan(profile: Profile, context_tokens: int, batch: int | None = None) -> KvPlan:
    """The KV-cache plan of ``profile`` for sequences of ``context_tokens``
    (prompt plus output); ``batch`` also sizes the KV cache of that many such
    sequences (the textbook worked example, ``slogate plan --worked-example``)."""
    if context_tokens < 1:
        raise ValueError(f"context length must be at least 1 token, got {context_tokens}")
    if batch is not None and batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    blocks = blocks_for(context_tokens, profile.block_size)
    return KvPlan(
        profile=profile.name,
        gpus=profile.tp,
        gpu_memory_bytes=profile.gpu.memory_bytes * profile.tp,
        gpu_memory_utilization=profile.gpu_memory_utilization,
        weight_bytes=profile.weight_bytes,
        runtime_reserve_bytes=profile.runtime_reserve_bytes_per_gpu * profile.tp,
        kv_budget_bytes=profile.kv_budget_bytes_per_gpu * profile.tp,
        kv_bytes_per_token=profile.kv_bytes_per_token,
        kv_capacity_tokens=profile.kv_capacity_tokens,
        block_size=profile.block_size,
        context_tokens=context_tokens,
        max_model_len=profile.effective_max_model_len,
        blocks_per_sequence=blocks,
        max_sequences_by_kv=profile.kv_blocks // blocks,
        max_num_seqs=profile.scheduler_max_num_seqs,
        batch=batch,
        batch_kv_bytes=None if batch is None else profile.kv_cache_bytes(batch * context_tokens),
    )


@dataclass(frozen=True)
class KvFormula:
    """The textbook KV-cache formula, term by term:
    2 x batch x layers x width x sequence length x bytes per element, where the
    textbook's "hidden size" is, exactly, the K/V width kv_heads x head_dim (the
    two are equal for models without grouped-query attention, as Llama-2-7B)."""

    batch: int
    layers: int
    width: int
    seq_len: int
    bytes_per_element: int

    @property
    def bytes(self) -> int:
        return 2 * self.batch * self.layers * self.width * self.seq_len * self.bytes_per_element

    @property
    def expression(self) -> str:
        terms = (self.batch, self.layers, self.width, self.seq_len, self.bytes_per_element)
        return "2 x " + " x ".join(str(t) for t in terms) + " bytes"


def kv_formula(profile: Profile, batch: int, seq_len: int) -> KvFormula:
    """The formula's terms for ``profile``; its product equals the profile's own
    accounting, ``profile.kv_cache_bytes(batch * seq_len)``."""
    model = profile.model
    per_element = profile.kv_bytes_per_token // (2 * model.layers * model.kv_heads * model.head_dim)
    return KvFormula(batch, model.layers, model.kv_heads * model.head_dim, seq_len, per_element)


# -- cost ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Pricing:
    """What the deployment costs: a price per GPU-hour (any currency) x GPUs."""

    gpu_price_per_hour: float
    gpus: int = 1

    def __post_init__(self) -> None:
        if not self.gpu_price_per_hour > 0:
            raise ValueError(f"GPU price per hour must be > 0, got {self.gpu_price_per_hour}")
        if self.gpus < 1:
            raise ValueError(f"GPU count must be at least 1, got {self.gpus}")

    @property
    def per_hour(self) -> float:
        return self.gpu_price_per_hour * self.gpus

    @classmethod
    def from_options(cls, price: float | None, gpus: int | None) -> Pricing | None:
        """Pricing from command-line values; None when no price was given."""
        if price is None:
            if gpus is not None:
                raise ValueError("--gpus needs --gpu-price-per-hour to compute a cost")
            return None
        return cls(price, 1 if gpus is None else gpus)


def cost_per_million(tokens_per_s: float | None, pricing: Pricing) -> float | None:
    """Cost of a million tokens at ``tokens_per_s``: None when nothing flowed."""
    if tokens_per_s is None or tokens_per_s <= 0:
        return None
    return pricing.per_hour / (tokens_per_s * SECONDS_PER_HOUR) * MILLION


def cost_block(
    pricing: Pricing,
    output_tokens_per_s: float | None,
    input_tokens_per_s: float | None,
    basis: str,
) -> dict[str, Any]:
    """Cost per million output and input tokens at the given throughput.

    ``basis`` says which throughput it is ("measured", "max rate under SLO",
    "roofline estimate"), so a reader never mistakes one for another."""
    return {
        "basis": basis,
        "gpu_price_per_hour": pricing.gpu_price_per_hour,
        "gpus": pricing.gpus,
        "price_per_hour": pricing.per_hour,
        "output_tokens_per_s": output_tokens_per_s,
        "input_tokens_per_s": input_tokens_per_s,
        "per_million_output_tokens": cost_per_million(output_tokens_per_s, pricing),
        "per_million_input_tokens": cost_per_million(input_tokens_per_s, pricing),
    }


def throughput_cost(
    pricing: Pricing | None, throughput: Mapping[str, Any], basis: str = "measured"
) -> dict[str, Any] | None:
    """:func:`cost_block` from a summary's ``throughput`` block (None without a price)."""
    if pricing is None:
        return None
    return cost_block(
        pricing,
        throughput.get("output_tokens_per_s"),
        throughput.get("input_tokens_per_s"),
        basis,
    )


# -- the max-load search ------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    """One run of the search: the load it offered and whether every SLO passed."""

    value: float
    passed: bool
    confirmation: bool = False


@dataclass(frozen=True)
class NextTrial:
    value: float
    confirmation: bool


@dataclass
class MaxSearch:
    """Highest load at which every SLO passes, as MLPerf's server scenario finds it.

    From ``start`` the load doubles (``growth``) until a trial fails, or halves
    until one passes; then the interval between the highest pass and the lowest
    fail above it is bisected until it is narrower than ``tolerance`` x the pass
    (or, for integer loads such as users, adjacent). The highest pass is then
    run again as a confirmation; if that fails it counts as a fail and the search
    goes on below it. ``floor`` and ``ceiling`` bound the search: no pass at the
    floor means there is no max, a pass at the ceiling is reported as the max.
    """

    start: float
    integer: bool = False
    tolerance: float = 0.1
    growth: float = 2.0
    floor: float | None = None
    ceiling: float | None = None
    trials: list[Trial] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.start > 0:
            raise ValueError(f"the search must start above 0, got {self.start}")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must lie in (0, 1), got {self.tolerance}")
        if not self.growth > 1:
            raise ValueError(f"growth must be above 1, got {self.growth}")
        if self.floor is None:
            self.floor = 1.0 if self.integer else self.start / 64
        if self.ceiling is not None and self.ceiling < self.floor:
            raise ValueError(f"ceiling {self.ceiling} lies below floor {self.floor}")
        self.start = self._clamp(self.start)

    def record(self, value: float, passed: bool, confirmation: bool = False) -> None:
        self.trials.append(Trial(value, passed, confirmation))

    @property
    def highest_pass(self) -> float | None:
        """The highest load that passed and is below every failure."""
        lowest_fail = self.lowest_fail
        passes = [
            t.value
            for t in self.trials
            if self._passed(t.value) and (lowest_fail is None or t.value < lowest_fail)
        ]
        return max(passes, default=None)

    @property
    def lowest_fail(self) -> float | None:
        return min((t.value for t in self.trials if not self._passed(t.value)), default=None)

    @property
    def confirmed(self) -> bool:
        best = self.highest_pass
        return best is not None and any(
            t.confirmation and t.passed and t.value == best for t in self.trials
        )

    @property
    def result(self) -> float | None:
        """The max load once confirmed; None while searching or when none passes."""
        return self.highest_pass if self.confirmed else None

    def next(self) -> NextTrial | None:
        """The next trial to run, or None when the search is over."""
        if not self.trials:
            return NextTrial(self.start, False)
        lo, hi = self.highest_pass, self.lowest_fail
        if lo is None:
            assert hi is not None
            if hi <= self.floor:
                return None
            return NextTrial(self._clamp(hi / self.growth), False)
        if hi is None:
            if self.ceiling is not None and lo >= self.ceiling:
                return self._confirm_or_stop(lo)
            return NextTrial(self._clamp(lo * self.growth), False)
        if self._narrow(lo, hi):
            return self._confirm_or_stop(lo)
        return NextTrial(self._midpoint(lo, hi), False)

    def _confirm_or_stop(self, value: float) -> NextTrial | None:
        return None if self.confirmed else NextTrial(value, True)

    def _passed(self, value: float) -> bool:
        """A load passes when every trial at it passed (a failed confirmation
        overrides the earlier pass)."""
        return all(t.passed for t in self.trials if t.value == value)

    def _narrow(self, lo: float, hi: float) -> bool:
        if self.integer:
            return hi - lo <= max(1.0, math.floor(self.tolerance * lo))
        return hi - lo <= self.tolerance * lo

    def _midpoint(self, lo: float, hi: float) -> float:
        mid = (lo + hi) / 2
        if self.integer:
            return float(math.floor(mid))
        return round(mid, 6)

    def _clamp(self, value: float) -> float:
        if self.integer:
            value = float(round(value))
        value = max(value, self.floor)
        if self.ceiling is not None:
            value = min(value, self.ceiling)
        return value


# -- knee ------------------------------------------------------------------------------
KNEE_MIN_POINTS = 3
KNEE_MIN_DISTANCE = 0.1


def knee_index(xs: Sequence[float], ys: Sequence[float]) -> int | None:
    """Index of the knee of a convex, rising curve (latency vs load), by Kneedle.

    Both axes are scaled to 0..1; the knee is the point farthest below the
    diagonal (largest x - y): the last load before latency turns steep. A curve
    that stays near its diagonal (latency growing in proportion) or has fewer
    than three points has no knee: None.
    """
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    if len(xs) < KNEE_MIN_POINTS:
        return None
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    x_lo, x_hi = xs[order[0]], xs[order[-1]]
    y_lo, y_hi = min(ys), max(ys)
    if x_hi == x_lo or y_hi == y_lo:
        return None
    distance = {i: (xs[i] - x_lo) / (x_hi - x_lo) - (ys[i] - y_lo) / (y_hi - y_lo) for i in order}
    best = max(order, key=lambda i: distance[i])
    return best if distance[best] >= KNEE_MIN_DISTANCE else None


def limiting_slo(slo: Sequence[E]) -> E | None:
    """The SLO that limits a load: the deepest failure (lowest ``margin_pct``)
    among the failed ones, else the inconclusive one, else None."""
    for verdict in ("fail", "inconclusive"):
        hits = [s for s in slo if s.verdict == verdict]
        if hits:
            return min(hits, key=lambda s: s.margin_pct if s.margin_pct is not None else 0.0)
    return None
