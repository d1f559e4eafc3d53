"""The router's policies, decision by decision (simengine/router.py): pure, no server."""

from __future__ import annotations

import pytest

from slogate.simengine import router as router_module
from slogate.simengine.router import (
    BALANCE_THRESHOLD,
    BLOCK_CHARS,
    Router,
    prefix_blocks,
    session_token,
    token_replica,
)

NAMES = ["replica-0", "replica-1", "replica-2"]
CAPACITY = 100_000  # tokens: nothing forgotten in these tests


def text(seed: str, blocks: int) -> str:
    """A prompt of ``blocks`` whole blocks, each told apart by ``seed``."""
    return "".join(f"{seed}{i:04d}".ljust(BLOCK_CHARS, "x") for i in range(blocks))


def test_prefix_blocks_share_hashes_exactly_as_far_as_the_texts_agree() -> None:
    shared = text("doc", 3)
    a = prefix_blocks(shared + text("qa", 2))
    b = prefix_blocks(shared + text("qb", 2))
    assert len(a) == len(b) == 5
    assert a[:3] == b[:3]
    assert a[3] != b[3] and a[4] != b[4]
    assert prefix_blocks("y" * (BLOCK_CHARS - 1)) == []  # only whole blocks
    assert prefix_blocks(text("z", 300)) == prefix_blocks(text("z", 300))[:256]
    assert len(prefix_blocks(text("z", 300))) == 256


def test_round_robin_takes_the_replicas_in_turn() -> None:
    router = Router(NAMES, "round-robin", CAPACITY)
    chosen = [router.choose("p").index for _ in range(7)]
    assert chosen == [0, 1, 2, 0, 1, 2, 0]
    assert [r.decisions for r in router.replicas] == [
        {"round-robin": 3},
        {"round-robin": 2},
        {"round-robin": 2},
    ]
    assert [r.in_flight for r in router.replicas] == [3, 2, 2]
    router.finished(0)
    assert router.replicas[0].in_flight == 2


def test_least_loaded_picks_the_fewest_in_flight_and_spreads_ties() -> None:
    router = Router(NAMES, "least-loaded", CAPACITY)
    assert [router.choose("p").index for _ in range(3)] == [0, 1, 2]  # all idle: in turn
    router.finished(1)
    assert router.choose("p").index == 1  # the one with a request fewer
    router.finished(2)
    router.finished(2)
    assert router.choose("p").index == 2


def test_prefix_aware_sends_a_shared_prefix_where_it_went_before() -> None:
    router = Router(NAMES, "prefix-aware", CAPACITY)
    system = text("sys", 1)  # every prompt starts with it: a twentieth decides nothing
    docs = {name: system + text(name, 18) for name in ("a", "b", "c")}
    first = {name: router.choose(doc + text("q1", 1)) for name, doc in docs.items()}
    assert sorted(d.index for d in first.values()) == [0, 1, 2]  # new prefixes: spread
    assert {d.reason for d in first.values()} == {"least-loaded"}
    for name, doc in docs.items():
        again = router.choose(doc + text("q2", 1))
        assert again == type(again)(first[name].index, "prefix")


def test_prefix_aware_yields_to_balance_past_the_threshold() -> None:
    router = Router(NAMES, "prefix-aware", CAPACITY)
    hot = text("hot", 4)
    home = router.choose(hot).index
    for _ in range(BALANCE_THRESHOLD - 1):
        assert router.choose(hot).index == home
    spill = router.choose(hot)
    assert spill.reason == "balance" and spill.index != home


def test_prefix_aware_forgets_the_oldest_blocks_past_the_cache() -> None:
    router = Router(NAMES, "prefix-aware", capacity_tokens=4 * BLOCK_CHARS // 4)
    first = router.choose(text("old", 4)).index
    router.finished(first)
    for i in range(3):  # other prompts on the same replica push the old one out
        router.replicas[first].remember(prefix_blocks(text(f"new{i}", 4)))
    assert router.replicas[first].matched(prefix_blocks(text("old", 4))) == 0


def test_a_session_token_brings_the_request_back_to_its_replica() -> None:
    router = Router(NAMES, "round-robin", CAPACITY)
    token = session_token("replica-2")
    assert token_replica(token) == "replica-2"
    assert [router.choose("p", token).index for _ in range(3)] == [2, 2, 2]
    assert router.replicas[2].decisions == {"session": 3}
    assert router.choose("p", session_token("replica-9")).index == 0  # unknown: the policy
    assert router.choose("p", "%%%not-base64").reason == "round-robin"


def test_a_clients_session_id_binds_its_conversation_to_the_first_replica() -> None:
    """Dynamo's way: the client names the conversation; its first request goes
    by the policy (round-robin) and the id keeps the rest there."""
    router = Router(NAMES, "round-robin", CAPACITY)
    first = [router.choose("p", session_id=f"conv-{i}").index for i in range(3)]
    assert first == [0, 1, 2]
    again = [router.choose("p", session_id=f"conv-{i}") for i in (2, 0, 1, 2)]
    assert [(d.index, d.reason) for d in again] == [(2, "session"), (0, "session"),
                                                   (1, "session"), (2, "session")]  # fmt: skip
    assert router.choose("p").index == 0  # no id: round-robin goes on where it was
    assert router.choose("p", session_id="").reason == "round-robin"


def test_a_router_forgets_the_oldest_session_ids_past_its_bound(monkeypatch) -> None:
    monkeypatch.setattr(router_module, "MAX_SESSION_IDS", 2)
    router = Router(NAMES, "round-robin", CAPACITY)
    for i in range(3):
        router.choose("p", session_id=f"conv-{i}")  # conv-0 on 0, conv-1 on 1, conv-2 on 2
    assert router.choose("p", session_id="conv-2").reason == "session"
    assert router.choose("p", session_id="conv-0").reason == "round-robin"  # forgotten


def test_a_router_refuses_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="round-robin, least-loaded, prefix-aware"):
        Router(NAMES, "random", CAPACITY)
