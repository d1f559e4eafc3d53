"""An exact-schedule OpenAI-compatible streaming server, for tests and benchmarks.

It emits tokens on a precise schedule (TTFT, ITL, tokens per chunk) with the
stream quirks of real engines on demand, and logs when it received each request
and when it really sent each output chunk, so a client's measurements can be
checked against the truth. Run it in its own process (``python -m slogate.exactengine``
or :class:`slogate.engines.exact.ExactEngine`) so it does not share a core with
the client under test.
"""
