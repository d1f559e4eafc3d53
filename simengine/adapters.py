"""What serving LoRA adapters adds to a step.

A step whose batch holds requests for adapters runs, beside the base model's
layers, LoRA's shrink and expand kernels on every adapted layer (Punica's
SGMV/BGMV, which vLLM's multi-LoRA runs), and reads the weights of each
distinct adapter in the batch. Two parts, per step:

- **Kernels**: ``LAYER_S`` per transformer layer. Punica (Chen et al.,
  "Punica: Multi-Tenant LoRA Serving", MLSys 2024) measured that batching
  requests for different LoRA models adds about 2 ms per generated token on
  Llama-2-7B's 32 layers; vLLM users report the same order (Llama-2-7B, 8 x
  A100, ``--enable-lora``: 3000 tokens in 23 s instead of 15 s, about 2.7 ms
  per token; vllm-project/vllm#10898). Per layer that is 2 ms / 32.
- **Weights**: each distinct adapter's bytes (``Profile.adapter_bytes``) read
  from HBM once per step at the profile's achieved bandwidth, so a batch
  mixing more adapters costs more, as S-LoRA (Sheng et al., MLSys 2024)
  describes for heterogeneous batches.

Assumption: a step without adapter requests runs the base model alone (no
LoRA kernels). The LoRA matmuls' FLOPs (rank x the adapted dimensions per
token, under 1 % of the base model's at rank 16) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from slogate.simengine.profiles import Profile
from slogate.simengine.scheduler import Sequence

__all__ = ["LAYER_S", "AdapterCost"]

PUNICA_TOKEN_S = 2e-3  # added per token, Llama-2-7B (Punica, abstract and section 7)
PUNICA_LAYERS = 32  # Llama-2-7B
LAYER_S = PUNICA_TOKEN_S / PUNICA_LAYERS


class AdapterCost:
    """The extra seconds of one step, from the adapters its sequences use."""

    def __init__(self, profile: Profile) -> None:
        bandwidth = profile.gpu.hbm_bytes_per_s * profile.tp * profile.efficiency.bandwidth
        self.kernels_s = profile.model.layers * LAYER_S
        self.per_adapter_s = profile.adapter_bytes / bandwidth

    def seconds(self, seqs: Iterable[Sequence]) -> float:
        """Zero for a batch of base-model requests; else the kernels plus one
        weight read per distinct adapter."""
        adapters = {seq.sink.adapter for seq in seqs if seq.sink is not None}
        adapters.discard(None)
        if not adapters:
            return 0.0
        return self.kernels_s + len(adapters) * self.per_adapter_s
