"""The embedded simulated GPU inference engine (an OpenAI-compatible aiohttp server).

Not a fixed-latency mock: a roofline model of a GPU running vLLM-style
continuous batching with a paged KV cache, so prompt length, output length,
concurrency and quantization change latency the way they do on a real GPU
(compute-bound prefill, bandwidth-bound decode, KV-cache growth).

- ``profiles``: model x GPU x dtype x tensor-parallel deployments, capacity math
- ``model``: step time (roofline); ``kvcache``, ``scheduler``: batching, KV, preemption
- ``simulate``, ``calibration``: the same scheduler on a virtual clock
- ``engine``, ``server``, ``sse``: the real-time loop and the HTTP/SSE layer;
  ``receipt``: the connection protocol that stamps when a request arrives
- ``launch``: start one in a child process; ``python -m slogate.simengine`` runs one

See docs/simengine.md.
"""
