"""`spindle session start|stop|list`: sessions from the command line.

The spindle binary runs ``python3 -m spindle._session_cli ...`` with the
package it carries. ``start`` spawns a detached process that holds a
:class:`spindle.Session` open and records it, as ID.json (mode 0600, with
the token), in a directory of this user's (mode 0700); ``stop`` ends the
session's job. ``spindle submit --session ID`` reads that record and runs
a Python command line in the session's ranks itself (package
internal/warm of the binary), without a Python client to start first.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from . import _contract
from ._errors import SpindleError
from ._session import Session, ask


def registry():
    """The directory of this user's sessions, made private when missing."""
    d = os.environ.get(_contract.SESSIONS_DIR) or os.path.join(tempfile.gettempdir(), f"spindle-sessions-{os.getuid()}")
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
                    **_job_options(a))
    except BaseException as e:  # noqa: BLE001 - told to the starting command
        _write_record(ready, {"error": str(e)})
        raise
    path = os.path.join(registry(), f"{s.job.job_id}.json")
    rec = {"id": s.job.job_id, "dir": s._dir, "token": s._token, "num_executors": s.num_executors,
           "preload": s.preload, "pid": os.getpid(), "started": time.time(),
           "addrs": [s.addrs.get(r, "") for r in range(s.num_executors)]}
    signal.signal(signal.SIGTERM, lambda *_: s.job.kill(grace=5))
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


def _job_options(a):
    """The session job's options that start and _serve were given: its interpreter and its input."""
    opts = {"python": a.python}
    if any(i.startswith("flight-put:") for i in a.input):
        raise SpindleError("--input flight-put:: a session's pushed input is fed from Python, by spindle.Session(input="
                           "'flight-put:', ...) and spindle.spark.train(df, fn, session=s); the command line's jobs "
                           "(spindle submit --session) would have nothing pushed to them")
    if a.input:
        opts.update(input=a.input, input_format=a.input_format, label_column=a.label_column, feed=a.feed,
                     epochs=a.epochs, batch_rows=a.batch_rows)
    if a.conf:
        conf = {}
        for kv in a.conf:
            k, eq, v = kv.partition("=")
            if not eq or not k:
                raise SpindleError(f"--conf {kv!r}: want KEY=VALUE")
            conf[k] = v
        opts["conf"] = conf
    return {k: v for k, v in opts.items() if v is not None}


def start(a):
    _job_options(a)  # refuses a bad --conf before anything starts
    reg = registry()
    ready = os.path.join(reg, f".starting-{os.getpid()}.json")
    log = os.path.join(reg, f".starting-{os.getpid()}.log")
    argv = [sys.executable, "-m", "spindle._session_cli", "_serve", "--ready-file", ready,
            "--num-executors", str(a.num_executors)]
    argv += ["--master", a.master] if a.master else []
    argv += ["--python", a.python] if a.python else []
    for name in ("input_format", "label_column", "feed", "epochs", "batch_rows"):
        if getattr(a, name) is not None:
            argv += ["--" + name.replace("_", "-"), str(getattr(a, name))]
    for name in ("preload", "input", "conf"):
        for v in getattr(a, name):
            argv += ["--" + name, v]
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
            ask(rec["dir"], rec["token"], r, {"op": "stop"}, timeout=10,
                addrs={i: a for i, a in enumerate(rec.get("addrs") or []) if a})
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


def main(argv=None):
    ap = argparse.ArgumentParser(prog="spindle session")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("start", "_serve"):
        p = sub.add_parser(name)
        p.add_argument("--num-executors", type=int, default=2)
        p.add_argument("--master")
        p.add_argument("--python")
        p.add_argument("--preload", action="append", default=[])
        p.add_argument("--input", action="append", default=[])
        p.add_argument("--conf", action="append", default=[])
        p.add_argument("--input-format")
        p.add_argument("--label-column")
        p.add_argument("--feed")
        p.add_argument("--epochs", type=int)
        p.add_argument("--batch-rows", type=int)
        p.add_argument("--timeout", type=float, default=300)
        if name == "_serve":
            p.add_argument("--ready-file", required=True)
    p = sub.add_parser("stop")
    p.add_argument("session")
    p.add_argument("--timeout", type=float, default=60)
    sub.add_parser("list")
    a = ap.parse_args(argv)
    if hasattr(a, "preload"):
        a.preload = [m for p in a.preload for m in p.split(",") if m]
    try:
        return {"start": start, "_serve": serve, "stop": stop, "list": list_sessions}[a.cmd](a) or 0
    except SpindleError as e:
        print(f"spindle session {a.cmd}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
