"""The load timeline: stages placed in time, warm-up, open-loop shards."""

from slogate.locustfiles.timeline import build_timeline
from slogate.scenarios.model import LoadSpec, RateSpec, Stage


def test_single_stage_from_duration_and_users():
    t = build_timeline(LoadSpec(users=8, spawn_rate=2, duration_s=60, warmup_s=10))
    assert [(p.name, p.start_s, p.end_s, p.users, p.spawn_rate) for p in t.phases] == [
        ("main", 0.0, 60.0, 8, 2)
    ]
    assert t.total_s == 60 and t.measured_s == 50
    assert t.in_warmup(9.99) and not t.in_warmup(10.0)
    assert t.phase_at(60.0) is None


def test_stages_follow_each_other_and_inherit_users():
    load = LoadSpec(
        users=4,
        duration_s=0,
        stages=(
            Stage("ramp", 10, users=4, spawn_rate=1),
            Stage("step", 20, users=16),
            Stage("soak", 30),
        ),
    )
    t = build_timeline(load)
    assert [(p.name, p.start_s, p.end_s, p.users) for p in t.phases] == [
        ("ramp", 0, 10, 4),
        ("step", 10, 30, 16),
        ("soak", 30, 60, 16),
    ]
    assert t.stage_name(29.9) == "step"
    assert t.stage_name(75) == "soak"  # requests finishing after the end count in the last stage
    assert t.max_users() == 16


def test_open_loop_runs_one_dispatcher_per_shard_and_keeps_stage_rates():
    load = LoadSpec(
        rate=RateSpec(rps=10),
        stages=(Stage("base", 30), Stage("spike", 10, rate=RateSpec(rps=50))),
    )
    t = build_timeline(load, shards=3)
    assert [(p.users, p.rate.rps) for p in t.phases] == [(3, 10), (3, 50)]


def test_warmup_longer_than_the_run_is_clamped():
    t = build_timeline(LoadSpec(users=1, duration_s=5, warmup_s=30))
    assert t.warmup_s == 5 and t.measured_s == 0
