"""A load process returns the memory its start-up freed (locustfiles/memory.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from slogate.locustfiles.memory import release_freed_memory

# In a fresh process with an empty cache: tokenize the prose corpus in a thread,
# as a load process prepares its prompts when nothing is cached yet, then
# measure the private memory before and after.
SCRIPT = """
import json, threading, psutil
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, load_tokenizer, tokenized_corpus
from slogate.locustfiles.memory import release_freed_memory
load_tokenizer(str(LOCAL_TOKENIZER))
uss = lambda: psutil.Process().memory_full_info().uss / 2**20
start = uss()
thread = threading.Thread(target=tokenized_corpus, args=("prose", str(LOCAL_TOKENIZER)))
thread.start()
thread.join()
tokenized = uss()
released = release_freed_memory()
print(json.dumps({"start": start, "tokenized": tokenized, "after": uss(), "released": released}))
"""


@pytest.mark.skipif(not release_freed_memory(), reason="the C library cannot return freed pages")
def test_the_memory_tokenizing_freed_goes_back_to_the_system(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}  # nothing cached: it tokenizes
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, env=env
    )
    mb = json.loads(done.stdout)
    assert mb["released"] is True
    grown = mb["tokenized"] - mb["start"]
    assert grown > 20, mb  # the tokenizer's transient buffers, still held
    assert mb["after"] - mb["start"] < grown / 2, mb  # most of it handed back
