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
0600), so only the session's owner can start work in it. The sockets are
on the zygotes' host: a session's ranks run on this host, from a local
master (``local[N]``) or a standalone one whose workers run here.
"""

import fcntl
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time

from . import _contract, _run, _submit
from ._errors import SpindleError
from ._zygote import PRELOAD, SESSION_DIR, socket_path

# How many jobs of a session with input read its feed: the session's job
# serves this many turns of the epochs each job reads.
MAX_FED_JOBS = 100000


class Session:
    """Warm ranks that run job after job: ``with spindle.Session(num_executors=2, preload=["torch"]) as s: s.run(fn)``.

    master is local (``local[N]``, the default with N = num_executors)
    or standalone (``spindle://...``) with its workers on this host: the
    session reaches its ranks over Unix sockets here. preload names the
    modules every rank imports once, before the first job. With input
    (and label_column, feed, ... as spindle.submit takes them), every
    job reads epochs epochs of it. Other options are spindle.submit's
    (env, conf, python, stream, ...). The constructor returns once every
    rank has imported them and waits for jobs; timeout bounds that wait.
    """

    def __init__(self, master=None, num_executors=2, preload=(), timeout=300, **submit_options):
        master = master or f"local[{num_executors}]"
        if master != "local" and not master.startswith(("local[", "spindle://")):
            raise SpindleError(f"spindle.Session: master {master!r}: a session needs a local master (local[N]), "
                               "or a standalone one (spindle://) whose workers run on this host, for now")
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
        if self.epochs:
            # The session's job serves epoch after epoch; job n of the
            # session reads its own turn of them (SESSION_EPOCHS).
            submit_options["epochs"] = self.epochs * MAX_FED_JOBS
            env[_contract.SESSION_EPOCHS] = str(self.epochs)
        python = submit_options.pop("python", None) or sys.executable
        submit_options.setdefault("name", "spindle-session")
        self.job = _submit.submit([python, "-m", "spindle._zygote"], master=master, num_executors=num_executors,
                                  env=env, **submit_options)
        try:
            self.zygotes = self._wait_ready(timeout)
        except BaseException:
            self.close()
            raise

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
                if r not in pids and os.path.exists(socket_path(self._dir, r)):
                    pids[r] = self._ask(r, {"op": "ping"})[0]["pid"]
            if time.monotonic() > deadline:
                raise SpindleError(f"spindle.Session: ranks {sorted(set(range(self.num_executors)) - set(pids))} "
                                   f"were not ready (importing {', '.join(self.preload) or 'nothing'}) within {timeout}s")
            time.sleep(0.02)
        return [pids[r] for r in range(self.num_executors)]

    def _ask(self, rank, request, on_answer=None):
        return ask(self._dir, self._token, rank, request, on_answer)

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
        work = tempfile.mkdtemp(prefix=f"job-{n}-", dir=self._dir)
        os.mkdir(os.path.join(work, "results"))
        try:
            with open(os.path.join(work, _run.PAYLOAD), "wb") as f:
                f.write(_run.payload(fn, args, kwargs or {}))
            env = {_contract.MASTER_PORT: str(_free_port()), _contract.SESSION_JOB: str(n)}
            req = {"op": "run", "work": work, "env": env}
            self.last_pids = [None] * self.num_executors
            codes = [None] * self.num_executors
            errors = [None] * self.num_executors

            conns = []

            def one(r):
                try:
                    got = ask(self._dir, self._token, r, req, conns=conns,
                              on_answer=lambda a: a.get("pid") and self.last_pids.__setitem__(r, a["pid"]))
                    codes[r] = got[-1].get("exit")
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
                if codes[r] != 0:
                    tail = ""
                    err = os.path.join(work, "results", f"rank-{r}.err")
                    if os.path.exists(err):
                        with open(err) as f:
                            tail = f.read()
                    raise SpindleError(f"session job {n}: rank {r} failed (exit {codes[r]})\n{tail}".rstrip())
            out = []
            for r in range(self.num_executors if all_ranks else 1):
                with open(os.path.join(work, "results", f"rank-{r}.pkl"), "rb") as f:
                    out.append(_run.loads(f.read()))
            return out if all_ranks else out[0]
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def close(self, timeout=60):
        """Stop the ranks and end the session's job."""
        try:
            if self.job.exit_code is None:
                # A rank busy with a job answers when it ends; past the
                # timeout the job is killed below.
                for r in range(self.num_executors):
                    try:
                        ask(self._dir, self._token, r, {"op": "stop"}, timeout=10)
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


def ask(directory, token, rank, request, on_answer=None, fds=(), conns=None, timeout=None):
    """Send rank's zygote in session directory one request; return its answers (one, or two for a job: the child's pid, its exit).

    conns, a list, gets the connection, for a caller that may need to end
    it; timeout bounds each wait on it (socket.timeout, an OSError).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        if conns is not None:
            conns.append(s)
        s.connect(socket_path(directory, rank))
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
