"""Reporting values (loss, accuracy, ...) to the job's web UI, event log and metrics."""

import json
import math
import numbers
import os
import socket
import time

from . import _contract

_sock = None
_path = None

#: The last value reported under each name (spindle.model.save records them).
last_values = {}


def report(step=None, **values):
    """Report named numbers at a training step, e.g. ``spindle.report(step=i, loss=l)``.

    The values reach the job's web UI (its charts), event log and metrics
    with the executor's next heartbeat. Reporting never waits: when the
    executor cannot take a report at once, the report is dropped and
    False is returned. Outside Spindle (no SPINDLE_REPORT_SOCKET) it does
    nothing and returns False. Values must be real numbers; NaN and
    infinities are left out.
    """
    global _sock, _path
    path = os.environ.get(_contract.REPORT_SOCKET)
    if not path:
        return False
    clean = {}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            if hasattr(value, "item"):  # numpy and torch scalars
                value = value.item()
            else:
                raise TypeError(f"spindle.report: {name}={value!r} is not a number")
        value = float(value)
        if math.isfinite(value):
            clean[name] = value
    if not clean:
        return False
    last_values.update(clean)
    msg = {"values": clean, "time": time.time()}
    if step is not None:
        msg["step"] = int(step)
    if _sock is None or _path != path:
        _sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sock.setblocking(False)
        _path = path
    try:
        _sock.sendto(json.dumps(msg).encode(), path)
    except (BlockingIOError, ConnectionRefusedError, FileNotFoundError):
        return False
    return True


def report_world_batches(epoch, batches, timeout=10.0):
    """Tell the job how far the world was in its epoch when it lost a rank
    and went on without it in place (``spindle.failure.shrinkInPlace``):
    ``epoch`` (from 0) and the ``batches`` of it every surviving rank
    completed, the step that failed not counted. Call it once the survivors
    re-formed their world (after ``wait_membership``) and agreed on their
    step, before reading the next batch: the driver then deals the lost
    rank's rows from that batch on to the survivors' feeds. Unlike
    ``report`` it waits, up to ``timeout`` seconds, while the executor
    cannot take it at once. Returns False outside Spindle or without a
    membership, True once sent."""
    from ._env import membership

    global _sock, _path
    path = os.environ.get(_contract.REPORT_SOCKET)
    m = membership()
    if not path or m is None:
        return False
    if epoch < 0 or batches < 0:
        raise ValueError(f"spindle.report_world_batches: epoch {epoch}, batches {batches}: neither may be negative")
    msg = json.dumps({"world_batches": {"version": int(m.get("version", 0)), "epoch": int(epoch), "batches": int(batches)}}).encode()
    if _sock is None or _path != path:
        _sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        _sock.setblocking(False)
        _path = path
    deadline = time.monotonic() + timeout
    while True:
        try:
            _sock.sendto(msg, path)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"spindle.report_world_batches: the executor took no report within {timeout} s") from None
            time.sleep(0.02)
