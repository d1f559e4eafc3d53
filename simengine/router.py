"""Which replica serves a request: round-robin, least-loaded or prefix-aware, with session affinity.

The policies of the routers teams put in front of their replicas, kept pure
(no HTTP, no clock) so each decision can be checked by hand:

- ``round-robin``: replicas in turn, as a Kubernetes Service or a plain load
  balancer spreads connections;
- ``least-loaded``: the replica with the fewest requests in flight (ties in
  turn), as llm-d's queue scorer and SGLang's router do for a cold prompt;
- ``prefix-aware``: the replica whose cache already holds the longest part of
  the prompt's beginning, so requests that share a prefix (a RAG corpus's
  popular documents, a conversation's history) land on the cache that has
  it. As in llm-d's prefix-cache scorer, the prompt's text is cut into blocks
  of :data:`BLOCK_CHARS` characters and each block is known by the hash of
  everything up to its end; the router remembers the blocks it sent to each
  replica (the most recent, as many as the replica's KV cache holds). A match
  of less than :data:`MATCH_SHARE` of the prompt's blocks (a system prompt
  every request starts with) decides nothing, as SGLang's ``cache_threshold``
  does: the request goes to the least loaded replica. A prompt whose longest
  match several replicas share goes to the least loaded of them; a match
  that would put a replica :data:`BALANCE_THRESHOLD` requests above the least
  loaded yields to the least loaded (SGLang's ``balance_abs_threshold``), so
  one hot prefix cannot pile up on one replica.

Every policy honours session affinity first: a request carrying the session
token the router gave an earlier reply (:data:`SESSION_HEADER`, as llm-d's
session-affinity scorer does) goes back to that replica; so does one carrying
an id the client chose for its conversation (:data:`SESSION_ID_HEADER`, as
Dynamo's router binds ``X-Dynamo-Session-ID``): its first request is routed by
the policy and binds the id to that replica (the most recent
:data:`MAX_SESSION_IDS` ids are kept).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

POLICIES = ("round-robin", "least-loaded", "prefix-aware")
BLOCK_CHARS = 64
MAX_BLOCKS = 256  # the prompt's first 16 KiB of text decide
BALANCE_THRESHOLD = 32
MATCH_SHARE = 0.1  # a match of less of the prompt (a shared system prompt) decides nothing
SESSION_HEADER = "x-session-token"
SESSION_COOKIE = "llm-d-session"  # the same token as a cookie, as llm-d's later releases
SESSION_ID_HEADER = "x-dynamo-session-id"
MAX_SESSION_IDS = 100_000
CHARS_PER_TOKEN = 4  # English prose, for sizing a replica's remembered blocks


def prefix_blocks(text: str, block_chars: int = BLOCK_CHARS, limit: int = MAX_BLOCKS) -> list[int]:
    """The hash of each whole block of ``text``'s beginning, each one covering
    everything before it too (a running CRC-32), so two prompts share block i
    only when they agree on all of the first ``(i + 1) * block_chars`` characters."""
    data = text.encode("utf-8", "surrogatepass")
    hashes = []
    running = 0
    for start in range(0, min(len(data) // block_chars, limit) * block_chars, block_chars):
        running = zlib.crc32(data[start : start + block_chars], running)
        hashes.append(running)
    return hashes


def session_token(replica: str) -> str:
    """The opaque token a reply carries so the next turn returns to ``replica``."""
    return base64.urlsafe_b64encode(replica.encode()).decode()


def token_replica(token: str) -> str | None:
    """The replica a session token names, None for anything the router did not issue."""
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        return None


@dataclass
class ReplicaLoad:
    """What the router knows of one replica: requests in flight, requests sent
    by reason, those it answered with a server error, and the prompt blocks
    it sent there (oldest first)."""

    name: str
    capacity_blocks: int
    in_flight: int = 0
    errors: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    blocks: OrderedDict[int, None] = field(default_factory=OrderedDict)

    def matched(self, hashes: Sequence[int]) -> int:
        """How many of the prompt's leading blocks this replica was sent before."""
        count = 0
        for h in hashes:
            if h not in self.blocks:
                break
            count += 1
        return count

    def remember(self, hashes: Sequence[int]) -> None:
        for h in hashes:
            self.blocks[h] = None
            self.blocks.move_to_end(h)
        while len(self.blocks) > self.capacity_blocks:
            self.blocks.popitem(last=False)


