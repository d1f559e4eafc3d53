"""Planned requests against the engine's context length.

An engine refuses a request whose prompt and output tokens together exceed its
context (vLLM's ``max_model_len``: HTTP 400). A run that plans such requests
measures the engine's refusals, not its latency, so the run asks before any
load (``slogate.client.engine_info``) and refuses to start, naming the counts,
unless the user chose to ``clamp`` them or to ``drop`` them.

Clamped, a request keeps as much of what was planned as the context holds: its
output is cut to the room its prompt leaves; a prompt that alone fills the
context loses the tail of its newest text instead (the start, and so any prefix
it shares, stays byte-identical) until its planned output fits, the output
kept whole up to half the context. A prompt whose history or system text alone
is too long has nothing left to cut and is dropped. A dropped turn of a
conversation ends it: the turns after it carry its history.

The engine counts with its own tokenizer, and its chat template adds tokens
around each message. So a fit counts as the engine does where it can: a
planned request that could be near the context (were the engine to count up
to NEAR times the local tokens) has its texts counted by the engine's
``/tokenize`` (``measure``), and each message is allowed ``framing`` tokens.
Where the engine has no ``/tokenize`` the local count is inflated by
``margin``, its possible error against another model's tokenizer.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slogate.scenarios.model import PlannedTurn, Scenario

__all__ = [
    "FIT_MODES",
    "FRAMING_TOKENS",
    "ContextFit",
    "Overflow",
    "Trim",
    "fitted",
    "fitted_conversation",
    "measured",
    "overflow",
    "sampled_overflow",
]

FIT_MODES = ("clamp", "drop")
# Planned requests sampled before the load: enough to meet a tail of 1 in 1000.
SAMPLED_REQUESTS = 2000
# text without (at least) its last n tokens and the tokens it lost; None: nothing left
Trim = Callable[[str, int], "tuple[str, int] | None"]
Count = Callable[[str], int]
# Tokens allowed for a message's chat template where the engine cannot count a
# chat: ChatML's framing is 5, Llama 3's 4 to 5 (its generation prompt 4 more).
FRAMING_TOKENS = 8
# A planned request is counted by the engine when it would pass the context were
# the engine to count this many times the local tokens of its texts.
NEAR = 2.0


@dataclass(frozen=True, slots=True)
class ContextFit:
    """The engine's context in tokens and what to do with a request past it
    (``mode`` one of FIT_MODES; empty: none is expected, since the run refused);
    how a prompt is counted against it: ``measure``, the engine's count (its
    ``/tokenize``), else the planned count inflated by ``margin``; ``framing``
    tokens allowed for each message's chat template."""

    context: int
    mode: str = ""
    measure: Count | None = None
    margin: float = 0.0
    framing: int = 0

    def prompt_length(self, turn: PlannedTurn) -> int:
        """The prompt's tokens as the engine may count them."""
        return math.ceil(turn.intended_input_tokens * (1 + self.margin)) + self.framing * (
            _messages(turn)
        )

    def near(self, turn: PlannedTurn) -> bool:
        """Whether the engine's count of ``turn`` could put it past the context."""
        prompt = math.ceil(turn.intended_input_tokens * NEAR) + self.framing * _messages(turn)
        return prompt + turn.max_tokens > self.context


def _messages(turn: PlannedTurn) -> int:
    """The messages a turn sends: its system text, each earlier turn's two, its own."""
    return (turn.system_text is not None) + 2 * turn.turn + 1


def _length(turn: PlannedTurn, fit: ContextFit) -> int:
    return fit.prompt_length(turn) + turn.max_tokens


def measured(
    turns: Sequence[PlannedTurn], fit: ContextFit, local: Count
) -> tuple[PlannedTurn, ...]:
    """The turns of one conversation (or one request) with their prompts in the
    engine's tokens when any is near the context: each turn's own text counted
    by ``fit.measure`` instead of ``local``, the difference carried by the
    turns after it (their history holds that text). Unchanged without a
    measure, or when none is near."""
    if fit.measure is None or not any(fit.near(t) and not t.inputs for t in turns):
        return tuple(turns)
    delta = 0
    kept = []
    for turn in turns:
        text = turn.prompt if turn.turn == 0 else turn.user_text  # the first carries the system
        delta += fit.measure(text) - local(text)
        tokens = max(turn.intended_input_tokens + delta, 0)
        kept.append(dataclasses.replace(turn, intended_input_tokens=tokens))
    return tuple(kept)


def fitted(turn: PlannedTurn, fit: ContextFit, trim: Trim | None = None) -> PlannedTurn | None:
    """``turn`` as sent under ``fit``: itself when it fits; clamped, its output
    cut to the context's room, or its user text's tail cut by ``trim`` when the
    prompt leaves no room (None: dropped instead); None when dropped."""
    if _length(turn, fit) <= fit.context:
        return turn
    if fit.mode != "clamp":
        return None
    room = fit.context - fit.prompt_length(turn)
    if room >= 1:
        output = min(turn.intended_output_tokens, room)
        return dataclasses.replace(turn, max_tokens=room, intended_output_tokens=output)
    return _prompt_clamped(turn, fit, trim)


