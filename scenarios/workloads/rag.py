"""Retrieval-augmented generation: k documents from a pool, then a question.

The pool is the same for every stream and worker (it is drawn from the seed
alone), and documents are picked by a Zipf popularity, so how often a prompt
starts with a document another request already sent, and therefore how often a
prefix cache can hit, is set by ``documents.zipf`` and ``documents.pool``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slogate.scenarios.distributions import Dist
from slogate.scenarios.limits import MAX_COUNT, MAX_DOCUMENTS
from slogate.scenarios.model import PlannedTurn
from slogate.scenarios.prompt_text import nonce
from slogate.scenarios.schema import (
    Reader,
    choice,
    integer,
    join,
    nested,
    number,
    optional,
    required,
    section_shape,
)
from slogate.scenarios.workloads.common import (
    SALT_DOCUMENTS,
    TEXT_FIELD,
    Context,
    SystemPrompt,
    SystemTexts,
    counts,
    seconds,
    system,
    tokens,
)

QUESTION = "Using only the documents above, answer this question ({tag}):\n"


@dataclass(frozen=True, slots=True)
class Documents:
    """``pool`` documents of ``tokens`` length; rank r is picked with weight
    1 / (r + 1) ** ``zipf`` (0 = uniform)."""

    pool: int
    tokens: Dist
    zipf: float


DOCUMENT_FIELDS = {
    "pool": optional(integer(ge=1, le=MAX_DOCUMENTS), 200),
    "tokens": tokens({"dist": "lognormal", "median": 700, "p90": 1400, "min": 100, "max": 4000}),
    "zipf": optional(number(ge=0), 1.0),
}


def read_documents(reader: Reader, value: Any, path: str) -> Documents | None:
    f = reader.section(value, path, DOCUMENT_FIELDS)
    return None if f is None else Documents(**f)


FIELDS = {
    "kind": required(choice("rag")),
    "text": TEXT_FIELD,
    "system": system({"tokens": 64, "shared": True}),
    "documents": nested(read_documents, section_shape(DOCUMENT_FIELDS), {}),
    "docs_per_request": counts(4, MAX_COUNT),
    "question_tokens": tokens({"dist": "uniform", "min": 12, "max": 60}),
    "output_tokens": tokens({"dist": "lognormal", "median": 120, "p90": 350, "max": 1024}),
    "think_time_s": seconds(0),
}


@dataclass(frozen=True, slots=True)
class RagWorkload:
    documents: Documents
    docs_per_request: Dist
    question_tokens: Dist
    output_tokens: Dist
    think_time_s: Dist
    system: SystemPrompt
    text: str = "prose"
    kind: str = "rag"

    @property
    def corpus(self) -> str:
        return self.text

    def planner(self, ctx: Context) -> RagPlanner:
        return RagPlanner(ctx, self)


def build(reader: Reader, f: dict[str, Any], path: str) -> RagWorkload | None:
    f.pop("kind")
    least = f["docs_per_request"].lower
    if least > f["documents"].pool:
        reader.problem(
            join(path, "docs_per_request"),
            f"expected at most documents.pool ({f['documents'].pool}) documents per "
            f"request, got a minimum of {least:g}",
        )
        return None
    return RagWorkload(**f)


class RagPlanner:
    def __init__(self, ctx: Context, spec: RagWorkload) -> None:
        import numpy as np

        self.ctx = ctx
        self.spec = spec
        self.systems = SystemTexts(ctx, spec.system)
        docs = spec.documents
        rng = ctx.shared_rng(SALT_DOCUMENTS)
        self.documents = [
            ctx.writer.fill(rng, int(size), f"Document {j + 1}:\n", suffix="\n")
            for j, size in enumerate(docs.tokens.sample_int(rng, docs.pool))
        ]
        weights = 1.0 / np.arange(1, docs.pool + 1) ** docs.zipf
        self.popularity = weights / weights.sum()

    def conversation(self, index: int) -> tuple[PlannedTurn, ...]:
        return (self.request(index, 0),)

    def request(self, index: int, event: int) -> PlannedTurn:
        del event
        ctx, spec = self.ctx, self.spec
        system, system_tokens, _ = self.systems.next()
        k = min(ctx.draw(spec.docs_per_request), spec.documents.pool)
        picked = ctx.rng.choice(spec.documents.pool, size=k, replace=False, p=self.popularity)
        header = QUESTION.format(tag=nonce(ctx.rng))
        prefix = "".join(self.documents[i][0] for i in picked) + header
        prefix_tokens = sum(self.documents[i][1] for i in picked) + ctx.writer.count(header)
        question = ctx.draw(spec.question_tokens)
        text, used = ctx.writer.fill(ctx.rng, prefix_tokens + question, prefix, "", prefix_tokens)
        output = ctx.draw(spec.output_tokens)
        return ctx.turn(
            index,
            0,
            user_text=text,
            max_tokens=output,
            intended_input_tokens=system_tokens + used,
            intended_output_tokens=output,
            system_text=system,
            think_time_s=float(spec.think_time_s.sample(ctx.rng, 1)[0]),
            prefix_id="docs:" + ",".join(str(i + 1) for i in picked),
        )
