"""Spans of a training process's time for the job's timeline (spindle.timeline).

When the executor asks (SPINDLE_TIMELINE=1), feed waits and checkpoint
saves and loads are recorded and sent in batches, as datagrams, to the
executor's report socket, in the format Spindle's Go package timeline
sends. Recording never waits: a batch the executor cannot take at once is
dropped.
"""

import atexit
import json
import os
import socket
import threading
import time
from contextlib import contextmanager

from . import _contract

_MAX_BATCH = 200
_FLUSH_SECONDS = 0.2

_lock = threading.Lock()
_state = {"enabled": None, "path": None, "sock": None, "pending": [], "last": 0.0}


def enabled():
    """Return whether this process records a timeline."""
    st = _state
    if st["enabled"] is None:
        path = os.environ.get(_contract.REPORT_SOCKET)
        st["enabled"] = os.environ.get(_contract.TIMELINE) == "1" and bool(path)
        st["path"] = path
        st["last"] = time.monotonic()
        if st["enabled"]:
            atexit.register(flush)
    return st["enabled"]


@contextmanager
def span(cat, name):
    """Record the time spent in the with-block as a span of category cat."""
    if not enabled():
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        record(cat, name, start, time.time())


def record(cat, name, start, end):
    """Record one span from start to end (seconds since the epoch)."""
    if not enabled():
        return
    with _lock:
        _state["pending"].append({"name": name, "cat": cat, "ts": int(start * 1e6), "dur": max(int((end - start) * 1e6), 0)})
        if len(_state["pending"]) >= _MAX_BATCH or time.monotonic() - _state["last"] >= _FLUSH_SECONDS:
            _flush_locked()


def flush():
    """Send the spans recorded so far."""
    with _lock:
        _flush_locked()


def _flush_locked():
    st = _state
    st["last"] = time.monotonic()
    if not st["pending"]:
        return
    msg = json.dumps({"spans": st["pending"]}).encode()
    st["pending"] = []
    if st["sock"] is None:
        st["sock"] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        st["sock"].setblocking(False)
    try:
        st["sock"].sendto(msg, st["path"])
    except OSError:
        pass  # full or gone: the timeline loses this batch, training goes on