@dataclass(frozen=True)
class Decision:
    index: int
    reason: str  # session, prefix, balance, least-loaded, round-robin


class Router:
    """Chooses a replica for each request and keeps the counts the router's
    ``/metrics`` shows; call :meth:`finished` when the chosen replica is done."""

    def __init__(self, names: Sequence[str], policy: str, capacity_tokens: int) -> None:
        if policy not in POLICIES:
            raise ValueError(f"router {policy!r}: expected one of {', '.join(POLICIES)}")
        if not names:
            raise ValueError("a router needs at least one replica")
        capacity = max(1, capacity_tokens * CHARS_PER_TOKEN // BLOCK_CHARS)
        self.policy = policy
        self.replicas = [ReplicaLoad(name, capacity) for name in names]
        self._next = 0
        self._bound: OrderedDict[str, int] = OrderedDict()  # client's session id -> replica

    def choose(
        self, prompt: str, token: str | None = None, session_id: str | None = None
    ) -> Decision:
        """The replica for a request with this prompt text (and session token,
        or the client's own session id)."""
        bound = self._bound.get(session_id) if session_id else None
        if session_id and bound is not None:
            self._bound.move_to_end(session_id)
            decision = Decision(bound, "session")
        else:
            decision = self._decide(prompt, token)
            if session_id:
                self._bound[session_id] = decision.index
                if len(self._bound) > MAX_SESSION_IDS:
                    self._bound.popitem(last=False)
        replica = self.replicas[decision.index]
        replica.in_flight += 1
        replica.decisions[decision.reason] = replica.decisions.get(decision.reason, 0) + 1
        return decision

    def finished(self, index: int, failed: bool = False) -> None:
        """The chosen replica is done; ``failed``: with a server error (5xx)."""
        self.replicas[index].in_flight -= 1
        self.replicas[index].errors += failed

    def _decide(self, prompt: str, token: str | None) -> Decision:
        by_name = {r.name: i for i, r in enumerate(self.replicas)}
        named = token_replica(token) if token else None
        if named in by_name:
            return Decision(by_name[named], "session")
        if self.policy == "round-robin":
            index = self._next
            self._next = (index + 1) % len(self.replicas)
            return Decision(index, "round-robin")
        if self.policy == "least-loaded":
            return Decision(self._least_loaded(range(len(self.replicas))), "least-loaded")
        return self._by_prefix(prefix_blocks(prompt))

    def _by_prefix(self, hashes: list[int]) -> Decision:
        everyone = range(len(self.replicas))
        matches = [r.matched(hashes) for r in self.replicas]
        best = max(matches)
        holders = [i for i in everyone if matches[i] == best]
        if best < MATCH_SHARE * len(hashes) or len(holders) == len(self.replicas):
            index, reason = self._least_loaded(everyone), "least-loaded"
        else:
            index, reason = self._least_loaded(holders), "prefix"
            lightest = min(r.in_flight for r in self.replicas)
            if self.replicas[index].in_flight - lightest >= BALANCE_THRESHOLD:
                index, reason = self._least_loaded(everyone), "balance"
        self.replicas[index].remember(hashes)
        return Decision(index, reason)

    def _least_loaded(self, candidates: Sequence[int] | range) -> int:
        """The candidate with the fewest requests in flight; ties go in turn,
        so an idle deployment still spreads its requests."""
        n = len(self.replicas)
        order = sorted(candidates, key=lambda i: (self.replicas[i].in_flight, (i - self._next) % n))
        chosen = order[0]
        self._next = (chosen + 1) % n
        return chosen
