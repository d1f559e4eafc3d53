"""The exit-code contract (docs/design.md, "Exit codes"): what every command and
Locust itself end with. A module of its own so a process that only waits for
Locust can read it without importing the analysis."""

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_CONFIG = 2
EXIT_INVALID = 3
EXIT_INCONCLUSIVE = 4
CONTRACT = (EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_INVALID, EXIT_INCONCLUSIVE)
