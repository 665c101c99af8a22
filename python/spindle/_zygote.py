"""The rank process of a spindle.Session: ``python -m spindle._zygote``.

It imports the modules the session preloads (torch, tensorflow), then
serves the session's jobs on a Unix socket of its own in the session's
private directory ($SPINDLE_SESSION_DIR/rank-N.sock): for each job it
forks a fresh process that runs the job's function (spindle.Session.run)
or Python command line (``spindle submit --session``, its stdout and
stderr passed over the socket) with those modules already imported, and answers with the child's pid when it starts and its
exit code when it ends; a client that goes away first (an interrupted
notebook cell, Ctrl-C) ends the job's process group. A job's state dies
with its process, so nothing
leaks into the next job; the zygote itself never runs user code.

On a host where the session's directory is not (a standalone worker
elsewhere), it listens on TCP on its host instead and prints where
(ADDRESS_MARK) for the session to read in the job's output. Over TCP
no file descriptors travel: a command line's script comes in the request
and its output goes back in answers ({"out": 1 or 2, "data": base64});
a job's function comes in the request and its result goes back in the
answer, on either transport.

Every request is one JSON line and must carry the session's token (the
file ``token`` in the same directory, mode 0600, or the job file
$SPINDLE_SESSION_TOKEN_FILE names); a request without it is refused
before anything else of it is read.
"""

import base64
import gc
import hmac
import importlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

from . import _contract, _env
from ._sessionwire import ADDRESS_MARK, PRELOAD, SESSION_DIR, socket_path

# A run's request carries its pickled function.
_MAX_REQUEST = 64 << 20


def _read_request(conn):
    """Read one JSON line and the file descriptors sent with its first bytes (an exec's stdout and stderr)."""
    data, fds, _, _ = socket.recv_fds(conn, 4096, 2)
    buf = bytearray(data)
    if data:
        buf += _read_line(conn, buf)
    return json.loads(bytes(buf) or b"{}"), fds


def _read_line(conn, buf=b""):
    buf = bytearray(buf)
    start = len(buf)
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > _MAX_REQUEST:
            raise ValueError(f"request longer than {_MAX_REQUEST >> 20} MiB")
    return bytes(buf[start:])


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


