"""llama.cpp as an engine a tune restarts (engines/tunable_served.py), on the
real llama-server: each treatment's settings are the ones the server runs with
(its own /slots and log say so), its caches are emptied between warm-up and
measurement, a bad level fails before any start, a crash is seen; and a failed
run's diagnosis gives the treatments around the settings it used.

Marker ``llamacpp``: CI installs the engine (`make llama-cpp`); without it these
tests fail saying how, or are skipped with ``SLOGATE_SKIP_LLAMACPP=1``.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from diagnosis_cases import Case, write_scenario
from enginewire import get_json
from llamaservers import require_llama_cpp
from loadruns import slogate
from treatments import crash

from slogate.engines.llamacpp import MODEL_ALIAS, LlamaServerConfig
from slogate.engines.tunable import EngineStartFailed
from slogate.engines.tunable_served import LlamaCppUnderTune, ServedTreatment
from slogate.studies.tune_from import treatments_from_run

pytestmark = [pytest.mark.llamacpp, pytest.mark.xdist_group("llamacpp")]

MIB = 1024**2
DATA = Path(__file__).parents[1] / "data" / "tune_from"
PROMPT = "Explain how a bicycle works, part by part. " * 12


@pytest.fixture(scope="module")
def engine() -> LlamaCppUnderTune:
    require_llama_cpp()
    # one thread (tests/real/test_llamacpp_e2e.py says why); -lv 4 logs the context's batch sizes
    return LlamaCppUnderTune(LlamaServerConfig(threads=1, extra_args=("-lv", "4")))


@contextmanager
def started(
    engine: LlamaCppUnderTune, settings: dict[str, str], log_dir: Path
) -> Iterator[ServedTreatment]:
    treatment = engine.start(settings, log_dir)
    try:
        yield treatment
    finally:
        treatment.stop()


def complete(url: str, prompt: str = PROMPT) -> dict[str, Any]:
    body = {"model": MODEL_ALIAS, "prompt": prompt, "max_tokens": 4, "temperature": 0}
    request = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return dict(json.load(response))


def cached_tokens(answer: dict[str, Any]) -> int:
    """The prompt tokens llama-server took from its slot's cache."""
    return int(answer["usage"]["prompt_tokens_details"]["cached_tokens"])


