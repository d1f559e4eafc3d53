"""The simulated engine's scheduling policies, as vLLM 0.32's scheduler has them:
FCFS orders the waiting queue by arrival and ignores ``priority``; the priority
policy orders it by (priority, arrival, request id), lower first, requeues a
preempted request at its rank and preempts the running request last in
(priority, arrival) order. Run on a virtual clock: no server, no sleeping."""

from __future__ import annotations

import math

import pytest

from slogate.simengine.profiles import ProfileError, load_profile
from slogate.simengine.scheduler import Scheduler, Sequence, Status

PROFILE = "llama-3.1-8b@h100"
HIGH, LOW = 0, 10


def scheduler(policy: str, **settings: object) -> Scheduler:
    return Scheduler(load_profile(PROFILE, scheduling_policy=policy, **settings))


def admitted_order(policy: str, seqs: list[Sequence]) -> list[str]:
    """The request ids in the order one-at-a-time admission takes them."""
    sched = scheduler(policy, max_num_seqs=1)
    for seq in seqs:
        sched.add(seq)
    order = []
    now = 0.0
    while sched.has_work():
        step = sched.schedule()
        order += [s.request_id for s in step.seqs if s.request_id not in order]
        now += step.duration
        sched.complete(step, now)
    return order


def seq(request_id: str, priority: int, arrival: float, output: int = 2) -> Sequence:
    return Sequence(request_id, 32, output, arrival=arrival, priority=priority)


def test_priority_orders_by_priority_then_arrival_then_id() -> None:
    seqs = [seq("d", 5, 0.0), seq("c", 1, 2.0), seq("b", 1, 1.0), seq("a", 1, 1.0)]
    assert admitted_order("priority", seqs) == ["a", "b", "c", "d"]


def test_fcfs_ignores_priority() -> None:
    seqs = [seq("d", 5, 0.0), seq("c", 1, 2.0), seq("b", 1, 1.0), seq("a", 1, 1.0)]
    assert admitted_order("fcfs", seqs) == ["d", "c", "b", "a"]


def test_priority_preempts_the_lowest_class() -> None:
    """The low-priority request admitted first, the high one after it, then the
    KV cache full: the victim is the low one under the priority policy (its
    tokens already scheduled in the step given back), the last admitted (the
    high one) under FCFS."""
    for policy, victim, batch in (("priority", "low", ["high"]), ("fcfs", "high", ["low"])):
        sched = scheduler(policy, num_gpu_blocks=5, block_size=16, max_num_seqs=2)
        low, high = seq("low", LOW, 0.0, output=30), seq("high", HIGH, 1.0, output=30)
        sched.add(low)
        step = sched.schedule()  # low alone: its prompt and first token
        now = step.duration
        sched.complete(step, now)
        sched.add(high)
        while sched.num_preemptions == 0 and sched.has_work():
            step = sched.schedule()
            now += step.duration
            sched.complete(step, now)
        assert sched.num_preemptions == 1, policy
        preempted = low if low.num_preemptions else high
        assert preempted.request_id == victim, policy
        assert preempted.status == Status.WAITING
        assert [s.request_id for s in step.seqs] == batch, policy  # the victim left the step


def test_a_preempted_request_keeps_its_rank_under_priority() -> None:
    sched = scheduler("priority", max_num_seqs=1)
    first, later = seq("first", HIGH, 0.0), seq("later", HIGH, 5.0)
    sched.add(later)
    sched.running.append(first)  # as if admitted: its preemption requeues it
    first.status = Status.RUNNING
    sched._preempt(first)
    assert [s.request_id for s in sched.waiting] == ["first", "later"]
    sched.add(seq("top", HIGH - 1, 9.0))
    assert [s.request_id for s in sched.waiting] == ["top", "first", "later"]


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ProfileError, match="scheduling_policy 'lifo': expected one of"):
        load_profile(PROFILE, scheduling_policy="lifo")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def contended_ttft(policy: str) -> dict[int, float]:
    """TTFT p95 per class when two classes' requests arrive alternately at 1.3
    times what one sequence at a time can serve."""
    sched = scheduler(policy, max_num_seqs=1)
    probe = seq("probe", 0, 0.0, output=16)
    sched.add(probe)
    service = 0.0
    while sched.has_work():
        step = sched.schedule()
        service += step.duration
        sched.complete(step, service)
    gap = service / 1.3
    arrivals = [
        seq(f"r{i:03d}", (HIGH, LOW)[i % 2], (i + 1) * gap + service, output=16) for i in range(80)
    ]
    now = service
    pending = list(arrivals)
    while pending or sched.has_work():
        while pending and pending[0].arrival <= now:
            sched.add(pending.pop(0))
        step = sched.schedule()
        if not step.seqs:
            now = pending[0].arrival
            continue
        now += step.duration
        sched.complete(step, now)
    ttft: dict[int, list[float]] = {HIGH: [], LOW: []}
    for s in arrivals:
        assert s.first_token_time is not None
        ttft[s.priority].append(s.first_token_time - s.arrival)
    return {cls: p95(values) for cls, values in ttft.items()}


def test_under_contention_the_high_class_waits_less_only_with_the_policy() -> None:
    by_priority = contended_ttft("priority")
    assert by_priority[HIGH] < 0.25 * by_priority[LOW], by_priority
    fcfs = contended_ttft("fcfs")
    assert fcfs[HIGH] == pytest.approx(fcfs[LOW], rel=0.1), fcfs