def _exec(req, fds):
    """In the forked process: run a Python command line (a script, -m module or -c code) with this interpreter."""
    import runpy
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        for fd, target in zip(fds, (1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.update(req.get("env") or {})
        os.chdir(req.get("cwd") or ".")
        argv = list(req["argv"])
        sys.argv = argv
        if argv[0] == "-m":
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c"] + argv[2:]
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            sys.stderr.write(f"{e.code}\n")
    except BaseException:  # noqa: BLE001 - the job's failure, its traceback on its stderr
        code = 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve_one(conn, token, rank, lis):
    """Serve one request; return False when the session said stop."""
    req, fds = _read_request(conn)
    if not hmac.compare_digest(str(req.get("token", "")).encode(), token):
        for fd in fds:
            os.close(fd)
        _send(conn, {"error": "refused: no valid session token"})
        return True
    op = req.get("op")
    if op == "ping":
        _send(conn, {"pid": os.getpid(), "preloaded": sorted(m for m in _preload_names() if m in sys.modules)})
        return True
    if op == "stop":
        _send(conn, {"stopped": True})
        return False
    if op == "port":
        # The next job's MASTER_PORT: rank 0's PyTorch store binds it on
        # this host, which need not be the submitter's.
        for fd in fds:
            os.close(fd)
        _send(conn, {"port": _free_port()})
        return True
    away = conn.family != socket.AF_UNIX
    if op not in ("run", "exec") or (op == "exec" and (len(fds) != (0 if away else 2) or not req.get("argv"))):
        for fd in fds:
            os.close(fd)
        _send(conn, {"error": f"unknown op {op!r}, or an exec without its argv, stdout and stderr"})
        return True
    relay = {}
    if op == "run":
        req = dict(req, work=_run_dir(req))
    elif away:
        # Over TCP no descriptors travel: the output comes back in
        # answers, and a script in the request.
        req = dict(req, work=tempfile.mkdtemp(prefix="spindle-session-exec-"))
        req = _away_script(req)
        for stream in (1, 2):
            r, w = os.pipe()
            relay[r] = stream
            fds.append(w)
    try:
        return _fork_job(conn, req, fds, relay, rank, lis)
    finally:
        for fd in relay:
            os.close(fd)
        if op == "exec" and away:
            shutil.rmtree(req["work"], ignore_errors=True)


def _free_port():
    """Return a TCP port free on every address of this host."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _fork_job(conn, req, fds, relay, rank, lis):
    """Fork the job's process, tell the client its pid, wait for it and answer with its exit; return True."""
    op = req["op"]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        lis.close()
        conn.close()
        _own_group(0)
        _die_with_parent()
        if op == "exec":
            _exec(req, fds)
        _child(req, rank)
    _own_group(pid)
    for fd in fds:
        os.close(fd)
    status = _wait_child(conn, pid, relay)
    answer = {"exit": os.waitstatus_to_exitcode(status)}
    if op == "run":
        answer.update(_run_results(req["work"], rank))
    try:
        _send(conn, answer)
    except OSError:
        pass  # the client went away: its job is ended, nobody to tell
    return True


def _away_script(req):
    """A command line's request, from a client on another host, with its script (sent in the request) in the job's directory, run there when the client's directory is not on this host."""
    argv = list(req["argv"])
    if req.get("script") is not None:
        path = os.path.join(req["work"], os.path.basename(argv[0]))
        with open(path, "wb") as f:
            f.write(base64.b64decode(req["script"]))
        argv[0] = path
    cwd = req.get("cwd")
    return dict(req, argv=argv, cwd=cwd if cwd and os.path.isdir(cwd) else req["work"])


def _relay(conn, relay, ready, drain=False):
    """Send the client what the job's process wrote to the pipes in ready, as answers ({"out": 1 or 2, "data": base64}); a pipe at its end leaves relay. With drain, read each until nothing is left."""
    for fd in ready:
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                del relay[fd]
                os.close(fd)
                break
            _send(conn, {"out": relay[fd], "data": base64.b64encode(data).decode()})
            if not drain:
                break


def _run_dir(req):
    """Make a run's directory on this rank's host: its function (the request's payload) and a results directory."""
    from ._run import PAYLOAD
    work = tempfile.mkdtemp(prefix="spindle-session-run-")
    os.mkdir(os.path.join(work, "results"))
    with open(os.path.join(work, PAYLOAD), "wb") as f:
        f.write(base64.b64decode(req.get("payload") or ""))
    return work


def _run_results(work, rank):
    """What a run's process left in its directory, for its answer: its pickled result, or its traceback's end; the directory is removed."""
    out = {}
    try:
        for key, name, mode in (("result", f"rank-{rank}.pkl", "rb"), ("err", f"rank-{rank}.err", "r")):
            try:
                with open(os.path.join(work, "results", name), mode) as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            out[key] = base64.b64encode(data).decode() if mode == "rb" else data
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _die_with_parent():
    """Have the kernel end this process when the zygote ends (a killed session must not leave its jobs running)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _own_group(pid):
    """Put a job's process in a process group of its own (both sides call this: whichever runs first wins the race)."""
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it already, or is gone


def _wait_child(conn, pid, relay):
    """Tell the client the job's pid and wait for the job's process, relaying its output (relay: pipe -> stream) meanwhile; when the client goes away first (Ctrl-C, a killed notebook), end the job's process group.

    A client gone before the pid is sent makes sending it fail (EPIPE),
    and one that left it unread makes the next read fail (ECONNRESET):
    both are a client gone too. The job's process can start running (and
    be interrupted) before this process answers, as it did under load.
    """
    try:
        _send(conn, {"pid": pid})
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                # What it wrote last; a process it left behind holding
                # the pipes does not hold up the answer.
                for fd in relay:
                    os.set_blocking(fd, False)
                _relay(conn, relay, list(relay), drain=True)
                return status
            readable, _, _ = select.select([conn, *relay], [], [], 0.05)
            if conn in readable and not conn.recv(1, socket.MSG_PEEK):
                break
            _relay(conn, relay, [fd for fd in readable if fd in relay])
    except OSError:
        pass
    return _end_group(pid)


def _end_group(pid):
    """End the job's process group, gently first; return its process's wait status."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + (grace or 0)
        while grace is None or time.monotonic() < deadline:
            done, status = os.waitpid(pid, 0 if grace is None else os.WNOHANG)
            if done:
                return status
            time.sleep(0.02)


def _preload_names():
    return [m for m in os.environ.get(PRELOAD, "").split(",") if m]


def main():
    directory = os.environ.get(SESSION_DIR)
    if not directory:
        sys.exit("spindle._zygote: SPINDLE_SESSION_DIR is not set: spindle.Session starts this module, not a user")
    # Never seen by the jobs this process forks.
    token_file = os.environ.pop(_contract.SESSION_TOKEN_FILE, "")
    here = os.path.isdir(directory)
    if not here and not token_file:
        sys.exit(f"spindle session: rank {_env.rank()} runs on host {socket.gethostname()}, where the session's "
                 f"directory {directory} is not: a session's ranks must run on the host that started it, "
                 "unless its master is standalone or yarn")
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
    rank = _env.rank()
    if not here:
        # Away from the session's directory, the token came with the job.
        directory = os.environ.get(_contract.FILES_DIR, "")
    with open(os.path.join(directory, "token" if here else token_file), "rb") as f:
        token = f.read().strip()
    lis = _unix_listener(directory, rank) if here else _tcp_listener(rank)
    going = True
    while going:
        conn, _ = lis.accept()
        with conn:
            try:
                going = _serve_one(conn, token, rank, lis)
            except (OSError, ValueError) as e:
                print(f"spindle session: a request failed: {e}", file=sys.stderr, flush=True)
    lis.close()


def _unix_listener(directory, rank):
    """Listen on rank's socket in the session's directory (mode 0600), published once it listens."""
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
    return lis


def _tcp_listener(rank):
    """Listen on this rank's host (SPINDLE_HOST, the address its peers dial) on a free port, and say where in the job's output."""
    host = os.environ.get(_contract.HOST) or socket.gethostname()
    lis = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=8)
    port = lis.getsockname()[1]
    addr = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    print(ADDRESS_MARK.format(rank=rank, addr=addr), flush=True)
    return lis


if __name__ == "__main__":
    main()
