"""Speculative decoding's two numbers, from counts: the share of draft tokens
the target model accepted, and the mean tokens one verifying step yields.

Both are ratios of counters, so they are taken over whatever span the counts
cover (a run, a time window, one request) and never averaged across spans.
The mean accepted length is vLLM's "mean acceptance length": the token the
step verifies plus the drafts it accepted, 1 + accepted / drafts, where a
draft is one sequence's proposal in one step.
"""

from __future__ import annotations

from typing import Any

from slogate.analysis.measurement.recorder import Counters


def acceptance_rate(accepted: float, drafted: float) -> float | None:
    """Accepted draft tokens over those verified; None when none were drafted."""
    return round(accepted / drafted, 6) if drafted > 0 else None


def mean_accepted_length(accepted: float, drafts: float) -> float | None:
    """Tokens per verifying step: 1 + accepted draft tokens per draft; None without drafts."""
    return round(1.0 + accepted / drafts, 6) if drafts > 0 else None


def replies_block(counters: Counters) -> dict[str, Any] | None:
    """What the replies said of their own drafts (llama.cpp's ``timings``),
    summed over the successful requests that said it; None when none did."""
    c = counters
    if not c.spec_reported:
        return None
    return {
        "requests": c.spec_reported,
        "draft_tokens": c.draft_tokens,
        "accepted_tokens": c.accepted_tokens,
        "acceptance_rate": acceptance_rate(c.accepted_tokens, c.draft_tokens),
    }
