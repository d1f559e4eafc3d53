"""Capacity arithmetic: KV-cache plans and cost per million tokens.

Pure functions, no I/O: the command line feeds them numbers (a simulated
engine profile, measured throughputs) and prints or saves what they return.
(The max-load search and the knee are a sweep's: :mod:`slogate.studies.max_load`.)

- **KV plan**: how much of a GPU the weights take, how many bytes one token of
  context costs in the KV cache, how many tokens fit, and so how many sequences
  of a given context length can run at once. Every number comes from the
  profile (``slogate.simengine.profiles.Profile``), which derives them from the model's
  architecture; this module only combines them for one context length.
- **Cost**: GPU price per hour x GPU count over tokens per hour. Each figure
  charges the whole GPU-hour to one kind of token (as published $/Mtok tables
  do), so the input and output figures are alternatives, not parts of a sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slogate.simengine.profiles import Profile

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
    goodput_tokens_per_s: float | None = None,
) -> dict[str, Any]:
    """Cost per million output and input tokens at the given throughput, and per
    million goodput tokens (output tokens of requests within every per-request
    limit: what the deployment sells at its SLO) when measured.

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
        "goodput_tokens_per_s": goodput_tokens_per_s,
        "per_million_goodput_tokens": cost_per_million(goodput_tokens_per_s, pricing),
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
        throughput.get("goodput_tokens_per_s"),
    )
