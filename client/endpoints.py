"""Several endpoints of one deployment: their names, and which one the next request goes to.

A run may send to several servers of the same model (replicas without a
router, or several routers): ``--endpoint NAME=URL`` repeated (``slogate run``:
``--host`` repeated). Requests spread over them by one of :data:`SPREADS`:

- ``round-robin``: in turn;
- ``weighted``: in exact proportion to the weights (smooth weighted round
  robin, not by chance);
- ``least-in-flight``: to the endpoint with the fewest of this process's
  requests in flight (ties in turn), as a client-side balancer does.

A conversation (or an agent session) stays on the endpoint its first request
went to unless the run's affinity is ``request`` (see the load side): its
later turns then find their prefix in that server's cache, as a user's
session does behind a sticky balancer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

SPREADS = ("round-robin", "weighted", "least-in-flight")
AFFINITIES = ("conversation", "request")
MAX_ENDPOINTS = 64


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    url: str
    weight: float = 1.0


def parse_endpoint(text: str) -> Endpoint:
    """``NAME=URL`` or a bare ``URL`` (named by its host and port); ValueError
    naming what is wrong."""
    name, sep, url = text.partition("=")
    if not sep or "://" in name:
        name, url = "", text
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r}: expected [NAME=]http(s)://HOST[:PORT]")
    name = name.strip() or parts.netloc
    if any(c.isspace() for c in name):
        raise ValueError(f"{text!r}: an endpoint's name has no spaces")
    return Endpoint(name, url.strip())


def check_endpoints(endpoints: Sequence[Endpoint]) -> None:
    """Names unique, weights positive, not too many: ValueError naming the endpoint."""
    if len(endpoints) > MAX_ENDPOINTS:
        raise ValueError(f"{len(endpoints)} endpoints: at most {MAX_ENDPOINTS}")
    seen: set[str] = set()
    for endpoint in endpoints:
        if endpoint.name in seen:
            raise ValueError(f"endpoint {endpoint.name!r} is named twice")
        seen.add(endpoint.name)
        if not endpoint.weight > 0:
            raise ValueError(f"endpoint {endpoint.name!r}: weight {endpoint.weight} must be > 0")


class WeightedRoundRobin:
    """Picks indexes in exact weight proportions (smooth weighted round robin),
    so N picks split as declared rather than by chance."""

    def __init__(self, weights: list[float]) -> None:
        self.weights = weights
        self.total = sum(weights)
        self.current = [0.0] * len(weights)

    def next(self) -> int:
        for i, w in enumerate(self.weights):
            self.current[i] += w
        best = max(range(len(self.weights)), key=self.current.__getitem__)
        self.current[best] -= self.total
        return best


class Spread:
    """Chooses the endpoint of the next conversation (or request)."""

    def __init__(self, endpoints: Sequence[Endpoint], policy: str) -> None:
        if policy not in SPREADS:
            raise ValueError(f"spread {policy!r}: expected one of {', '.join(SPREADS)}")
        self.policy = policy
        weights = [e.weight if policy == "weighted" else 1.0 for e in endpoints]
        self._turns = WeightedRoundRobin(weights)
        self._count = len(endpoints)

    def pick(self, in_flight: Sequence[int]) -> int:
        """The index of the endpoint to use, given each one's requests in flight."""
        if self.policy != "least-in-flight":
            return self._turns.next()
        fewest = min(in_flight)
        for _ in range(self._count):
            index = self._turns.next()
            if in_flight[index] == fewest:
                return index
        return in_flight.index(fewest)
