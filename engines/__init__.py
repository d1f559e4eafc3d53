"""Real inference engines that slogate can start for a load test (llama.cpp, vLLM)."""
