"""`spindle session start|stop|list` and `spindle submit --session ID`: sessions from the command line.

The spindle binary runs ``python3 -m spindle._session_cli ...`` with the
package it carries. ``start`` spawns a detached process that holds a
:class:`spindle.Session` open and records it, as ID.json (mode 0600), in
a directory of this user's (mode 0700); ``submit`` runs a Python command
line on every rank of the session, each rank in a process forked from its
warm one, with this terminal's stdout and stderr; ``stop`` ends the
session's job. Exit status: 0 when every rank exited 0, 1 when a rank
failed, 2 for bad input found before anything ran.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from ._errors import SpindleError
from ._session import Session, _free_port, ask


def registry():
    """The directory of this user's sessions, made private when missing."""
    d = os.environ.get("SPINDLE_SESSIONS_DIR") or os.path.join(tempfile.gettempdir(), f"spindle-sessions-{os.getuid()}")
    os.makedirs(d, mode=0o700, exist_ok=True)
    st = os.stat(d)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SpindleError(f"session registry {d} is not this user's private directory (mode 0700): remove it or fix it")
    return d


def _record(session_id):
    path = os.path.join(registry(), f"{session_id}.json")
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SpindleError(f"no session {session_id!r} (spindle session list shows them)") from None


def _write_record(path, rec):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(rec, f)
    os.replace(tmp, path)


def serve(a):
    """The detached process: hold a session open until its job ends, recording it meanwhile."""
    ready = a.ready_file
    try:
        s = Session(master=a.master, num_executors=a.num_executors, preload=a.preload, stream=False,
                    **({"python": a.python} if a.python else {}))
    except BaseException as e:  # noqa: BLE001 - told to the starting command
        _write_record(ready, {"error": str(e)})
        raise
    path = os.path.join(registry(), f"{s.job.job_id}.json")
    rec = {"id": s.job.job_id, "dir": s._dir, "token": s._token, "num_executors": s.num_executors,
           "preload": s.preload, "pid": os.getpid(), "started": time.time()}
    signal.signal(signal.SIGTERM, lambda *_: s.close())
    try:
        _write_record(path, rec)
        _write_record(ready, rec)
        s.job.wait(check=False)
    finally:
        s.close()
        for p in (path, ready):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def start(a):
    reg = registry()
    ready = os.path.join(reg, f".starting-{os.getpid()}.json")
    log = os.path.join(reg, f".starting-{os.getpid()}.log")
    argv = [sys.executable, "-m", "spindle._session_cli", "_serve", "--ready-file", ready,
            "--num-executors", str(a.num_executors)]
    argv += ["--master", a.master] if a.master else []
    argv += ["--python", a.python] if a.python else []
    for m in a.preload:
        argv += ["--preload", m]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + a.timeout
    while not os.path.exists(ready):
        if proc.poll() is not None or time.monotonic() > deadline:
            with open(log, errors="replace") as f:
                tail = f.read()[-2000:]
            if proc.poll() is None:
                proc.terminate()
            print(f"spindle session start: the session did not start within {a.timeout}s\n{tail}".rstrip(), file=sys.stderr)
            return 1
        time.sleep(0.05)
    with open(ready) as f:
        rec = json.load(f)
    if "error" in rec:
        print(f"spindle session start: {rec['error']}", file=sys.stderr)
        return 1
    os.unlink(ready)
    os.replace(log, os.path.join(reg, f"{rec['id']}.log"))
    print(rec["id"])
    return 0


