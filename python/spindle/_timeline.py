"""Spans of a training process's time for the job's timeline (spindle.timeline).

When the executor asks (SPINDLE_TIMELINE=1), feed waits and checkpoint
saves and loads are recorded and sent in batches, as datagrams, to the
executor's report socket, in the format Spindle's Go package timeline
sends. Recording never waits: a batch the executor cannot take at once
stays pending (up to a bound past which the oldest spans are dropped) and
goes with the next one; only the last send, as the process exits, waits a
moment for room.
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
_MAX_PENDING = 20000
_FLUSH_SECONDS = 0.2
_EXIT_WAIT_SECONDS = 2.0

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
            atexit.register(_flush_at_exit)
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


def _flush_at_exit():
    with _lock:
        _flush_locked(wait=_EXIT_WAIT_SECONDS)


def _flush_locked(wait=0.0):
    st = _state
    st["last"] = time.monotonic()
    if not st["pending"]:
        return
    if st["sock"] is None:
        st["sock"] = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    st["sock"].settimeout(wait if wait > 0 else 0.0)
    pending = st["pending"]
    sent = 0
    try:
        while sent < len(pending):
            batch = pending[sent:sent + _MAX_BATCH]
            st["sock"].sendto(json.dumps({"spans": batch}).encode(), st["path"])
            sent += len(batch)
    except (BlockingIOError, socket.timeout):
        pass  # the executor's queue is full: what is left goes next time
    except OSError:
        sent = len(pending)  # the executor is gone: the timeline loses these
    st["pending"] = pending[sent:][-_MAX_PENDING:]