def _prompt_clamped(turn: PlannedTurn, fit: ContextFit, trim: Trim | None) -> PlannedTurn | None:
    """The turn with its user text's tail cut so its planned output (up to half
    the context) fits; None when the rest of the prompt alone is too long.
    ``trim`` counts as the turn was counted (the engine's measure, or the
    local count, which the margin inflates: a token more is cut for its rounding)."""
    if trim is None or turn.inputs:
        return None
    output = min(turn.max_tokens, fit.context // 2)
    excess = fit.prompt_length(turn) + output - fit.context
    cut = trim(turn.user_text, math.ceil(excess / (1 + fit.margin)) + (fit.margin > 0))
    if cut is None:
        return None
    text, lost = cut
    return dataclasses.replace(
        turn,
        user_text=text,
        intended_input_tokens=turn.intended_input_tokens - lost,
        max_tokens=output,
        intended_output_tokens=min(turn.intended_output_tokens, output),
    )


def fitted_conversation(
    turns: Sequence[PlannedTurn], fit: ContextFit, trim: Trim | None = None
) -> tuple[PlannedTurn, ...]:
    """The turns up to the first that is dropped (later turns carry its history)."""
    kept = []
    for turn in turns:
        sent = fitted(turn, fit, trim)
        if sent is None:
            break
        kept.append(sent)
    return tuple(kept)


@dataclass(frozen=True, slots=True)
class Overflow:
    """What a sample of the planned requests gives against the context."""

    scenario: str
    sampled: int
    over: int
    clamped: int
    dropped: int
    longest_input: int
    longest_output: int

    def refusal(self, context: int, mode: str = "") -> str:
        """Why the run is refused, and what would help: ``--fit-context`` only
        where it was not given (with it, every request was dropped)."""
        advice = (
            f"even --fit-context {mode} leaves no request to send: shorten the scenario's lengths"
            if mode
            else "shorten the scenario's lengths, or pass --fit-context clamp (cut the output "
            "to fit) or drop"
        )
        return (
            f"scenario {self.scenario}: {self.over} of {self.sampled} planned requests are "
            f"longer than the engine's context of {context} tokens (prompt + max output "
            f"tokens; the longest {self.longest_input} + {self.longest_output} = "
            f"{self.longest_input + self.longest_output}): {advice}"
        )

    def to_dict(self) -> dict[str, int | str]:
        return dataclasses.asdict(self)


def overflow(
    scenario: str, turns: Iterable[PlannedTurn], fit: ContextFit, trim: Trim | None = None
) -> Overflow:
    """Counts over the first SAMPLED_REQUESTS of ``turns``."""
    sampled = over = clamped = dropped = 0
    longest: PlannedTurn | None = None
    clamp = dataclasses.replace(fit, mode="clamp")
    for turn in itertools.islice(turns, SAMPLED_REQUESTS):
        sampled += 1
        if _length(turn, fit) <= fit.context:
            continue
        over += 1
        if longest is None or _length(turn, fit) > _length(longest, fit):
            longest = turn
        if fit.mode == "drop" or fitted(turn, clamp, trim) is None:
            dropped += 1
        else:
            clamped += 1
    return Overflow(
        scenario,
        sampled,
        over,
        clamped,
        dropped,
        fit.prompt_length(longest) if longest else 0,
        longest.max_tokens if longest else 0,
    )


def sampled_overflow(scenario: Scenario, fit: ContextFit) -> Overflow:
    """What the requests stream 0 of ``scenario`` plans (unfitted, as the run
    would) give against ``fit``, measured as the fit measures them: planned
    with the local count, the engine counts those near the context (with
    ``request.tokenizer: server`` too, for a fraction of the calls)."""
    # the planner plans with this module's fit; both need numpy, which the
    # command line's option types (FIT_MODES) must not import
    from slogate.scenarios.arrivals import has_arrivals
    from slogate.scenarios.planner import Planner
    from slogate.scenarios.workloads import AgentTraceWorkload

    if isinstance(scenario.workload, AgentTraceWorkload):  # lengths alone: no prompt to build
        return overflow(
            scenario.name, itertools.cycle(scenario.workload.lengths(scenario.name)), fit
        )
    planner = Planner(scenario, scenario.seed, fit=fit, fitting=False)
    turns: Iterable[PlannedTurn]
    if has_arrivals(scenario.load):
        turns = planner.arrivals()
    else:
        turns = (turn for _ in itertools.count() for turn in planner.conversation().turns)
    return overflow(scenario.name, turns, fit, _cut_or_not(planner.fit_count))


def _cut_or_not(count: Count) -> Trim:
    """A trim that only says whether text would keep a token once ``tokens``
    are cut: all the counts need to tell clamped from dropped, one count
    where the search of the cut costs a dozen (each a ``/tokenize`` call)."""
    return lambda text, tokens: (text, tokens) if count(text) > tokens else None