def stop(a):
    rec = _record(a.session)
    for r in range(rec["num_executors"]):
        try:
            ask(rec["dir"], rec["token"], r, {"op": "stop"})
        except (OSError, SpindleError):
            pass
    deadline = time.monotonic() + a.timeout
    while _alive(rec["pid"]):
        if time.monotonic() > deadline:
            os.kill(rec["pid"], signal.SIGTERM)
            break
        time.sleep(0.05)
    try:
        os.unlink(os.path.join(registry(), f"{a.session}.log"))
    except FileNotFoundError:
        pass
    return 0


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def list_sessions(_):
    reg = registry()
    for name in sorted(os.listdir(reg)):
        if name.endswith(".json") and not name.startswith("."):
            with open(os.path.join(reg, name)) as f:
                rec = json.load(f)
            if _alive(rec["pid"]):
                print(f"{rec['id']}\t{rec['num_executors']} ranks\tpreloaded: {','.join(rec['preload']) or '-'}")
    return 0


def python_argv(argv):
    """The Python command line of argv for a warm interpreter: the interpreter dropped; only Python runs in a session."""
    if not argv:
        raise SpindleError("--session needs a command after --")
    if os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    elif not argv[0].endswith(".py"):
        raise SpindleError(f"--session runs Python in the session's warm interpreters: {argv[0]!r} is "
                           "not python nor a .py script (submit it without --session)")
    if not argv or (argv[0] in ("-m", "-c") and len(argv) < 2) or (argv[0].startswith("-") and argv[0] not in ("-m", "-c")):
        raise SpindleError(f"--session takes `python SCRIPT`, `python -m MODULE` or `python -c CODE`, "
                           f"not {' '.join(argv) or 'nothing'}")
    return argv


def submit(a):
    rec = _record(a.session)
    argv = python_argv(a.command)
    req = {"op": "exec", "argv": argv, "cwd": os.getcwd(), "env": {"MASTER_PORT": str(_free_port())}}
    n = rec["num_executors"]
    codes, errors = [None] * n, [None] * n

    lock = threading.Lock()

    def copy(r, fd, out):
        # Each line whole and marked with its rank, as spindle submit
        # shows a job's output.
        with os.fdopen(fd, "rb") as f:
            for line in f:
                with lock:
                    out.buffer.write(f"[rank {r}] ".encode() + line)
                    out.flush()

    def one(r):
        pipes = [os.pipe(), os.pipe()]
        copiers = [threading.Thread(target=copy, args=(r, rd, out)) for (rd, _), out in zip(pipes, (sys.stdout, sys.stderr))]
        for c in copiers:
            c.start()
        try:
            try:
                codes[r] = ask(rec["dir"], rec["token"], r, req, fds=[w for _, w in pipes])[-1].get("exit")
            finally:
                for _, w in pipes:
                    os.close(w)
        except Exception as e:  # noqa: BLE001 - reported below, by rank
            errors[r] = e
        for c in copiers:
            c.join()

    threads = [threading.Thread(target=one, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(n):
        if errors[r] is not None:
            print(f"spindle submit: session {a.session}: rank {r}: {errors[r]}", file=sys.stderr)
            return 1
        if codes[r] != 0:
            print(f"spindle submit: session {a.session}: rank {r} exited {codes[r]}", file=sys.stderr)
            return 1
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="spindle session")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("start", "_serve"):
        p = sub.add_parser(name)
        p.add_argument("--num-executors", type=int, default=2)
        p.add_argument("--master")
        p.add_argument("--python")
        p.add_argument("--preload", action="append", default=[])
        p.add_argument("--timeout", type=float, default=300)
        if name == "_serve":
            p.add_argument("--ready-file", required=True)
    p = sub.add_parser("stop")
    p.add_argument("session")
    p.add_argument("--timeout", type=float, default=60)
    sub.add_parser("list")
    p = sub.add_parser("submit")
    p.add_argument("session")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if getattr(a, "command", None) and a.command[0] == "--":
        a.command = a.command[1:]
    if hasattr(a, "preload"):
        a.preload = [m for p in a.preload for m in p.split(",") if m]
    try:
        return {"start": start, "_serve": serve, "stop": stop, "list": list_sessions, "submit": submit}[a.cmd](a) or 0
    except SpindleError as e:
        print(f"spindle {'submit' if a.cmd == 'submit' else 'session ' + a.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