@pytest.mark.parametrize(
    "settings",
    [
        {"parallel": "2", "ctx_size": "4096", "ubatch_size": "128"},
        {"parallel": "3", "ctx_size": "6144", "batch_size": "256", "ubatch_size": "256",
         "flash_attn": "off"},
    ],
    ids=["two-slots", "three-slots"],
)  # fmt: skip
def test_each_treatment_runs_with_its_settings(
    engine: LlamaCppUnderTune, settings: dict[str, str], tmp_path: Path
) -> None:
    with started(engine, settings, tmp_path) as treatment:
        assert treatment.alive() and treatment.startup_s > 0
        slots = get_json(treatment.url + "/slots")
        parallel, ctx = int(settings["parallel"]), int(settings["ctx_size"])
        assert len(slots) == parallel
        assert {s["n_ctx"] for s in slots} == {ctx // parallel}
        log = (tmp_path / "engine.log").read_text()
        # llama_context's own account of the batch sizes and flash attention
        assert re.search(rf"n_ubatch\s+= {settings['ubatch_size']}\n", log), log[-3000:]
        assert re.search(rf"n_batch\s+= {settings.get('batch_size', '2048')}\n", log), log[-3000:]
        flash = {"off": "disabled"}.get(settings.get("flash_attn", ""), r"\w+")
        assert re.search(rf"flash_attn\s+= {flash}\n", log), log[-3000:]
        complete(treatment.url)
        peak = treatment.peak_memory_bytes()
        assert peak is not None and peak > 50 * MIB  # the model is mapped and read
    assert not treatment.alive()


def test_reset_caches_erases_every_slot(engine: LlamaCppUnderTune, tmp_path: Path) -> None:
    with started(engine, {"parallel": "2", "ctx_size": "4096"}, tmp_path) as treatment:
        assert cached_tokens(complete(treatment.url)) == 0
        warm = cached_tokens(complete(treatment.url))
        assert warm > 50, "a repeated prompt is served from its slot's cache"
        treatment.reset_caches()
        assert cached_tokens(complete(treatment.url)) == 0


def test_a_prompt_the_slot_moved_on_from_is_not_restored_after_reset(
    engine: LlamaCppUnderTune, tmp_path: Path
) -> None:
    """llama-server keeps a slot's previous prompt in its RAM prompt cache and
    restores it for a later request (120 of these tokens, with its default
    --cache-ram): with that cache off, the reset leaves nothing to restore."""
    with started(engine, {"parallel": "1", "ctx_size": "2048"}, tmp_path) as treatment:
        other = "Tell me a story about a lighthouse keeper and the sea. " * 12
        assert [cached_tokens(complete(treatment.url, p)) for p in (PROMPT, other)] == [0, 0]
        treatment.reset_caches()
        assert cached_tokens(complete(treatment.url)) == 0


def test_a_bad_setting_fails_before_any_start(engine: LlamaCppUnderTune, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ubatch_size"):
        engine.start({"batch_size": "128", "ubatch_size": "512"}, tmp_path)
    assert not (tmp_path / "engine.log").exists()


def test_a_server_that_refuses_to_start_fails_with_its_log(tmp_path: Path) -> None:
    require_llama_cpp()
    broken = LlamaCppUnderTune(LlamaServerConfig(extra_args=("--no-such-option",)))
    with pytest.raises(EngineStartFailed) as caught:
        broken.start({}, tmp_path)
    assert "--no-such-option" in caught.value.log_tail


def test_a_crash_is_seen(engine: LlamaCppUnderTune, tmp_path: Path) -> None:
    with started(engine, {"parallel": "1", "ctx_size": "2048"}, tmp_path) as treatment:
        assert treatment.alive()
        crash(treatment, 10)
        assert not treatment.alive()
        assert treatment.log_tail()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_tune_from_a_failed_run_judges_each_remedy(
    engine: LlamaCppUnderTune, tmp_path: Path
) -> None:
    """A real llama.cpp FAIL (one slot for four users, saved in
    tests/data/tune_from: each request waits for the one before it, TTFT p90
    missed, the diagnosis's remedy more --parallel slots with the context to
    keep): ``slogate tune --from`` builds the treatments around its levels,
    restarts llama-server per treatment, judges each against the run's own
    settings and recommends the highest measured capacity."""
    current = {"parallel": "1", "ctx_size": "4096"}
    out = DATA / "llamacpp-one-slot"
    factors = treatments_from_run(out, "llamacpp", {**engine.defaults(), **current})
    assert factors["parallel"] == ["1", "2", "4"], factors
    case = Case("", {"users": 4, "spawn_rate": 4}, {"dist": "uniform", "min": 48, "max": 80},
                32, {"ttft_ms": {"p90": 300}})  # fmt: skip
    path = write_scenario(tmp_path, case)
    # the tune's trials are short: no warm-up of their own (the tune warms each
    # engine), and a median a few seconds of one user can bound
    tuning = yaml.safe_load(path.read_text())
    tuning["load"]["warmup"] = "0s"
    tuning["slo"] = {"ttft_ms": {"p50": 1000}}
    (tmp_path / "tune.yaml").write_text(yaml.safe_dump(tuning))
    tuned = tmp_path / "tune"
    done = slogate(
        "tune", str(tmp_path / "tune.yaml"), "--engine", "llamacpp", "--from", str(out),
        *(f"--current={k}={v}" for k, v in current.items()),
        "--no-prune", "--duration", "6s", "--warmup", "1s", "--tolerance", "0.5",
        "--max-trials", "8", "--out", str(tuned), timeout=900,
    )  # fmt: skip
    assert done.returncode in (0, 1), f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    doc = json.loads((tuned / "tune.json").read_text())
    # the remedy is one change: slots and context move together, three llama-servers
    assert [t["settings"] for t in doc["treatments"]] == [
        {"parallel": p, "ctx_size": c} for p, c in (("1", "4096"), ("2", "8192"), ("4", "16384"))
    ]
    assert all(t["status"] == "measured" and t["startup_s"] > 0 for t in doc["treatments"])
    assert len({t["peak_memory_bytes"] for t in doc["treatments"]}) == 3  # three engines
    # the pick is the highest confirmed capacity (under load one slot may hold
    # no load at all, and a confirmation may miss: both are measurements)
    best = max(t["capacity"]["value"] or 0 for t in doc["treatments"])
    assert best > 0, doc["treatments"]
    recommended = next(t for t in doc["treatments"] if t["name"] == doc["recommended"]["treatment"])
    assert recommended["capacity"]["value"] == best  # ties go to the Pareto front
    others = [t for t in doc["treatments"] if t["settings"]["parallel"] != "1"]
    assert {t["vs_current"] for t in others} <= {"better", "worse", "noise"}
