"""Upper bounds on what a scenario or the command line may ask for.

A value past one of these is a typo or an attack on the generator, never a
load test: ``users: 1e9`` spent 3.5 GB before the run could end, ``input_tokens:
1e12`` died in the prompt synthesis. Each is far beyond any real deployment
and is checked in ``slogate scenario check`` and at the command line, before
any load is sent (exit 2). docs/reliability.md lists them.
"""

from __future__ import annotations

MAX_USERS = 100_000  # concurrent closed-loop users of one run (all processes)
MAX_SPAWN_RATE = 10_000.0  # users started per second
MAX_RPS = 100_000.0  # open-loop requests per second
MAX_PROCESSES = 1024  # load-generating worker processes
MAX_REPEATS = 100  # runs of one `--repeat` set
MAX_PROBE_RPS = 1000.0  # `--probes`: one-token requests per second beside the load
MAX_TOKENS = 2_097_152  # any input or output length (2 Mi tokens, beyond every context window)
MAX_AGENT_DEPTH = 32  # subagents nested in an agent trace (recorded sessions go 2 or 3 deep)
MAX_TURNS = 1000  # turns of one conversation
MAX_COUNT = 1000  # other counts drawn per request (RAG documents)
MAX_DOCUMENTS = 100_000  # documents in a RAG pool
MAX_SECONDS = 7 * 86400.0  # any duration: a run, a warm-up, a think time, a timeout
MAX_IN_FLIGHT = 1_000_000  # open-loop requests in flight
MAX_FILE_BYTES = 4 * 1024 * 1024  # a scenario or mix YAML file
MAX_YAML_NODES = 200_000  # values in one YAML file, aliases expanded
MAX_YAML_DEPTH = 64  # nesting of one YAML file
