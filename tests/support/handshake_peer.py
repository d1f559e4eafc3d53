"""The worker's side of slogate's handshake, spoken by hand to a real master.

``python tests/support/handshake_peer.py PORT VERSION`` connects as a Locust worker
does, greets, takes the scenario, answers ready with VERSION (and the
master's own digest) and prints one JSON line: the shipped files' names and
text, the master's version, and its refusal reason (empty if none in 5 s).

``python tests/support/handshake_peer.py PORT --silent`` connects, reports ready to
Locust, and goes silent: a worker lost before the load starts.

Its own process: importing Locust monkey-patches the interpreter."""

from __future__ import annotations

import json
import os
import sys

import gevent
import locust
from locust.rpc import Message, rpc

ID = "peer"
HELLO_INTERVAL_S = 1.0


def until(client: rpc.Client, kind: str) -> dict:
    while True:
        msg = client.recv()
        if msg.type == kind:
            return msg.data


def greet(client: rpc.Client) -> None:
    """Greet each second until answered, as slogate's worker does: a hello that
    arrives before the master's handlers are in place is dropped."""
    while True:
        client.send(Message("slogate_hello", {}, ID))
        gevent.sleep(HELLO_INTERVAL_S)


def handshake(client: rpc.Client, version: str) -> None:
    greeter = gevent.spawn(greet, client)
    shipment = gevent.with_timeout(60, until, client, "slogate_scenario")
    greeter.kill()
    ready = {"version": version, "digest": shipment["digest"], "error": None,
             "pid": os.getpid(), "host": "peer-host", "clock": None}  # fmt: skip
    client.send(Message("slogate_ready", ready, ID))
    answer = gevent.with_timeout(5, until, client, "slogate_refused", timeout_value={})
    files = {name: data.decode() for name, data in shipment["files"].items()}
    print(json.dumps({"files": files, "version": shipment["version"], **answer}))


def main(port: int, version: str) -> None:
    client = rpc.Client("127.0.0.1", port, ID)
    client.send(Message("client_ready", locust.__version__, ID))
    if version != "--silent":
        handshake(client, version)
    client.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
