"""Which replica served a reply: the response headers routers name it in.

A run recognises the headers of the routers docs/engines.md documents without
any setting, so replicas behind a router are seen by default; a scenario's
``request.served_by_header`` names another (and then only that one is read).
Checked against each project's source:

- ``x-served-by``: slogate's own router (``slogate engine --replicas N``).
- ``x-inference-pod``: llm-d's simulated model server names its pod in it
  (llm-d-inference-sim, README "Environment variables": set from
  ``POD_NAME``), so a reply through llm-d's gateway to those pods says which
  served it (llm-d's router strips its own ``x-gateway-destination-endpoint-served``
  from replies, and vLLM pods send none).

SGLang's router and NVIDIA Dynamo's frontend name no worker in a response
header (Dynamo puts it in the body, ``nvext.worker_id``, when asked): their
replicas are seen as endpoints, or through a header the user has their proxy
add and names in the scenario.

The value is server text: its bytes are read as UTF-8 (the HTTP parser hands
them over as Latin-1), cut to MAX_NAME_CHARS and neutralised before they are
kept, so every output that shows a replica shows the same safe name.
"""

from __future__ import annotations

from collections.abc import Mapping

from slogate.analysis.documents.neutral import neutral_text

__all__ = ["MAX_NAME_CHARS", "SERVED_BY_HEADERS", "header_text", "served_by"]

SERVED_BY_HEADERS = ("x-served-by", "x-inference-pod")
MAX_NAME_CHARS = 200  # a replica's name as a router reported it


def header_text(value: str) -> str:
    """A header value as its sender wrote it: the parser decoded its bytes as
    Latin-1, which maps each byte to one character, so they come back whole
    and are read as UTF-8 (invalid bytes become U+FFFD)."""
    return value.encode("latin-1", "replace").decode("utf-8", "replace")


def served_by(headers: Mapping[str, str], named: str | None) -> tuple[str, str] | None:
    """(the header, the replica's name) of the first header naming the
    replica: ``named`` alone when the scenario names one, else the known
    routers' (SERVED_BY_HEADERS); None when the reply names none."""
    for header in SERVED_BY_HEADERS if named is None else (named.lower(),):
        value = headers.get(header)
        if value is not None:
            return header, neutral_text(header_text(value)[:MAX_NAME_CHARS])
    return None
