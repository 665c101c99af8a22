"""spindle.Session: warm ranks for many short jobs.

A session is one long-running Spindle job whose ranks are zygotes
(spindle._zygote): each imports the modules the session preloads once,
then forks a fresh process per job of the session. So a notebook's second
job has every rank running its function with torch imported in the time a
fork takes, not the seconds a new interpreter needs to import torch; and
as each job runs in a process of its own, nothing one job leaves in its
interpreter is seen by the next. The session's executors stay registered
with its driver between jobs.

The session talks to its zygotes over Unix sockets in a private directory
(mode 0700) and every request carries a token from a file there (mode
0600), so only the session's owner can start work in it. A zygote on a
standalone worker of another host, where that directory is not, serves
over TCP instead, with the token shipped to it as a job file; the
function and its result travel in the request and the answer.
"""

import base64
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time

from . import _contract, _run, _submit
from ._errors import SpindleError
from ._sessionwire import ADDRESS_MARK, PRELOAD, SESSION_DIR, socket_path

# How many jobs of a session with input read its feed: the session's job
# serves this many turns of the epochs each job reads.
MAX_FED_JOBS = 100000

# A rank serving over TCP says where, in the session job's output.
_ADDRESS = re.compile(re.escape(ADDRESS_MARK).replace(r"\{rank\}", r"(\d+)").replace(r"\{addr\}", r"(\S+)") + "$")


