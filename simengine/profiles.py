"""Model, GPU and engine profiles: the numbers the simulated engine runs on.

A :class:`Profile` is one deployment: a model architecture on a number of GPUs
(tensor parallelism), with weight and KV-cache data types and vLLM's scheduler
settings. Everything that capacity planning needs (weight bytes, KV bytes per
token, KV capacity) is a property here, derived from the architecture instead
of being typed in, so a new model needs only its ``config.json`` numbers.

Profile names (``docs/simengine.md`` has the full grammar)::

    MODEL@[TPx]GPU[:OPTION]...

    llama-3.1-8b@h100                      one H100, bf16 weights and KV cache
    llama-3.1-8b@h100:fp8:kv=fp8           fp8 weights, fp8 KV cache
    llama-3.1-70b@2xh100:fp8               tensor parallel over two H100s
    qwen2.5-7b@l4:int4:max_num_seqs=64     int4 weights, a scheduler setting

An OPTION is a weight data type (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``)
or ``KEY=VALUE`` for ``kv`` (KV-cache data type) and any field of
:data:`ENGINE_SETTINGS`. A path ending in ``.yaml``/``.yml`` names a custom
profile file instead (see :func:`load_profile`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PROFILE = "llama-3.1-8b@h100"

MIB = 1024**2
GIB = 1024**3

# Bytes per weight. int4 is group-quantized (AWQ/GPTQ, group 128) and carries a
# 16-bit scale per group; fp8/int8 scales are per channel and negligible.
WEIGHT_BYTES: Mapping[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 2.0 / 128,
}
KV_BYTES: Mapping[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1}
ADAPTER_FIXED_LOAD_S = 0.05
# Speculative decoding: the drafting batch at which acceptance falls to half
# (simengine/scheduler.py, docs/simengine.md "Speculative decoding").
ACCEPTANCE_HALF_BATCH = 32.0
HOST_LINK_BYTES_PER_S = 25e9

# Fields a profile name or file may set besides model, GPU, dtypes and tp.
ENGINE_SETTINGS = (
    "engine",
    "gpu_memory_utilization",
    "kv_cache_free_gpu_mem_fraction",
    "block_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "enable_prefix_caching",
    "num_gpu_blocks",
    "lora_adapters",
    "lora_rank",
    "speculative_tokens",
    "acceptance_rate",
    "acceptance_half_batch",
    "disaggregated",
    "kv_transfer_gbps",
    "scheduling_policy",
)
# vLLM's --scheduling-policy: the waiting queue by arrival, or by the
# request's ``priority`` field (lower first)
SCHEDULING_POLICIES = ("fcfs", "priority")


class ProfileError(ValueError):
    """A profile name, file or setting that cannot describe a deployment."""


@dataclass(frozen=True)
class EngineFamily:
    """How one serving engine schedules and sizes its KV cache by default.

    ``reserve_full_sequence`` is TensorRT-LLM's ``GUARANTEED_NO_EVICT``
    capacity scheduler: a request is admitted only when the KV blocks for its
    whole prompt and ``max_tokens`` output are free, and they stay reserved, so
    nothing is ever preempted; vLLM admits on the first chunk's blocks and
    preempts (recompute) when a running sequence needs a block that is not
    there. Without ``chunked_prefill`` (TensorRT-LLM's default) a prompt is
    computed in one step: it joins a step only if all of it fits in the step's
    remaining token budget (a prompt longer than the budget runs in a step of
    its own). ``kv_from_free_memory`` is TensorRT-LLM's sizing: the KV cache takes
    ``kv_cache_free_gpu_mem_fraction`` of the memory left after weights and
    activations; otherwise vLLM's rule (``gpu_memory_utilization`` x memory -
    weights - activations). ``overlap_schedule`` is SGLang's overlap scheduler:
    the CPU prepares the next batch while the GPU runs the current one, so the
    per-step CPU cost is off the critical path."""

    key: str
    reserve_full_sequence: bool
    chunked_prefill: bool
    kv_from_free_memory: bool
    max_num_seqs: tuple[int, int]  # (GPUs of large_gpu_gib or more, smaller GPUs)
    max_num_batched_tokens: tuple[int, int]
    overlap_schedule: bool = False
    large_gpu_gib: int = 70


# vLLM: vllm/engine/arg_utils.py (1024/8192 on large GPUs, 256/2048 otherwise).
# TensorRT-LLM: LLM API defaults (llmapi/llm_args.py: max_batch_size 2048,
# max_num_tokens 8192, KvCacheConfig.free_gpu_memory_fraction 0.9, capacity
# scheduler GUARANTEED_NO_EVICT, enable_chunked_prefill False), the settings of
# its perf-overview runs.
# SGLang: srt/server_args.py (chunked_prefill_size 8192 on GPUs of 35 GiB or
# more, 2048 below; the overlap scheduler on by default; running requests
# bounded by the KV pool, which binds long before 4096; on running out of KV
# it retracts decoding requests, which recompute later, as vLLM preempts).
ENGINE_FAMILIES: Mapping[str, EngineFamily] = {
    "vllm": EngineFamily("vllm", False, True, False, (1024, 256), (8192, 2048)),
    "trtllm": EngineFamily("trtllm", True, False, True, (2048, 2048), (8192, 8192)),
    "sglang": EngineFamily(
        "sglang",
        False,
        True,
        False,
        (4096, 4096),
        (8192, 2048),
        overlap_schedule=True,
        large_gpu_gib=35,
    ),
}


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's data-sheet numbers (per device)."""

    key: str
    name: str
    memory_bytes: int
    hbm_bytes_per_s: float
    flops_per_s: Mapping[str, float]  # dense tensor peak per compute type
    link_bytes_per_s: float
    allreduce_s: float
    # Calibrated constants this GPU achieves differently from the defaults
    # (``efficiency:`` in gpus.yaml, e.g. the A100's matrix-multiply fraction).
    efficiency: Mapping[str, float] = field(default_factory=dict)
    idle_w: float = 0.0
    tdp_w: float = 0.0

    @classmethod
    def from_mapping(cls, key: str, data: Mapping[str, Any]) -> GPUSpec:
        try:
            return cls(
                key=key,
                name=str(data.get("name", key)),
                memory_bytes=int(float(data["memory_mib"]) * MIB),
                hbm_bytes_per_s=float(data["hbm_gbps"]) * 1e9,
                flops_per_s={k: float(v) * 1e12 for k, v in dict(data["tflops"]).items()},
                link_bytes_per_s=float(data.get("link_gbps", 32)) * 1e9,
                allreduce_s=float(data.get("allreduce_us", 25)) * 1e-6,
                efficiency=dict(data.get("efficiency") or {}),
                idle_w=float(data.get("idle_w", 0)),
                tdp_w=float(data.get("tdp_w", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProfileError(f"GPU {key!r}: bad or missing field: {exc}") from exc


@dataclass(frozen=True)
class ModelSpec:
    """A dense decoder-only transformer (Llama-style: GQA attention, gated MLP)."""

    key: str
    hf_id: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    max_model_len: int
    dtype: str = "bf16"
    # a reasoning model: its thinking length in tokens, lognormal (median, p90)
    reasoning: tuple[float, float] | None = None
    # an embedding model (served on /v1/embeddings only): its vector's size
    embedding_dimensions: int | None = None
    # a vision model: (encoder parameters, patch pixels, patches merged per side)
    vision: tuple[float, int, int] | None = None

    @classmethod
    def from_mapping(cls, key: str, data: Mapping[str, Any]) -> ModelSpec:
        try:
            return cls(
                key=key,
                hf_id=str(data.get("hf_id", key)),
                layers=int(data["layers"]),
                hidden=int(data["hidden"]),
                heads=int(data["heads"]),
                kv_heads=int(data["kv_heads"]),
                head_dim=int(data.get("head_dim", int(data["hidden"]) // int(data["heads"]))),
                intermediate=int(data["intermediate"]),
                vocab=int(data["vocab"]),
                tied_embeddings=bool(data.get("tied_embeddings", False)),
                max_model_len=int(data["max_model_len"]),
                dtype=str(data.get("dtype", "bf16")),
                reasoning=_reasoning(key, data.get("reasoning")),
                vision=_vision(key, data.get("vision")),
                embedding_dimensions=(
                    None
                    if data.get("embedding_dimensions") is None
                    else int(data["embedding_dimensions"])
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProfileError(f"model {key!r}: bad or missing field: {exc}") from exc

    @property
    def linear_params(self) -> int:
        """Parameters of the per-layer matrices (attention projections and MLP):
        the ones quantization shrinks and every token multiplies through."""
        q_and_o = 2 * self.hidden * self.heads * self.head_dim
        k_and_v = 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (q_and_o + k_and_v + mlp)

    @property
    def head_params(self) -> int:
        """The LM head (hidden x vocab): multiplied only for sampled positions."""
        return self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        embedding = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.linear_params + self.head_params + embedding

    def kv_bytes_per_token(self, kv_dtype: str = "auto") -> int:
        """2 (K and V) x layers x kv_heads x head_dim x bytes per element."""
        dtype = self.dtype if kv_dtype == "auto" else kv_dtype
        return 2 * self.layers * self.kv_heads * self.head_dim * KV_BYTES[dtype]


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of peak and fixed costs: the calibrated constants.

    ``matmul``/``attention`` are fractions of the tensor peak; ``bandwidth``
    is the fraction of HBM bandwidth achieved streaming the weights (large
    contiguous GEMV reads, launched layer by layer) and ``kv_bandwidth`` the
    fraction achieved reading the KV cache (paged attention kernels saturate
    HBM better on long contexts); ``link`` is the share of the GPU link's
    line rate a ring all-reduce achieves. Published numbers imply decode at 50-80% of
    HBM bandwidth and prefill at 45-70% of peak (docs/simengine.md, docs/design.md). The
    overheads stand for the engine's CPU work per step (scheduling, sampling,
    detokenizing), per sequence in the batch, and once per request in the
    front end (HTTP parsing, tokenizing, the first chunk's detokenizing)."""

    matmul: float
    attention: float
    bandwidth: float
    kv_bandwidth: float
    link: float
    step_overhead_s: float
    per_seq_overhead_s: float
    request_overhead_s: float
    # How sharply the linear layers turn from bandwidth to compute bound:
    # (compute^n + memory^n)^(1/n); infinity is the plain max() of a roofline.
    roofline_exponent: float = math.inf

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Efficiency:
        known = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING}
        if not required <= set(data) <= known:
            raise ProfileError(
                f"efficiency: unknown {sorted(set(data) - known)} or missing "
                f"{sorted(required - set(data))} keys; expected {sorted(known)}"
            )
        eff = cls(**{k: float(v) for k, v in data.items()})
        for name in ("matmul", "attention", "bandwidth", "kv_bandwidth", "link"):
            if not 0 < getattr(eff, name) <= 1:
                raise ProfileError(f"efficiency.{name} must be in (0, 1]")
        if eff.roofline_exponent < 1:
            raise ProfileError("efficiency.roofline_exponent must be at least 1")
        return eff


def _reasoning(key: str, value: Any) -> tuple[float, float] | None:
    """A reasoning model's ``reasoning: {median: N, p90: M}`` thinking tokens."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"median", "p90"}:
        raise ProfileError(f"model {key!r}: reasoning must be {{median: N, p90: M}}, got {value!r}")
    median, p90 = float(value["median"]), float(value["p90"])
    if not 1 <= median < p90:
        raise ProfileError(f"model {key!r}: reasoning needs 1 <= median < p90, got {value!r}")
    return median, p90


def _vision(key: str, value: Any) -> tuple[float, int, int] | None:
    """A vision model's ``vision: {encoder_params, patch_px, merge}``."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) != {"encoder_params", "patch_px", "merge"}:
        raise ProfileError(
            f"model {key!r}: vision must be {{encoder_params, patch_px, merge}}, got {value!r}"
        )
    return float(value["encoder_params"]), int(value["patch_px"]), int(value["merge"])


def _read_yaml(name: str) -> dict[str, Any]:
    text = (resources.files("slogate.simengine") / "profiles" / name).read_text("utf-8")
    return yaml.safe_load(text)


@cache
def default_efficiency() -> Efficiency:
    """The calibrated constants (``engine.yaml``; docs/simengine.md explains them)."""
    return Efficiency.from_mapping(_read_yaml("engine.yaml")["efficiency"])


def merged_efficiency(base: Efficiency, overrides: Mapping[str, Any], where: str) -> Efficiency:
    """``base`` with some constants replaced (a GPU's own fractions, a profile
    file's ``efficiency``), validated like the defaults."""
    if not overrides:
        return base
    if not isinstance(overrides, Mapping):
        raise ProfileError(f"{where}: efficiency must be a mapping, got {overrides!r}")
    merged = {f.name: getattr(base, f.name) for f in fields(Efficiency)}
    merged.update(overrides)
    try:
        return Efficiency.from_mapping(merged)
    except ProfileError as exc:
        raise ProfileError(f"{where}: {exc}") from exc


@dataclass(frozen=True)
class Profile:
    """One deployment: a model on ``tp`` GPUs with vLLM-like engine settings.

    Byte and token totals are across all ``tp`` GPUs unless the name says
    ``per_gpu``. ``None`` settings take vLLM's defaults for the GPU."""

    model: ModelSpec
    gpu: GPUSpec
    tp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "auto"
    engine: str = "vllm"
    gpu_memory_utilization: float = 0.9
    kv_cache_free_gpu_mem_fraction: float = 0.9
    block_size: int = 16
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    enable_prefix_caching: bool = True
    num_gpu_blocks: int | None = None  # overrides the computed capacity (tests, what-ifs)
    # LoRA adapters served beside the base model (vLLM --lora-modules): lora-0..N-1
    lora_adapters: int = 0
    lora_rank: int = 16
    speculative_tokens: int = 0  # draft tokens verified per decode step (0: off)
    acceptance_rate: float = 0.7  # chance that each draft token is accepted
    # drafting sequences per step at which the acceptance halves (0: it never falls)
    acceptance_half_batch: float = ACCEPTANCE_HALF_BATCH
    disaggregated: bool = False  # one prefill + one decode instance of this deployment
    kv_transfer_gbps: float = 50.0  # per GPU, prefill -> decode (one 400 Gb/s NIC)
    scheduling_policy: str = "fcfs"
    efficiency: Efficiency = field(default_factory=default_efficiency)

    def __post_init__(self) -> None:
        if self.weight_dtype not in WEIGHT_BYTES:
            raise ProfileError(
                f"weight dtype {self.weight_dtype!r}: expected one of {sorted(WEIGHT_BYTES)}"
            )
        if self.kv_dtype != "auto" and self.kv_dtype not in KV_BYTES:
            raise ProfileError(
                f"kv dtype {self.kv_dtype!r}: expected auto or one of {sorted(KV_BYTES)}"
            )
        if self.engine not in ENGINE_FAMILIES:
            raise ProfileError(
                f"engine {self.engine!r}: expected one of {', '.join(ENGINE_FAMILIES)}"
            )
        if self.tp < 1:
            raise ProfileError("tp must be at least 1")
        for name in ("gpu_memory_utilization", "kv_cache_free_gpu_mem_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise ProfileError(f"{name} must be in (0, 1]")
        for name in ("block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ProfileError(f"{name} must be at least 1")
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise ProfileError(
                f"scheduling_policy {self.scheduling_policy!r}: expected one of "
                f"{', '.join(SCHEDULING_POLICIES)}"
            )
        if self.speculative_tokens < 0:
            raise ProfileError("speculative_tokens must be 0 (off) or more")
        if self.kv_transfer_gbps <= 0:
            raise ProfileError("kv_transfer_gbps must be positive")
        if not 0 <= self.acceptance_rate <= 1:
            raise ProfileError("acceptance_rate must be in [0, 1]")
        if self.acceptance_half_batch < 0:
            raise ProfileError("acceptance_half_batch must be 0 (constant) or more")
        if self.num_gpu_blocks is not None and self.num_gpu_blocks < 1:
            raise ProfileError("num_gpu_blocks must be at least 1")
        if self.num_gpu_blocks is None and self.kv_budget_bytes_per_gpu <= 0:
            need = (self.weight_bytes_per_gpu + self.runtime_reserve_bytes_per_gpu) / GIB
            have = self.gpu.memory_bytes * self.gpu_memory_utilization / GIB
            raise ProfileError(
                f"{self.name}: weights and runtime need {need:.1f} GiB per GPU but only "
                f"{have:.1f} GiB are available; use more GPUs (e.g. 2x{self.gpu.key}), "
                "a smaller weight dtype or a larger GPU"
            )

    # -- names -----------------------------------------------------------------
    @property
    def name(self) -> str:
        """The canonical profile name (parses back to an equal profile)."""
        gpu = f"{self.tp}x{self.gpu.key}" if self.tp > 1 else self.gpu.key
        text = f"{self.model.key}@{gpu}:{self.weight_dtype}"
        if self.kv_dtype != "auto":
            text += f":kv={self.kv_dtype}"
        if self.engine != "vllm":
            text += f":engine={self.engine}"
        return text

    @property
    def family(self) -> EngineFamily:
        """The serving engine whose scheduler and defaults this profile models."""
        return ENGINE_FAMILIES[self.engine]

    @property
    def compute_type(self) -> str:
        """The tensor-core type the linear layers run in: fp8/int8 weights run
        with quantized activations (W8A8) where the GPU has those units; int4 and
        fp8-without-hardware are weight-only and compute in bf16."""
        if self.weight_dtype in ("fp8", "int8") and self.weight_dtype in self.gpu.flops_per_s:
            return self.weight_dtype
        return "bf16"

    # -- LoRA adapters ------------------------------------------------------------------
    @property
    def adapter_names(self) -> tuple[str, ...]:
        return tuple(f"lora-{i}" for i in range(self.lora_adapters))

    @property
    def adapter_bytes(self) -> int:
        """One adapter's weights: rank x (inputs + outputs) of every per-layer
        matrix (attention projections and MLP), in the weights' 16-bit type."""
        m = self.model
        q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
        per_layer = (m.hidden + q) * 2 + (m.hidden + kv) * 2 + (m.hidden + m.intermediate) * 3
        return self.lora_rank * per_layer * m.layers * 2

    @property
    def adapter_load_s(self) -> float:
        """Loading an adapter on first use: its bytes over a PCIe 4.0 x16 host
        link, plus the engine's fixed cost of reading and registering it (both
        assumptions: vLLM reads the safetensors from local disk)."""
        return ADAPTER_FIXED_LOAD_S + self.adapter_bytes / HOST_LINK_BYTES_PER_S

    # -- scheduler settings with the engine's per-GPU defaults ---------------------
    @property
    def _large_for_family(self) -> bool:
        """Whether the engine picks its large-GPU defaults for this GPU."""
        return self.gpu.memory_bytes >= self.family.large_gpu_gib * GIB

    @property
    def scheduler_max_num_seqs(self) -> int:
        if self.max_num_seqs is not None:
            return self.max_num_seqs
        large, small = self.family.max_num_seqs
        return large if self._large_for_family else small

    @property
    def scheduler_max_num_batched_tokens(self) -> int:
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        large, small = self.family.max_num_batched_tokens
        return large if self._large_for_family else small

    # -- weights -------------------------------------------------------------------
    @property
    def weight_bytes(self) -> int:
        """Weight memory across all GPUs. Linear layers are in ``weight_dtype``;
        embedding and LM head stay 16-bit, as quantized checkpoints keep them."""
        model = self.model
        linear = model.linear_params * WEIGHT_BYTES[self.weight_dtype]
        return int(linear + (model.total_params - model.linear_params) * 2)

    @property
    def weight_bytes_per_gpu(self) -> int:
        return math.ceil(self.weight_bytes / self.tp)

    @property
    def weight_bytes_read_per_step(self) -> int:
        """Bytes of weights every step streams from HBM (all GPUs together): the
        linear layers and the LM head; embedding rows are gathered, not streamed."""
        model = self.model
        return int(model.linear_params * WEIGHT_BYTES[self.weight_dtype] + model.head_params * 2)

    # -- KV cache --------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token occupies, summed over all GPUs."""
        return self.model.kv_bytes_per_token(self.kv_dtype)

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        """Each GPU holds ceil(kv_heads / tp) heads (replicated when tp > kv_heads)."""
        per_head = self.kv_bytes_per_token // self.model.kv_heads
        return per_head * math.ceil(self.model.kv_heads / self.tp)

    def kv_cache_bytes(self, tokens: int) -> int:
        """KV-cache bytes for ``tokens`` tokens of context (e.g. batch x length)."""
        return tokens * self.kv_bytes_per_token

    @property
    def runtime_reserve_bytes_per_gpu(self) -> int:
        """Memory vLLM's profiling run takes besides weights and KV cache: about
        1 GiB of CUDA context, graphs and communication buffers plus the
        activations of a full batch (hidden states and the MLP's gate/up output)."""
        model = self.model
        per_token = (4 * model.hidden + 2 * model.intermediate // self.tp) * 2
        return GIB + self.scheduler_max_num_batched_tokens * per_token

    @property
    def kv_budget_bytes_per_gpu(self) -> int:
        """vLLM: memory x ``gpu_memory_utilization`` - weights - runtime reserve;
        TensorRT-LLM: ``kv_cache_free_gpu_mem_fraction`` of what is left after
        weights and runtime reserve."""
        left = (
            self.gpu.memory_bytes - self.weight_bytes_per_gpu - self.runtime_reserve_bytes_per_gpu
        )
        if self.family.kv_from_free_memory:
            return int(left * self.kv_cache_free_gpu_mem_fraction)
        return int(left - self.gpu.memory_bytes * (1 - self.gpu_memory_utilization))

    @property
    def kv_blocks(self) -> int:
        """Number of KV-cache blocks (``num_gpu_blocks`` overrides the formula)."""
        if self.num_gpu_blocks is not None:
            return self.num_gpu_blocks
        return self.kv_budget_bytes_per_gpu // (self.kv_bytes_per_token_per_gpu * self.block_size)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv_blocks * self.block_size

    @property
    def kv_capacity_bytes(self) -> int:
        return self.kv_cache_bytes(self.kv_capacity_tokens)

    @property
    def effective_max_model_len(self) -> int:
        """The longest sequence served: the model's limit (or the override),
        lowered to what the KV cache holds so one sequence always fits."""
        limit = self.max_model_len or self.model.max_model_len
        return min(limit, self.kv_capacity_tokens)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary for logs, ``/admin/stats`` and capacity tools."""
        return {
            "profile": self.name,
            "model": self.model.hf_id,
            "gpu": self.gpu.name,
            "tp": self.tp,
            "engine": self.engine,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.model.dtype if self.kv_dtype == "auto" else self.kv_dtype,
            "compute_type": self.compute_type,
            "params": self.model.total_params,
            "weight_bytes": self.weight_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_blocks": self.kv_blocks,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "kv_capacity_bytes": self.kv_capacity_bytes,
            "max_model_len": self.effective_max_model_len,
            "max_num_seqs": self.scheduler_max_num_seqs,
            "max_num_batched_tokens": self.scheduler_max_num_batched_tokens,
            "enable_prefix_caching": self.enable_prefix_caching,
            "speculative_tokens": self.speculative_tokens,
            "acceptance_rate": self.acceptance_rate,
            "acceptance_half_batch": self.acceptance_half_batch,
            "disaggregated": self.disaggregated,
            "scheduling_policy": self.scheduling_policy,
        }


# -- catalogues ------------------------------------------------------------------
def _alias_index(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    index = {}
    for key, data in entries.items():
        for alias in [key, *data.get("aliases", [])]:
            index[alias.lower()] = key
    return index


@cache
def models() -> dict[str, ModelSpec]:
    """The built-in models by key (``models.yaml``)."""
    return {
        key: ModelSpec.from_mapping(key, data) for key, data in _read_yaml("models.yaml").items()
    }


@cache
def gpus() -> dict[str, GPUSpec]:
    """The built-in GPUs by key (``gpus.yaml``)."""
    return {key: GPUSpec.from_mapping(key, data) for key, data in _read_yaml("gpus.yaml").items()}


def get_model(name: str) -> ModelSpec:
    key = _alias_index(_read_yaml("models.yaml")).get(name.lower())
    if key is None:
        raise ProfileError(f"unknown model {name!r}; known: {', '.join(models())}")
    return models()[key]


def get_gpu(name: str) -> GPUSpec:
    key = _alias_index(_read_yaml("gpus.yaml")).get(name.lower())
    if key is None:
        raise ProfileError(f"unknown GPU {name!r}; known: {', '.join(gpus())}")
    return gpus()[key]


# -- parsing -----------------------------------------------------------------------
_NAME_RE = re.compile(
    r"^(?P<model>[^@:]+)@(?:(?P<tp>\d+)x)?(?P<gpu>[^@:]+)(?P<options>(?::[^:]+)*)$"
)


def _coerce_setting(key: str, value: Any) -> Any:
    """Convert a setting given as text (profile name, CLI) to its field's type."""
    if key == "kv":
        return str(value).lower()
    if key in ("enable_prefix_caching", "disaggregated"):
        if isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ProfileError(f"{key}: expected true/false, got {value!r}")
            return value.lower() in ("true", "1", "yes", "on")
        return bool(value)
    if key in (
        "gpu_memory_utilization",
        "kv_cache_free_gpu_mem_fraction",
        "acceptance_rate",
        "acceptance_half_batch",
        "kv_transfer_gbps",
    ):
        try:
            return float(value)
        except (TypeError, ValueError) as exc:
            raise ProfileError(f"{key}: expected a number, got {value!r}") from exc
    if key in ("engine", "scheduling_policy"):
        return str(value).lower()
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ProfileError(f"{key}: expected an integer, got {value!r}") from exc


def _apply_settings(base: dict[str, Any], settings: Mapping[str, Any], where: str) -> None:
    for key, value in settings.items():
        if key == "kv" or key == "kv_dtype":
            base["kv_dtype"] = _coerce_setting("kv", value)
        elif key == "weight_dtype":
            base["weight_dtype"] = str(value).lower()
        elif key == "tp":
            base["tp"] = _coerce_setting("tp", value)
        elif key in ENGINE_SETTINGS:
            base[key] = None if value is None else _coerce_setting(key, value)
        else:
            known = ["kv", "kv_dtype", "weight_dtype", "tp", *ENGINE_SETTINGS]
            raise ProfileError(f"{where}: unknown setting {key!r}; known: {', '.join(known)}")


def parse_profile(name: str, **settings: Any) -> Profile:
    """Build a profile from ``MODEL@[TPx]GPU[:OPTION]...``; ``settings`` (the same
    keys as ``KEY=VALUE`` options) are applied after the name's options."""
    match = _NAME_RE.match(name.strip())
    if match is None:
        raise ProfileError(
            f"profile {name!r}: expected MODEL@[TPx]GPU[:OPTION]..., e.g. "
            f"{DEFAULT_PROFILE} or llama-3.1-70b@2xh100:fp8:kv=fp8"
        )
    model = get_model(match["model"])
    base: dict[str, Any] = {
        "model": model,
        "gpu": get_gpu(match["gpu"]),
        "tp": int(match["tp"] or 1),
        "weight_dtype": model.dtype,
    }
    base["efficiency"] = merged_efficiency(
        default_efficiency(), base["gpu"].efficiency, f"GPU {base['gpu'].key!r}"
    )
    options: dict[str, Any] = {}
    for option in filter(None, match["options"].split(":")):
        if "=" in option:
            key, _, value = option.partition("=")
            options[key.strip()] = value.strip()
        elif option.lower() in WEIGHT_BYTES:
            options["weight_dtype"] = option.lower()
        else:
            raise ProfileError(
                f"profile {name!r}: option {option!r} is neither a weight dtype "
                f"({', '.join(WEIGHT_BYTES)}) nor KEY=VALUE"
            )
    _apply_settings(base, options, f"profile {name!r}")
    _apply_settings(base, settings, f"profile {name!r}")
    return Profile(**base)


def load_profile_file(path: str | os.PathLike[str], **settings: Any) -> Profile:
    """Read a custom profile file. ``model`` and ``gpu`` are built-in names or
    mappings with the same fields as ``models.yaml``/``gpus.yaml``; the other
    keys are ``tp``, ``weight_dtype``, ``kv_dtype``, any engine setting and an
    ``efficiency`` mapping that overrides the calibrated constants."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read profile file: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or "model" not in data or "gpu" not in data:
        raise ProfileError(f"{path}: expected a mapping with at least 'model' and 'gpu'")
    data = dict(data)
    model_data, gpu_data = data.pop("model"), data.pop("gpu")
    model = (
        ModelSpec.from_mapping(str(model_data.get("key", "custom")), model_data)
        if isinstance(model_data, dict)
        else get_model(str(model_data))
    )
    gpu = (
        GPUSpec.from_mapping(str(gpu_data.get("key", "custom")), gpu_data)
        if isinstance(gpu_data, dict)
        else get_gpu(str(gpu_data))
    )
    efficiency = merged_efficiency(default_efficiency(), gpu.efficiency, f"GPU {gpu.key!r}")
    efficiency = merged_efficiency(efficiency, data.pop("efficiency", None) or {}, str(path))
    base: dict[str, Any] = {
        "model": model,
        "gpu": gpu,
        "weight_dtype": model.dtype,
        "efficiency": efficiency,
    }
    _apply_settings(base, data, str(path))
    _apply_settings(base, settings, str(path))
    return Profile(**base)


def load_profile(
    spec: str | os.PathLike[str] | Profile = DEFAULT_PROFILE, **settings: Any
) -> Profile:
    """The one entry point: a :class:`Profile` (settings applied), a profile
    name, or the path of a ``.yaml``/``.yml`` profile file."""
    if isinstance(spec, Profile):
        base: dict[str, Any] = {}
        _apply_settings(base, settings, spec.name)
        return replace(spec, **base)
    text = os.fspath(spec)
    if text.endswith((".yaml", ".yml")):
        return load_profile_file(text, **settings)
    return parse_profile(text, **settings)
