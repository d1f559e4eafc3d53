"""A blocking call bounded as a whole, not read by read.

urllib's timeout bounds each socket read: a server that sends its answer's
head a byte a second meets every read's timeout and holds the caller for as
long as it likes (the pre-flight route probe 95 s, issue 42 N1). The call
runs in a thread of its own (a greenlet once gevent patched the process) and
is awaited for its time; one that comes later is handed to ``late`` (a
response to close) and dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


def within(call: Callable[[], T], timeout: float, late: Callable[[T], None]) -> T:
    """``call()``'s result, or what it raised, if it ended within ``timeout``
    seconds; TimeoutError if not."""
    returned: list[T] = []
    raised: list[Exception] = []
    given_up = threading.Lock()  # held by the wait once it gave up: nothing is taken

    def calling() -> None:
        try:
            result = call()
        except Exception as exc:  # raised again in the caller's thread
            if given_up.acquire(blocking=False):
                raised.append(exc)
                given_up.release()
            return
        if given_up.acquire(blocking=False):
            returned.append(result)
            given_up.release()
        else:
            late(result)

    waiter = threading.Thread(target=calling, daemon=True)
    waiter.start()
    waiter.join(timeout)
    given_up.acquire()
    if raised:
        raise raised[0]
    if not returned:
        raise TimeoutError(f"timed out: no answer within {timeout:g} s as a whole")
    return returned[0]
