"""Fault injection: the failures a load test's error accounting must classify.

Each request draws its faults once, on arrival, from the current settings
(:class:`Faults`), which can be set at start (``--fault KEY=VALUE``) and changed
during a run (``POST /admin/faults``). Rates are probabilities per request.

===================  =====================================================
``http_429_rate``    reject with HTTP 429 (rate limited), before any work
``http_500_rate``    reject with HTTP 500
``http_503_rate``    reject with HTTP 503 (overloaded)
``stream_error_rate`` ``data: {"error": {...}}`` mid-stream, then ``[DONE]``
``stream_cut_rate``  close the connection mid-stream: no finish, no ``[DONE]``
``malformed_rate``   one chunk with broken JSON mid-stream, then carry on
``stall_s``          length of a stall (seconds, wall clock) mid-stream;
``stall_rate``       stalls hit this fraction of streams...
``stall_count``      ...and/or the next N streams (1 = stall once)
``header_delay_s``   delay before the response headers (seconds, wall clock),
``header_delay_rate`` applied to this fraction of requests
``invalid_json_rate`` a structured-output answer (``response_format``) cut
                     short of its closing brace: not JSON, not its schema
===================  =====================================================

Mid-stream faults strike after a uniformly drawn number of output tokens (at
least one, before the last; responses of one token get none), so TTFT is
unaffected and the stream ends early.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


class FaultError(ValueError):
    """A fault setting that does not exist or is out of range."""


@dataclass(frozen=True)
class Faults:
    """The current fault settings (all off by default)."""

    http_429_rate: float = 0.0
    http_500_rate: float = 0.0
    http_503_rate: float = 0.0
    stream_error_rate: float = 0.0
    stream_cut_rate: float = 0.0
    malformed_rate: float = 0.0
    stall_s: float = 0.0
    stall_rate: float = 0.0
    stall_count: int = 0
    header_delay_s: float = 0.0
    header_delay_rate: float = 0.0
    invalid_json_rate: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise FaultError(f"fault {f.name} must not be negative")
            if f.name.endswith("_rate") and value > 1:
                raise FaultError(f"fault {f.name} is a probability in [0, 1]")
        if self.http_429_rate + self.http_500_rate + self.http_503_rate > 1:
            raise FaultError("the HTTP error rates add up to more than 1")

    def updated(self, changes: Mapping[str, Any]) -> Faults:
        """A copy with ``changes`` applied (values may be text, as from the CLI)."""
        types = {f.name: f.type for f in fields(self)}
        converted: dict[str, Any] = {}
        for key, value in changes.items():
            if key not in types:
                raise FaultError(f"unknown fault {key!r}; known: {', '.join(types)}")
            try:
                converted[key] = int(value) if types[key] == "int" else float(value)
            except (TypeError, ValueError) as exc:
                raise FaultError(f"fault {key}: expected a number, got {value!r}") from exc
        return replace(self, **converted)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """One request's faults; token positions count output tokens sent."""

    http_status: int | None = None
    header_delay_s: float = 0.0
    error_at: int | None = None
    cut_at: int | None = None
    malformed_at: int | None = None
    stall_at: int | None = None
    stall_s: float = 0.0
    invalid_json: bool = False


NO_FAULTS = FaultPlan()


class FaultInjector:
    """Holds the settings and draws each request's :class:`FaultPlan`."""

    def __init__(self, faults: Faults, rng: random.Random) -> None:
        self.faults = faults
        self._rng = rng
        self._stalls_left = faults.stall_count

    def set(self, faults: Faults) -> None:
        self.faults = faults
        self._stalls_left = faults.stall_count

    def draw(self, planned_tokens: int) -> FaultPlan:
        """Faults for a request that will generate ``planned_tokens`` tokens."""
        f = self.faults
        if f == Faults():
            return NO_FAULTS
        rng = self._rng
        u = rng.random()
        status = None
        if u < f.http_429_rate:
            status = 429
        elif u < f.http_429_rate + f.http_500_rate:
            status = 500
        elif u < f.http_429_rate + f.http_500_rate + f.http_503_rate:
            status = 503
        delay = f.header_delay_s if rng.random() < f.header_delay_rate else 0.0
        if status is not None:
            return FaultPlan(http_status=status, header_delay_s=delay)

        def position(rate: float) -> int | None:
            """A token position strictly inside the output, or None."""
            if planned_tokens < 2 or rng.random() >= rate:
                return None
            return rng.randint(1, planned_tokens - 1)

        stall_at = None
        if f.stall_s > 0:
            if self._stalls_left > 0:
                self._stalls_left -= 1
                stall_at = position(1.0)
            else:
                stall_at = position(f.stall_rate)
        return FaultPlan(
            header_delay_s=delay,
            error_at=position(f.stream_error_rate),
            cut_at=position(f.stream_cut_rate),
            malformed_at=position(f.malformed_rate),
            stall_at=stall_at,
            stall_s=f.stall_s,
            # drawn only when set: the other faults' draws stay as they were
            invalid_json=f.invalid_json_rate > 0 and rng.random() < f.invalid_json_rate,
        )
