"""Experiment design: each setting's scenario, engine and load, the repeats
interleaved, what is held, and the document; fed hand-made settings and trial
results (the end-to-end runs are in test_experiments.py)."""

from __future__ import annotations

import re

import pytest

from slogate.reports.study_lines import experiment_closing_lines, experiment_trial_line
from slogate.simengine.profiles import WEIGHT_BYTES, load_profile
from slogate.studies.experiment import (
    ExperimentSettings,
    Setting,
    base_scenario,
    build_document,
    engine_groups,
    factor_settings,
    held_description,
    trial_order,
    trial_scenario,
)
from slogate.studies.trials import TrialResult


def settings(factor: str, **given) -> ExperimentSettings:
    return ExperimentSettings(factor=factor, duration=3.0, **given)


def test_length_settings_change_one_workload_key_and_hold_the_users():
    items = factor_settings(settings("prompt-length", values="512,128", users=4))
    assert [(s.label, s.x, s.workload, s.users) for s in items] == [
        ("512", 512.0, {"input_tokens": 512}, 4),
        ("128", 128.0, {"input_tokens": 128}, 4),
    ]
    (out,) = factor_settings(settings("output-length", values="32"))
    assert out.workload == {"output_tokens": 32} and out.users is None


def test_concurrency_settings_are_the_users_on_one_engine():
    items = factor_settings(settings("concurrency", values="1,4", host="http://h:1"))
    assert [(s.users, s.workload, s.host) for s in items] == [
        (1, {}, "http://h:1"),
        (4, {}, "http://h:1"),
    ]
    assert engine_groups(items) == [items]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"values": "128,128"}, "each setting once, please: 128, 128"),
        ({"values": "0,128"}, "expected token counts of at least 1"),
        ({"values": "1,x"}, "expected comma-separated token counts"),
    ],
)
def test_bad_values_are_named(given, message):
    with pytest.raises(ValueError, match=message):
        factor_settings(settings("prompt-length", **given))


def test_precision_across_endpoints_takes_each_dtype_bytes():
    items = factor_settings(settings("precision", endpoints=("bf16=http://a:1", "INT4=http://b:2")))
    assert [(s.label, s.x, s.host, s.profile) for s in items] == [
        ("bf16", 2.0, "http://a:1", None),
        ("INT4", 0.515625, "http://b:2", None),
    ]
    assert len(engine_groups(items)) == 2  # one engine per precision


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"endpoints": ("bf16=http://a:1",), "values": "bf16"}, "drop --values/--host"),
        ({"endpoints": ("fp3=http://a:1",)}, "expected DTYPE=URL with DTYPE one of bf16"),
        ({"endpoints": ("http://a:1",)}, "expected DTYPE=URL"),
        ({"host": "http://a:1"}, "needs one engine per precision"),
    ],
)
def test_precision_refuses_what_cannot_vary_the_weights(given, message):
    with pytest.raises(ValueError, match=message):
        factor_settings(settings("precision", **given))


def test_simulated_precision_starts_one_profile_per_dtype():
    items = factor_settings(settings("precision", values="bf16,fp8", profile="llama-3.1-8b@h100"))
    fp8 = load_profile("llama-3.1-8b@h100", weight_dtype="fp8")
    assert [s.label for s in items] == ["bf16", "fp8"]
    assert items[1].profile == fp8.name and items[1].weight_bytes == fp8.weight_bytes
    assert items[1].x == WEIGHT_BYTES["fp8"] and items[1].host is None
    assert [group[0].label for group in engine_groups(items)] == ["bf16", "fp8"]


def test_repeats_interleave_every_setting():
    a, b = (Setting(label, 1.0, {}, None, None, None) for label in "ab")
    order = [(repeat, s.label) for repeat, s in trial_order([a, b], 3)]
    assert order == [(1, "a"), (1, "b"), (2, "a"), (2, "b"), (3, "a"), (3, "b")]


