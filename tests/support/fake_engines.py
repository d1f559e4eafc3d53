"""A fake engine that serves its model list and refuses the routes it is told to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

from httpserving import serving
from loadruns import ModelsHandler


@contextmanager
def engine_without(paths: set[str], props: dict | None = None) -> Iterator[str]:
    """A fake engine on 127.0.0.1: its model list (no ``max_model_len``), a
    llama.cpp-style ``/props`` when given, and 404 for a POST to ``paths``
    (400 for any other POST: a served route refusing an incomplete body)."""
    posts: list[tuple[str, dict]] = []

    class Handler(ModelsHandler):
        def do_GET(self) -> None:
            if self.path == "/props" and props is not None:
                self.answer(200, props)
            else:
                super().do_GET()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            posts.append((self.path, body))
            self.answer(404 if self.path in paths else 400, {"error": "no"})

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        yield f"http://127.0.0.1:{port}"
    # nothing but route probes, and the pre-flight's token counts, reached it
    assert all(body == {"model": "m"} for path, body in posts if path != "/tokenize"), posts
