"""What to try for a diagnosed cause: the engine told by its scrapes or its
``owned_by``, advice in that engine's words, and the settings a tune can vary."""

from __future__ import annotations

import pytest

from slogate.analysis.diagnosis.remedies import (
    DIRECTIONS,
    ENGINE_NAMES,
    EXPERIMENTS,
    LLAMACPP,
    REMEDIES,
    SETTINGS,
    SGLANG,
    VLLM,
    Remedy,
    action,
    engine_family,
    remedies,
)
from slogate.engines.tunable_served import LLAMACPP_FACTORS, VLLM_FACTORS


def test_the_scraped_dialect_names_the_engine_before_owned_by() -> None:
    scraped = [{"source": "dcgm"}, {"source": "engine", "engine": "sglang"}]
    assert engine_family({"engine": {"owned_by": "vllm"}}, scraped) == SGLANG
    assert engine_family({"engine": {"owned_by": "llama.cpp"}}, []) == LLAMACPP
    assert engine_family({"engine": {"owned_by": "slogate-simengine"}}, []) == VLLM
    assert engine_family({"engine": {"owned_by": "Text-Generation-Inference"}}, []) == "tgi"
    assert engine_family({"engine": {"owned_by": "someone"}}, []) is None
    assert engine_family({}, [{"source": "engine", "engine": "unknown-engine"}]) is None


def test_advice_is_in_the_engines_words_and_vllms_when_unknown() -> None:
    llama = action("queueing", LLAMACPP)
    assert llama.startswith("Try on llama.cpp: more --parallel slots")
    assert "slogate sweep SCENARIO --find-max" in llama
    unknown = action("queueing", None)
    assert unknown.startswith("Try on vLLM (engine unknown): ")
    assert "--max-num-seqs" in unknown
    assert action("a cause nobody diagnoses", VLLM) == ""


@pytest.mark.parametrize(
    ("cause", "engine", "expected"),
    [
        ("queueing", LLAMACPP, [("llamacpp", "parallel", "up"), ("llamacpp", "ctx_size", "up")]),
        ("preemption", VLLM, [("vllm", "max_num_seqs", "down")]),
        (
            "KV cache full",
            LLAMACPP,
            [("llamacpp", "ctx_size", "up"), ("llamacpp", "parallel", "down")],
        ),
        ("capacity-bound", VLLM, [("vllm", "max_num_seqs", "up")]),
        ("prefill-bound", None, [("vllm", "enable_prefix_caching", "on")]),
        ("prefill-bound", LLAMACPP, []),  # llama.cpp's advice there is no one setting
        ("saturation", VLLM, []),  # more replicas: not a setting of one engine
        ("prefill-bound", "tgi", []),
    ],
)
def test_remedies_name_the_settings_a_tune_varies(
    cause: str, engine: str | None, expected: list[tuple[str, str, str]]
) -> None:
    assert remedies(cause, engine) == tuple(Remedy(*r) for r in expected)


def test_every_cause_with_advice_has_an_experiment_and_every_engine_its_words() -> None:
    assert set(SETTINGS) == set(EXPERIMENTS)
    assert set(REMEDIES) <= set(SETTINGS)
    for cause, advice in SETTINGS.items():
        assert set(advice) == set(ENGINE_NAMES), cause
    for by_engine in REMEDIES.values():
        for engine, moves in by_engine.items():
            assert engine in ENGINE_NAMES
            assert all(direction in DIRECTIONS for _, direction in moves)


def test_every_remedy_is_a_factor_the_engines_tune_knows() -> None:
    """``slogate tune --from`` turns remedies into treatments: a remedy naming a
    setting the engine's tune does not vary would be a treatment it refuses."""
    factors = {VLLM: set(VLLM_FACTORS), LLAMACPP: set(LLAMACPP_FACTORS)}
    for by_engine in REMEDIES.values():
        for engine, moves in by_engine.items():
            assert {setting for setting, _ in moves} <= factors[engine], (engine, moves)