def test_the_built_in_scenario_fixes_both_lengths_and_a_setting_overrides_one():
    base = base_scenario(settings("output-length", input_tokens=256, output_tokens=16))
    assert base["name"] == "output-length"
    assert base["workload"]["input_tokens"] == 256 and base["workload"]["output_tokens"] == 16
    del base["request"]
    raw = trial_scenario(base, Setting("64", 64.0, {"output_tokens": 64}, None, None, None))
    assert raw["workload"]["output_tokens"] == 64 and raw["request"] == {"ignore_eos": True}
    assert base["workload"]["output_tokens"] == 16 and "request" not in base  # a copy


def test_a_user_scenario_needs_a_workload(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text("name: bare\n")
    with pytest.raises(ValueError, match="needs a single scenario with a workload"):
        base_scenario(settings("prompt-length", scenario=str(path)))


def test_held_lists_what_did_not_vary():
    held = held_description(settings("prompt-length", repeats=2))
    assert held == {
        "scenario": "built-in single-turn chat, ignore_eos",
        "duration per run (s)": 3.0,
        "repeats": 2,
        "engine": "simulated engine",
        "profile": "default",
        "speedup": 1.0,
        "concurrent users": 1,
        "output tokens": 64,
    }
    held = held_description(settings("concurrency", host="http://h:1", scenario="chat.yaml"))
    assert held["engine"] == "http://h:1" and held["profile"] is None and held["speedup"] is None
    assert "concurrent users" not in held and "prompt tokens" not in held


def test_document_lists_each_setting_and_drops_trends_with_nothing_measured(tmp_path):
    study = settings("precision", endpoints=("bf16=http://a:1", "int4=http://b:2"), command="c")
    items = factor_settings(study)
    results = {
        "bf16": [TrialResult(tmp_path / "runs" / "bf16-r1", 3, None)],
        "int4": [TrialResult(tmp_path / "runs" / "int4-r1", 3, None)],
    }
    doc = build_document(study, items, results, tmp_path, None)
    assert doc["values"] == ["bf16", "int4"] and doc["title"] == "Experiment: weight precision"
    assert doc["command"] == "c" and doc["x_label"] == "bytes per weight"
    assert [(p["host"], p["weight_bytes"]) for p in doc["points"]] == [
        ("http://a:1", None),
        ("http://b:2", None),
    ]
    assert doc["points"][0]["runs"][0] == {
        "dir": "runs/bf16-r1", "repeat": 1, "verdict": "error", "exit_code": 3, "scenario": None,
    }  # fmt: skip
    assert doc["trends"] == []  # no memory and no speed were measured on these endpoints
    assert experiment_closing_lines(doc, tmp_path / "report.html") == [
        f"slogate: report {tmp_path / 'report.html'}"
    ]
    line = experiment_trial_line("precision", "bf16", 1, "error", None, 3, tmp_path)
    assert line == "precision bf16 (repeat 1): no results (exit 3)"


def test_speculative_settings_run_each_load_with_and_without_speculation():
    base = "llama-3.1-8b@h100:acceptance_rate=0.6"
    items = factor_settings(settings("speculative", values="1,8", profile=base))
    assert [(s.label, s.x, s.users) for s in items] == [
        ("off-1", 1.0, 1),
        ("off-8", 8.0, 8),
        ("on-1", 1.0, 1),
        ("on-8", 8.0, 8),
    ]
    off, on = (load_profile(group[0].profile) for group in engine_groups(items))
    assert (off.speculative_tokens, on.speculative_tokens) == (0, 3)  # the default drafts
    assert off.acceptance_rate == on.acceptance_rate == 0.6
    drafting = factor_settings(settings("speculative", profile=base + ":speculative_tokens=5"))
    assert load_profile(drafting[-1].profile).speculative_tokens == 5
    named = factor_settings(
        settings("speculative", values="2", endpoints=("on=http://b:2", "off=http://a:1"))
    )
    assert [(s.label, s.host, s.profile) for s in named] == [
        ("off-2", "http://a:1", None),
        ("on-2", "http://b:2", None),
    ]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"host": "http://h:1"}, "--endpoint off=URL --endpoint on=URL"),
        ({"endpoints": ("off=http://a:1",)}, "expected off=URL (no speculation) and on=URL"),
        ({"endpoints": ("off=http://a:1", "fast=http://b:1")}, "once each"),
    ],
)
def test_speculative_needs_an_engine_with_and_one_without(given, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        factor_settings(settings("speculative", **given))
