"""Scenario files the loader refuses, each with the key path and words of its
message: the loader's tests check the messages, the JSON Schema's tests check
that the generated schema refuses them too (where JSON Schema can say why)."""

from __future__ import annotations

MINIMAL = """
name: tiny
workload:
  kind: chat
  input_tokens: {dist: lognormal, median: 200, p90: 400}
  output_tokens: 32
"""

# (text appended to MINIMAL, key path, words of the message)
BAD_VALUES = [
    ("nmae: x\n", "nmae", "did you mean 'name'"),
    ("load: {users: -3}\n", "load.users", "expected an integer >= 1 and <= 100000, got -3"),
    ("load: {users: many}\n", "load.users", "got 'many'"),
    ("load: {duration: 5 minutes}\n", "load.duration", "expected a duration > 0"),
    ("load: {duration: -5s}\n", "load.duration", "expected a duration > 0"),
    ("load: {duration: 10s, warmup: 20s}\n", "load.warmup", "shorter than the duration"),
    ("load: {users: 2, rate: 5}\n", "load", "either users (closed loop) or rate"),
    ("load: {rate: {arrival: poisson}}\n", "load.rate.rps", "missing; expected a number > 0"),
    ("load: {rate: {rps: 2, cv: 3}}\n", "load.rate.cv", "arrival: gamma only"),
    ("load: {rate: {rps: 2, arrival: trace}}\n", "load.rate.arrival", "kind: trace"),
    ("load: {rate: {rps: 2, arrival: burst}}\n", "load.rate.arrival", "one of poisson"),
    ("api: grpc\n", "api", "expected one of chat, completions"),
    ("seed: 1.5\n", "seed", "expected an integer"),
    ("request: {ignore_eos: yes please}\n", "request.ignore_eos", "true or false"),
    ("request: {continuous_usage: 1}\n", "request.continuous_usage", "auto or true or false"),
    ("request: {extra_body: {stream: false}}\n", "request.extra_body", "remove stream"),
    ("request: {tokenizer: nowhere.json}\n", "request.tokenizer", "local, server, estimate"),
    ("request: {temperature: 7}\n", "request.temperature", "<= 2"),
    ("timeouts: {connect: 0s}\n", "timeouts.connect", "duration > 0"),
    ("slo: {ttft_ms: {p98: 100}}\n", "slo.ttft_ms.p98", "unknown key"),
    ("slo: {ttft_ms: {p99: -1}}\n", "slo.ttft_ms.p99", "expected a number > 0"),
    ("slo: {error_rate: {max: 2}}\n", "slo.error_rate.max", "<= 1"),
    ("slo: {goodput: {min: 0.9}}\n", "slo.goodput", "at least one per-request limit"),
    (
        "slo: {throughput: {requests_per_s: {min: 0}}}\n",
        "slo.throughput.requests_per_s.min",
        "> 0",
    ),
]

# (a line under `workload: {kind: chat}`, key path, words of the message)
BAD_WORKLOADS = [
    (
        "input_tokens: {dist: lognormal, median: 1020, p90: 500}",
        "workload.input_tokens.p90",
        "greater than median (1020), got 500",
    ),
    ("input_tokens: {dist: normal, mean: 100}", "workload.input_tokens.std", "missing"),
    (
        "input_tokens: {dist: uniform, min: 50, max: 10}",
        "workload.input_tokens.max",
        "expected a number >= min (50)",
    ),
    ("input_tokens: {dist: zipf, s: 2}", "workload.input_tokens.dist", "one of fixed"),
    ("input_tokens: {dist: gamma, mean: 100, cv: 0}", "workload.input_tokens.cv", "> 0"),
    ("input_tokens: 0", "workload.input_tokens.value", ">= 1"),
    (
        "output_tokens: {dist: fixed, value: 10, mean: 3}",
        "workload.output_tokens.mean",
        "unknown key",
    ),
    (
        "output_tokens: {dist: empirical, file: missing.csv, column: x}",
        "workload.output_tokens.file",
        "file not found",
    ),
    (
        "output_tokens: {dist: empirical, file: azure-conv, column: Tokens}",
        "workload.output_tokens.column",
        "columns: TIMESTAMP, ContextTokens, GeneratedTokens",
    ),
    ("turns: {dist: uniform, min: 0, max: 3}", "workload.turns.min", ">= 1"),
    ("think_time_s: {dist: exponential, mean: -1}", "workload.think_time_s.mean", "> 0"),
    ("system: {tokens: -5}", "workload.system.tokens", ">= 0"),
    ("text: poetry", "workload.text", "one of prose, code"),
]

ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['x'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)

# whole files no scenario could be: (text, words of the one-line message)
HOSTILE = {
    "empty": ("", "expected a mapping of scenario (or mix) keys, got an empty file"),
    "deep": ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than the limit of 64"),
    "alias-bomb": (ALIAS_BOMB, "more than 200000 values (aliases expanded)"),
    "list": ("- just\n- a list\n", "got a YAML list"),
}

# (changes to tests/data/exact-chat.yaml, key path, words of the message)
LIMITS = {
    "users": ({"load": {"users": 1_000_000_000}}, "load.users", "<= 100000"),
    "rate": ({"load": {"users": None, "rate": 10_000_000}}, "load.rate.rps", "<= 100000"),
    "input-tokens": (
        {"workload": {"input_tokens": 1e12}},
        "workload.input_tokens.value",
        "<= 2.09715e+06",
    ),
    "turns": ({"workload": {"turns": 100_000}}, "workload.turns.value", "<= 1000"),
    "duration": ({"load": {"duration": "30d"}}, "load.duration", "up to 7 days"),
}
