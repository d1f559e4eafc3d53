"""Talking to Locust's web UI as a browser would: wait for a page, post a form."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request


def wait_for(url: str, opener: urllib.request.OpenerDirector, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with opener.open(url, timeout=5) as reply:
                return reply.read().decode()
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def template_args(page: str) -> dict:
    found = re.search(r"window\.templateArgs = (\{.*?\})\s*\n", page, re.S)
    assert found, page[:2000]
    return json.loads(found.group(1))


def post(opener: urllib.request.OpenerDirector, url: str, **form: str) -> str:
    data = urllib.parse.urlencode(form).encode()
    with opener.open(url, data=data, timeout=10) as reply:
        return reply.read().decode()
