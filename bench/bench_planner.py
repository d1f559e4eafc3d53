"""How much planning costs the load generator.

Planning runs inside the load-generating process, between requests, so it must
stay far below a request's own client cost. Prints, per built-in scenario: the
one-time start-up (loading the scenario, tokenizing the corpus, building the
planner) and the planning time per request, closed loop and open loop.

    .venv/bin/python bench/bench_planner.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import itertools
import time

from slogate import scenarios
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, tokenizer_counter


def per_request_us(turns: itertools.islice) -> tuple[float, int]:
    start = time.perf_counter()
    count = sum(1 for _ in turns)
    return (time.perf_counter() - start) / count * 1e6, count


def closed_loop(planner: scenarios.Planner, n: int) -> itertools.islice:
    return itertools.islice(
        itertools.chain.from_iterable(planner.conversation().turns for _ in itertools.count()), n
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    n = parser.parse_args().requests
    print(f"{'scenario':<12} {'start-up ms':>11} {'closed us/req':>14} {'open us/req':>12}")
    for name in scenarios.BUILTINS:
        if name == "mixed":
            continue
        start = time.perf_counter()
        [scenario] = scenarios.load(name)
        planner = scenarios.Planner(scenario, seed=0, stream=1)
        startup_ms = (time.perf_counter() - start) * 1e3
        closed, _ = per_request_us(closed_loop(planner, n))
        open_loop = "-"
        if scenario.load.open_loop:
            arrivals = itertools.islice(scenarios.Planner(scenario, 0, 2).arrivals(0.5), n)
            open_loop = f"{per_request_us(arrivals)[0]:.0f}"
        print(f"{name:<12} {startup_ms:>11.0f} {closed:>14.0f} {open_loop:>12}")
    [chat] = scenarios.load("chat")
    local = tokenizer_counter(str(LOCAL_TOKENIZER))
    measured = scenarios.Planner(chat, seed=0, count_tokens=local)
    us, _ = per_request_us(closed_loop(measured, n // 4))
    print(f"chat with an injected counter (the local tokenizer as the measure): {us:.0f} us/req")


if __name__ == "__main__":
    main()
