"""Saturation on the simulated engine, one request at a time (``max_num_seqs=1``):
an open loop at twice its capacity is found past saturation within 60 s and
``--saturation stop`` ends the run, exit 3 with the reason; at half its capacity
the queue stays bounded and nothing is flagged (repeated by
bench/bench_saturation.py)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from loadruns import scenario_file, slogate, summary
from simprobe import chat_body, probe

from slogate.engines.simulated import start_engine

pytestmark = pytest.mark.slow
PROFILE = "llama-3.1-8b@h100"
OUTPUT_TOKENS = 64


@pytest.fixture(scope="module")
def engine():
    with start_engine(PROFILE, max_num_seqs=1) as running:
        yield running


def capacity_rps(url: str) -> float:
    """Requests per second the engine serves one at a time: 1 / a lone request's time."""

    async def lone() -> float:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/v1/models") as response:
                model = (await response.json())["data"][0]["id"]
            body = chat_body("saturation " * 24, OUTPUT_TOKENS, model=model, ignore_eos=True)
            result = await probe(session, f"{url}/v1/chat/completions", body)
            assert result.done and result.usage["completion_tokens"] == OUTPUT_TOKENS
            return result.end_s

    return 1.0 / min(asyncio.run(lone()) for _ in range(3))


def open_loop(tmp_path, engine, rps: float, duration: str, mode: str, cap: int = 4096, *more):
    scenario = scenario_file(
        tmp_path,
        "exact-open",
        workload={"kind": "chat", "text": "prose", "input_tokens": 32,
                  "output_tokens": OUTPUT_TOKENS, "turns": 1},
        load={"rate": {"rps": round(rps, 3), "arrival": "poisson"}, "duration": duration,
              "max_in_flight": cap},
        slo={"ttft_ms": {"p50": 600000}},
    )  # fmt: skip
    out = tmp_path / "out"
    done = slogate(
        "run", str(scenario), "--host", engine.url, "--out", str(out), "--saturation", mode,
        *more, timeout=240,
    )  # fmt: skip
    return done, summary(out)


def test_twice_the_capacity_is_stopped_past_saturation_within_60_s(tmp_path, engine):
    rps = 2 * capacity_rps(engine.url)
    done, s = open_loop(tmp_path, engine, rps, "120s", "stop")
    assert done.returncode == 3, done.stderr[-3000:]
    check = s["run"]["saturation"]
    assert check["mode"] == "stop" and check["stopped"] is True
    found = check["found"]
    assert found["at_s"] <= 60.0, found
    assert found["in_flight_per_s"] > 0.25 * rps and found["ttft_ms_per_s"] > 0
    assert s["verdict"] == "invalid"
    assert any(r.startswith("stopped by --saturation stop: exact-open: past saturation at")
               for r in s["invalid_reasons"])  # fmt: skip
    assert s["run"]["measured_s"] < 70.0  # it did end there
    assert "past saturation at" in done.stderr
    metadata = (tmp_path / "out" / "report.html").read_text().split('id="meta"')[1]
    assert "SaturationFound(" not in metadata and "stopped: True" in metadata  # not a repr


def test_half_the_capacity_is_never_flagged(tmp_path, engine):
    rps = 0.5 * capacity_rps(engine.url)
    done, s = open_loop(tmp_path, engine, rps, "60s", "monitor")
    assert s["run"]["saturation"] == {"mode": "monitor", "found": None, "stopped": False}
    # a busy test machine may still hold the load loop (invalid, exit 3): not saturation
    assert done.returncode == 0 or s["verdict"] == "invalid", done.stderr[-3000:]
    assert not any("saturation" in reason for reason in s["invalid_reasons"])
    assert "past saturation" not in done.stderr


def test_three_times_the_capacity_past_a_small_in_flight_cap_is_stopped_naming_the_engine(
    tmp_path, engine
):
    """A cap of 8 fills within seconds; from then on the requests in flight and
    TTFT from the send are flat, and the queue grows in the dispatcher. One-second
    windows make the detector's six windows six seconds."""
    capacity = capacity_rps(engine.url)
    rps = 3 * capacity
    done, s = open_loop(tmp_path, engine, rps, "60s", "stop", 8, "--window", "1")
    assert done.returncode == 3, done.stderr[-3000:]
    check = s["run"]["saturation"]
    assert check["stopped"] is True
    found = check["found"]
    assert found["held_back"] is True and found["ttft_from_schedule"] is True, found
    assert found["at_s"] <= 20.0, found
    assert found["offered_per_s"] == pytest.approx(round(rps, 3))
    assert found["finished_per_s"] == pytest.approx(capacity, rel=0.35)
    assert f"against {found['offered_per_s']:.3g} offered" in found["reason"]
    assert s["run"]["measured_s"] < 30.0  # it ended there, not at 60 s
    reasons = s["invalid_reasons"]
    assert reasons[0].startswith("stopped by --saturation stop: exact-open: past saturation")
    # the lag is the cap's: the engine's queue, not a generator fault
    assert next(iter(s["generator"]["lag_cause_p99_ms"])) == "in_flight_cap"
    assert not any(r.startswith("load generator lag") for r in reasons), reasons
    assert any(r.startswith("arrivals waited for the in-flight cap of 8") for r in reasons)
