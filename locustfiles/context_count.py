"""How a run counts its planned prompts against the engine's context: with the
engine's own ``/tokenize`` when it answers, else with the local count and a
margin for its error.

The scenario's ``request.tokenizer`` decides how prompts are planned; the
engine decides what it refuses, counting with its own tokenizer and chat
template. A run that counted with the bundled tokenizer against an engine
whose tokenizer counts more sent a third of its clamped requests past the
context (HTTP 400; issue 42). So the pre-flight asks the engine's
``/tokenize`` whatever the setting, and measures the tokens its chat template
adds around a message; each load process then counts the requests near the
context with it (``ContextFit.measure``). Without one the local count is
inflated by LOCAL_MARGIN, and the run says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slogate.client.engine_info import (
    EngineInfo,
    TokenizeError,
    chat_framing,
    remote_token_counter,
)
from slogate.scenarios.context_fit import FRAMING_TOKENS, ContextFit
from slogate.scenarios.model import Scenario

__all__ = ["LOCAL_MARGIN", "ContextCount", "find_count", "run_fit", "tokenize_timeout"]

log = logging.getLogger("slogate")

# The local count's error against another model's tokenizer, allowed for when
# the engine offers none: chosen, not measured (no other model's tokenizer is
# at hand offline), and stated with the run. Naming the model's tokenizer.json
# in request.tokenizer counts exactly instead.
LOCAL_MARGIN = 0.25

# The most one /tokenize call may take (less where the scenario's first token
# must come sooner): a call that hangs holds the user planning with it.
TOKENIZE_TIMEOUT_S = 10.0


def tokenize_timeout(loaded: list[Scenario]) -> float:
    """How long a ``/tokenize`` call may take: the scenarios' shortest
    ``timeouts.first_token`` (what they allow an engine to start answering),
    at most TOKENIZE_TIMEOUT_S."""
    return min([TOKENIZE_TIMEOUT_S] + [s.timeouts.first_token_s for s in loaded])


@dataclass(frozen=True, slots=True)
class ContextCount:
    """How the run counts prompts against the context: ``method`` ``engine``
    (its ``/tokenize``) or ``local`` (planned counts, inflated by ``margin``);
    ``framing``: tokens per message for the chat template, and whether the
    engine measured them."""

    method: str
    framing: int
    framing_measured: bool = False

    @property
    def margin(self) -> float:
        return 0.0 if self.method == "engine" else LOCAL_MARGIN

    def to_dict(self) -> dict[str, Any]:
        """summary.json's ``run.engine.context_count``."""
        return {
            "method": self.method,
            "margin": self.margin,
            "framing_tokens": self.framing,
            "framing_measured": self.framing_measured,
        }


def find_count(
    host: str, loaded: list[Scenario], engine: EngineInfo
) -> tuple[ContextCount, Callable[[str], int] | None]:
    """Pre-flight: how prompts are counted against the engine's context, and the
    engine's counter when it has one. Raises TokenizeError when ``/tokenize``
    gets no answer and a scenario plans with it (``request.tokenizer:
    server``); where only the context asked, that run counts locally, and says
    so. Not asked at all when neither needs it."""
    server = any(s.request.tokenizer == "server" for s in loaded)
    if not (engine.context or server):
        return ContextCount("local", FRAMING_TOKENS), None
    key, timeout = loaded[0].request.api_key_env, tokenize_timeout(loaded)
    try:
        counter = remote_token_counter(host, key, timeout, engine.model)
        framing = chat_framing(host, key, timeout, engine.model) if counter else None
    except TokenizeError as error:
        if server:
            raise
        log.warning("slogate: %s", error)
        counter, framing = None, None
    count = ContextCount(
        "engine" if counter else "local",
        FRAMING_TOKENS if framing is None else framing,
        framing is not None,
    )
    if counter is None and engine.context:
        log.warning(
            "slogate: the engine counts no tokens for us (no /tokenize): planned prompts are "
            "checked against its context of %d tokens with the local count, which may be "
            "%.0f%% short of another model's; the fit leaves that margin",
            engine.context,
            100 * LOCAL_MARGIN,
        )
    return count, counter


def run_fit(
    context: int, mode: str, count: ContextCount, measure: Callable[[str], int] | None
) -> ContextFit:
    """The fit a process plans with: the engine's ``measure`` when the count
    is the engine's, else the local count's margin; the template's framing."""
    return ContextFit(
        context,
        mode,
        measure=measure if count.method == "engine" else None,
        margin=count.margin,
        framing=count.framing,
    )
