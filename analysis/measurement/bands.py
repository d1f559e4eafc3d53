"""Power-of-two length bands: latency by input or context length, inside one run.

A run's histograms say how long requests took, not which ones were long. To
see whether TTFT tracks the prompt (prefill-bound) or TPOT the context (KV
reads), the recorder also files each request's TTFT under its input-length
band and its TPOT under its context-length band; ``slogate.analysis.diagnosis.diagnose`` reads
them back. Bands are powers of two: band N holds lengths N..2N-1.
"""

from __future__ import annotations

from slogate.scenarios.metrics import CONTEXT_BANDS, TTFT_BY_CONTEXT

TTFT_BY_INPUT = "ttft_in_"
TPOT_BY_CONTEXT = "tpot_ctx_"


def length_band(tokens: int) -> int:
    """Lower bound of the power-of-two band holding ``tokens`` (0 for 0 tokens)."""
    return 0 if tokens <= 0 else 1 << (tokens.bit_length() - 1)


def band_label(lower: int) -> str:
    return f"{lower}-{2 * lower - 1}" if lower else "0"


def ttft_band(input_tokens: int) -> str:
    """Histogram name for the TTFT of a request with ``input_tokens`` of prompt."""
    return f"{TTFT_BY_INPUT}{length_band(input_tokens)}"


def tpot_band(context_tokens: int) -> str:
    """Histogram name for the TPOT of a request whose context (input plus output)
    is ``context_tokens``."""
    return f"{TPOT_BY_CONTEXT}{length_band(context_tokens)}"


def context_band(input_tokens: int) -> str:
    """Histogram name for the TTFT of a request with ``input_tokens`` of
    context, in the fixed bands 0-8k, 8-32k, 32-128k and beyond."""
    label = next(name for upper, name in CONTEXT_BANDS if upper is None or input_tokens < upper)
    return f"{TTFT_BY_CONTEXT}{label}"