class Session:
    """Warm ranks that run job after job: ``with spindle.Session(num_executors=2, preload=["torch"]) as s: s.run(fn)``.

    master is local (``local[N]``, the default with N = num_executors),
    standalone (``spindle://...``) or ``yarn`` (client mode), whose ranks
    away from this host the session reaches over TCP. preload names the
    modules every rank imports once, before the first job. With input
    (and label_column, feed, ... as spindle.submit takes them), every
    job reads epochs epochs of it. Other options are spindle.submit's
    (env, conf, python, stream, ...). The constructor returns once every
    rank has imported them and waits for jobs; timeout bounds that wait.
    """

    def __init__(self, master=None, num_executors=2, preload=(), timeout=300, **submit_options):
        master = master or f"local[{num_executors}]"
        if master not in ("local", "yarn") and not master.startswith(("local[", "spindle://")):
            raise SpindleError(f"spindle.Session: master {master!r}: a session needs a local master (local[N]), "
                               "a standalone one (spindle://) or yarn")
        if submit_options.get("deploy_mode", "client") != "client":
            raise SpindleError("spindle.Session: deploy_mode='cluster': a session's driver runs here, in client mode")
        #: The epochs each job reads, with input; None without.
        self.epochs = None
        if submit_options.get("input"):
            epochs = submit_options.pop("epochs", None)
            self.epochs = 1 if epochs is None else int(epochs)
            if self.epochs < 1:
                raise SpindleError(f"spindle.Session: epochs={self.epochs}: each job needs at least 1")
        self.num_executors = num_executors
        self.preload = list(preload)
        self._dir = tempfile.mkdtemp(prefix="spindle-session-")
        os.chmod(self._dir, 0o700)
        self._token = secrets.token_hex(32)
        fd = os.open(os.path.join(self._dir, "token"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self._token)
        self._lock = threading.Lock()
        env = dict(submit_options.pop("env", None) or {})
        env.update({SESSION_DIR: self._dir, PRELOAD: ",".join(self.preload)})
        #: Where the ranks that serve over TCP (away from this host) listen, by rank.
        self.addrs = {}
        if master == "yarn" or master.startswith("spindle://"):
            # A rank on another host finds no session directory there: it
            # serves over TCP, with the token shipped as one of the job's
            # files (not its command line, which others may read).
            env[_contract.SESSION_TOKEN_FILE] = "token"
            files = submit_options.pop("files", None) or []
            submit_options["files"] = ([files] if isinstance(files, str) else list(files)) + [
                os.path.join(self._dir, "token")]
        if self.epochs:
            # The session's job serves epoch after epoch; job n of the
            # session reads its own turn of them (SESSION_EPOCHS).
            submit_options["epochs"] = self.epochs * MAX_FED_JOBS
            env[_contract.SESSION_EPOCHS] = str(self.epochs)
        python = submit_options.pop("python", None) or sys.executable
        submit_options.setdefault("name", "spindle-session")
        self.job = _submit.submit([python, "-m", "spindle._zygote"], master=master, num_executors=num_executors,
                                  env=env, _tap=self._take_address, **submit_options)
        try:
            self.zygotes = self._wait_ready(timeout)
        except BaseException:
            self.close()
            raise

    def _take_address(self, stream, line):
        m = _ADDRESS.search(line) if stream == "stdout" else None
        if m:
            self.addrs[int(m.group(1))] = m.group(2)
        return bool(m)

    def _wait_ready(self, timeout):
        """Wait until every rank's zygote answers; return their pids by rank."""
        deadline = time.monotonic() + timeout
        pids = {}
        while len(pids) < self.num_executors:
            if self.job.exit_code is not None:
                if self.job.exit_code != 0:
                    raise self.job._failure()
                raise SpindleError(f"session job {self.job.job_id} ended before its ranks were ready")
            for r in range(self.num_executors):
                if r not in pids and (r in self.addrs or os.path.exists(socket_path(self._dir, r))):
                    pids[r] = self._ask(r, {"op": "ping"})[0]["pid"]
            if time.monotonic() > deadline:
                raise SpindleError(f"spindle.Session: ranks {sorted(set(range(self.num_executors)) - set(pids))} "
                                   f"were not ready (importing {', '.join(self.preload) or 'nothing'}) within {timeout}s")
            time.sleep(0.02)
        return [pids[r] for r in range(self.num_executors)]

    def _ask(self, rank, request, on_answer=None, **kw):
        return ask(self._dir, self._token, rank, request, on_answer, addrs=self.addrs, **kw)

    def run(self, fn, *args, all_ranks=False, kwargs=None):
        """Run fn(*args, **kwargs) on every rank, each in a process forked from the warm one; return rank 0's result (all_ranks: every rank's).

        PyTorch jobs get MASTER_PORT fresh for each job. A rank that raises
        fails the call with a SpindleError naming it and carrying its
        traceback's last lines.
        """
        # One job at a time, from this process or spindle submit --session:
        # each rank serves its requests in turn, so two jobs let in at once
        # could each hold a rank the other waits for.
        with self._lock, open(os.path.join(self._dir, "run.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._run(next_job(self._dir), fn, args, all_ranks, kwargs)

    def _run(self, n, fn, args, all_ranks, kwargs):
        # The function travels in the request and the results in the
        # answers, so a rank on another host needs nothing of this one's.
        env = {_contract.MASTER_PORT: str(_free_port()), _contract.SESSION_JOB: str(n)}
        req = {"op": "run", "payload": base64.b64encode(_run.payload(fn, args, kwargs or {})).decode(), "env": env}
        self.last_pids = [None] * self.num_executors
        ends = [None] * self.num_executors
        errors = [None] * self.num_executors
        conns = []

        def one(r):
            try:
                ends[r] = self._ask(r, req, conns=conns,
                                    on_answer=lambda a: a.get("pid") and self.last_pids.__setitem__(r, a["pid"]))[-1]
            except Exception as e:  # noqa: BLE001 - reported below, by rank
                errors[r] = e

        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(self.num_executors)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            # A rank whose client goes away ends the job's process.
            for c in list(conns):
                c.shutdown(socket.SHUT_RDWR)
            raise
        for r in range(self.num_executors):
            if errors[r] is not None:
                raise SpindleError(f"session job {n}: rank {r}: {errors[r]}") from errors[r]
            if ends[r].get("exit") != 0:
                tail = ends[r].get("err", "")
                raise SpindleError(f"session job {n}: rank {r} failed (exit {ends[r].get('exit')})\n{tail}".rstrip())
        out = [_run.loads(base64.b64decode(ends[r]["result"])) for r in range(self.num_executors if all_ranks else 1)]
        return out if all_ranks else out[0]

    def close(self, timeout=60):
        """Stop the ranks and end the session's job."""
        try:
            if self.job.exit_code is None:
                # A rank busy with a job answers when it ends; past the
                # timeout the job is killed below.
                for r in range(self.num_executors):
                    try:
                        self._ask(r, {"op": "stop"}, timeout=10)
                    except (OSError, SpindleError):
                        pass
                try:
                    self.job.wait(timeout=timeout, check=False)
                except Exception:  # noqa: BLE001 - it is killed below
                    pass
            if self.job.exit_code is None:
                self.job.kill()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def ask(directory, token, rank, request, on_answer=None, fds=(), conns=None, timeout=None, addrs=None):
    """Send rank's zygote in session directory one request; return its answers (one, or two for a job: the child's pid, its exit).

    A rank away from this host is reached over TCP at addrs[rank]. conns,
    a list, gets the connection, for a caller that may need to end it;
    timeout bounds each wait on it (socket.timeout, an OSError).
    """
    path = socket_path(directory, rank)
    addr = (addrs or {}).get(rank)
    if addr and not os.path.exists(path):
        host, _, port = addr.rpartition(":")
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with s:
        s.settimeout(timeout)
        if conns is not None:
            conns.append(s)
        if s.family == socket.AF_UNIX:
            s.connect(path)
        data = json.dumps(dict(request, token=token)).encode() + b"\n"
        if fds:
            socket.send_fds(s, [data], list(fds))
        else:
            s.sendall(data)
        answers = []
        with s.makefile("rb") as f:
            for line in f:
                a = json.loads(line)
                if "error" in a:
                    raise SpindleError(f"session rank {rank}: {a['error']}")
                answers.append(a)
                if on_answer:
                    on_answer(a)
        return answers


def next_job(directory):
    """Count one more job in the session whose directory this is and return its number (1 for the first).

    The caller holds the session's run lock. The count (the file ``jobs``)
    is the session's, shared with ``spindle submit --session`` (Go's
    warm.NextJob), so that every job takes its own turn of the session's
    feed.
    """
    path = os.path.join(directory, "jobs")
    try:
        with open(path) as f:
            raw = f.read()
    except FileNotFoundError:
        raw = "0"
    try:
        last = int(raw.strip())
    except ValueError:
        raise SpindleError(f"session job count {path}: {raw!r} is not a count") from None
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(str(last + 1))
    os.replace(tmp, path)
    return last + 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
