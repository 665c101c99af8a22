"""The rank process of a spindle.Session: ``python -m spindle._zygote``.

It imports the modules the session preloads (torch, tensorflow), then
serves the session's jobs on a Unix socket of its own in the session's
private directory ($SPINDLE_SESSION_DIR/rank-N.sock): for each job it
forks a fresh process that runs the job's function with those modules
already imported, and answers with the child's pid when it starts and its
exit code when it ends. A job's state dies with its process, so nothing
leaks into the next job; the zygote itself never runs user code.

Every request is one JSON line and must carry the session's token (the
file ``token`` in the same directory, mode 0600); a request without it is
refused before anything else of it is read.
"""

import gc
import hmac
import importlib
import json
import os
import signal
import socket
import sys
import traceback

from . import _env

SESSION_DIR = "SPINDLE_SESSION_DIR"
PRELOAD = "SPINDLE_SESSION_PRELOAD"
_MAX_REQUEST = 1 << 20


def socket_path(directory, rank):
    """The Unix socket rank's zygote listens on."""
    return os.path.join(directory, f"rank-{rank}.sock")


def _read_line(conn):
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > _MAX_REQUEST:
            raise ValueError("request longer than 1 MiB")
    return bytes(buf)


def _send(conn, obj):
    conn.sendall(json.dumps(obj).encode() + b"\n")


def _child(req, rank):
    """In the forked process: run the job's function, hand back its result, exit."""
    from . import _worker
    from ._run import PAYLOAD, loads, dumps_result
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.environ.update(req.get("env") or {})
        with open(os.path.join(req["work"], PAYLOAD), "rb") as f:
            spec = loads(f.read())
        _worker.write_result(dumps_result(_worker._call(spec)), rank, os.path.join(req["work"], "results"))
    except BaseException:  # noqa: BLE001 - the job's failure, reported to the session
        code = 1
        tail = traceback.format_exc()
        sys.stderr.write(tail)
        try:
            with open(os.path.join(req["work"], "results", f"rank-{rank}.err"), "w") as f:
                f.write(tail[-4000:])
        except OSError:
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve_one(conn, token, rank, lis):
    """Serve one request; return False when the session said stop."""
    req = json.loads(_read_line(conn) or b"{}")
    if not hmac.compare_digest(str(req.get("token", "")).encode(), token):
        _send(conn, {"error": "refused: no valid session token"})
        return True
    op = req.get("op")
    if op == "ping":
        _send(conn, {"pid": os.getpid(), "preloaded": sorted(m for m in _preload_names() if m in sys.modules)})
        return True
    if op == "stop":
        _send(conn, {"stopped": True})
        return False
    if op != "run":
        _send(conn, {"error": f"unknown op {op!r}"})
        return True
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        lis.close()
        conn.close()
        _child(req, rank)
    _send(conn, {"pid": pid})
    _, status = os.waitpid(pid, 0)
    _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
    return True


def _preload_names():
    return [m for m in os.environ.get(PRELOAD, "").split(",") if m]


def main():
    directory = os.environ.get(SESSION_DIR)
    if not directory:
        sys.exit("spindle._zygote: SPINDLE_SESSION_DIR is not set: spindle.Session starts this module, not a user")
    for name in _preload_names():
        importlib.import_module(name)
    # What every job's child needs too, so that no child imports it again.
    from . import _run, _worker  # noqa: F401
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        pass
    # The children share the warm heap copy-on-write; frozen objects are
    # left out of their collections, which would otherwise touch (and so
    # copy) every page of it.
    gc.collect()
    gc.freeze()
    with open(os.path.join(directory, "token"), "rb") as f:
        token = f.read().strip()
    rank = _env.rank()
    path = socket_path(directory, rank)
    lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path + ".tmp"
    if os.path.exists(tmp):
        os.unlink(tmp)
    lis.bind(tmp)
    os.chmod(tmp, 0o600)
    lis.listen(8)
    # Published whole: the session connects once the name exists.
    os.rename(tmp, path)
    going = True
    while going:
        conn, _ = lis.accept()
        with conn:
            try:
                going = _serve_one(conn, token, rank, lis)
            except (OSError, ValueError) as e:
                print(f"spindle session: a request failed: {e}", file=sys.stderr, flush=True)
    lis.close()


if __name__ == "__main__":
    main()
