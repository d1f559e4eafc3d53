"""The server's own account of every request: when it arrived, when each output
chunk really left.

Times are ``time.perf_counter_ns()`` instants, CLOCK_MONOTONIC on Linux, which
all processes of the machine share, so they compare directly with a client's.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class TruthEntry:
    """One request. ``chunk_ns``/``chunk_tokens``: the instant each output chunk
    was handed to the kernel and the tokens it carried. ``outcome``: ``done``,
    ``error`` (an error event), ``cut``, ``abort``, ``status`` (an HTTP error),
    or ``client_closed``."""

    request_id: int
    path: str
    received_ns: int
    status: int = 200
    outcome: str = "done"
    prompt_tokens: int = 0
    output_tokens: int = 0
    chunk_ns: array = field(default_factory=lambda: array("q"))
    chunk_tokens: array = field(default_factory=lambda: array("l"))

    def note_chunk(self, sent_ns: int, tokens: int) -> None:
        self.chunk_ns.append(sent_ns)
        self.chunk_tokens.append(tokens)
        self.output_tokens += tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "path": self.path,
            "received_ns": self.received_ns,
            "status": self.status,
            "outcome": self.outcome,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "chunk_ns": self.chunk_ns.tolist(),
            "chunk_tokens": self.chunk_tokens.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TruthEntry:
        return cls(
            request_id=data["request_id"],
            path=data["path"],
            received_ns=data["received_ns"],
            status=data["status"],
            outcome=data["outcome"],
            prompt_tokens=data["prompt_tokens"],
            output_tokens=data["output_tokens"],
            chunk_ns=array("q", data["chunk_ns"]),
            chunk_tokens=array("l", data["chunk_tokens"]),
        )

    @property
    def ttft_ns(self) -> int | None:
        return self.chunk_ns[0] - self.received_ns if self.chunk_ns else None
