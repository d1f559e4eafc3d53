"""Streams fed to the interpreter the way the client feeds it, for the
protocol tests: events encoded as SSE, then parsed in pieces of any size."""

from __future__ import annotations

import json

from slogate.analysis.measurement.records import RequestRecord
from slogate.client.openai_stream import ChunkParser, StreamInterpreter, parse_chunk
from slogate.client.sse import SSEParser
from slogate.client.think_tags import ThinkTags


def sse(*objs: object, event: bool = False) -> bytes:
    out = b""
    for obj in objs:
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        name = obj.get("type") if event and isinstance(obj, dict) else None
        out += (b"event: %s\n" % name.encode() if name else b"") + b"data: " + data + b"\n\n"
    return out


def interpret(
    stream: bytes, piece: int, parse: ChunkParser = parse_chunk, tags: ThinkTags | None = None
) -> tuple[RequestRecord, StreamInterpreter]:
    """Feed ``stream`` in pieces of ``piece`` bytes; each arrives at its last byte's index."""
    rec = RequestRecord(scenario="s", start_ns=0)
    interpreter = StreamInterpreter(rec, parse, tags)
    parser = SSEParser()
    for i in range(0, len(stream), piece):
        at = min(i + piece, len(stream)) - 1
        if interpreter.on_piece(parser, stream[i : i + piece], at):
            return rec, interpreter
    for ev in parser.close():
        if interpreter.on_event(ev, len(stream)):
            return rec, interpreter
    interpreter.on_close(len(stream))
    return rec, interpreter
