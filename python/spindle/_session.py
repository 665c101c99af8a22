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
import subprocess
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

# The configuration keys of a session with pushed input.
PUT_SCHEMA = "spindle.flight.put.schema"
PUT_TURNS = "spindle.flight.put.turnEpochs"

# A rank serving over TCP says where, in the session job's output.
_ADDRESS = re.compile(re.escape(ADDRESS_MARK).replace(r"\{rank\}", r"(\d+)").replace(r"\{addr\}", r"(\S+)") + "$")


class Session:
    """Warm ranks that run job after job: ``with spindle.Session(num_executors=2, preload=["torch"]) as s: s.run(fn)``.

    master is local (``local[N]``, the default with N = num_executors),
    standalone (``spindle://...``) or ``yarn`` (client mode), whose ranks
    away from this host the session reaches over TCP. preload names the
    modules every rank imports once, before the first job. With input
    (and label_column, feed, ... as spindle.submit takes them), every
    job reads epochs epochs of it; with ``input="flight-put:"`` (and the
    schema in ``conf["spindle.flight.put.schema"]``) each job's rows are
    pushed for it alone, by spindle.spark.train(df, fn, session=s).
    Other options are spindle.submit's (env, conf, python, stream, ...). The constructor returns once every
    rank has imported them and waits for jobs; timeout bounds that wait.
    """

    def __init__(self, master=None, num_executors=2, preload=(), timeout=300, **submit_options):
        master = master or f"local[{num_executors}]"
        if master not in ("local", "yarn") and not master.startswith(("local[", "spindle://")):
            raise SpindleError(f"spindle.Session: master {master!r}: a session needs a local master (local[N]), "
                               "a standalone one (spindle://) or yarn")
        if submit_options.get("deploy_mode", "client") != "client":
            raise SpindleError("spindle.Session: deploy_mode='cluster': a session's driver runs here, in client mode")
        if submit_options.get("input") == "flight-put:":
            from . import spark
            # Spark's executors on other hosts push where they can reach (Spark started first).
            submit_options["input"] = spark.push_input(master)
        #: The epochs each job reads, with input; None without.
        self.epochs = None
        if submit_options.get("input"):
            epochs = submit_options.pop("epochs", None)
            self.epochs = 1 if epochs is None else int(epochs)
            if self.epochs < 1:
                raise SpindleError(f"spindle.Session: epochs={self.epochs}: each job needs at least 1")
        #: The label column every job's feed has last, or None.
        self.label_column = submit_options.get("label_column")
        #: With pushed input, the schema every job's rows have (spindle.flight.put.schema); else None.
        self.push_schema = _pushed_schema(submit_options, self.epochs)
        self.pushed = self.push_schema is not None
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
        traceback's last lines. In a session with pushed input, this job's
        turn gets no rows (spindle.spark.train pushes a DataFrame's).
        """
        r = self.start(fn, *args, kwargs=kwargs)
        r.wait()
        return r.results(all_ranks)

    def start(self, fn, *args, kwargs=None, pushed=False):
        """Start fn(*args, **kwargs) on every rank as run() does and return its :class:`SessionRun`, not waiting for it.

        Until it ends, the session runs no other job. In a session with
        pushed input, pushed says that its turn is fed (spindle.spark.push
        (df, run)); otherwise the turn ends at once, empty.
        """
        # One job at a time, from this process or spindle submit --session:
        # each rank serves its requests in turn, so two jobs let in at once
        # could each hold a rank the other waits for.
        self._lock.acquire()
        try:
            lock = open(os.path.join(self._dir, "run.lock"), "a")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                run = SessionRun(self, next_job(self._dir), _run.payload(fn, args, kwargs or {}))
                if self.pushed and not pushed:
                    end_turn(run)  # nothing comes: its ranks see the turn's end at once
                run._begin(lock)
                return run
            except BaseException:
                lock.close()
                raise
        except BaseException:
            self._lock.release()
            raise

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


class SessionRun:
    """One job of a :class:`Session`, running on its warm ranks (Session.start).

    It has what spindle.spark.push needs of a job: ``job_id``
    (SESSION_JOB_ID/N), ``turn`` (N, the session job's number, which its
    pushed rows name), ``push_endpoint()``, ``exit_code`` (None while it
    runs, 0, or 1 when a rank failed) and ``wait``; ``results()`` after.
    """

    def __init__(self, session, n, payload):
        self.session, self.turn = session, n
        self.job_id = f"{session.job.job_id}/{n}"
        self.exit_code = None
        self._payload = payload
        self._error = None
        self._ends = [None] * session.num_executors
        self._conns = []
        self._done = threading.Event()

    def _begin(self, lock):
        s = self.session
        # The function travels in the request and the results in the
        # answers, so a rank on another host needs nothing of this one's.
        # MASTER_PORT is free on rank 0's host, where PyTorch's store binds it.
        port = s._ask(0, {"op": "port"}, timeout=60)[0]["port"]
        env = {_contract.MASTER_PORT: str(port), _contract.SESSION_JOB: str(self.turn)}
        req = {"op": "run", "payload": base64.b64encode(self._payload).decode(), "env": env}
        s.last_pids = [None] * s.num_executors
        errors = [None] * s.num_executors

        def one(r):
            try:
                self._ends[r] = s._ask(r, req, conns=self._conns,
                                       on_answer=lambda a: a.get("pid") and s.last_pids.__setitem__(r, a["pid"]))[-1]
            except Exception as e:  # noqa: BLE001 - reported by rank
                errors[r] = e

        threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(s.num_executors)]
        for t in threads:
            t.start()

        def finish():
            try:
                for t in threads:
                    t.join()
                self._error = self._failure_of(errors)
                self.exit_code = 1 if self._error else 0
                if s.pushed:
                    # A push that failed or was cut short left the turn
                    # open: the next job's ranks skip it once it ends.
                    end_turn(self, quiet=True)
            finally:
                lock.close()
                s._lock.release()
                self._done.set()

        threading.Thread(target=finish, name=f"spindle-session-job-{self.turn}", daemon=True).start()

    def _failure_of(self, errors):
        for r, e in enumerate(errors):
            if e is not None:
                err = SpindleError(f"session job {self.turn}: rank {r}: {e}")
                err.__cause__ = e
                return err
            if self._ends[r].get("exit") != 0:
                tail = self._ends[r].get("err", "")
                return SpindleError(f"session job {self.turn}: rank {r} failed (exit {self._ends[r].get('exit')})\n{tail}".rstrip())
        return None

    def push_endpoint(self, timeout=60):
        """The session's push endpoint, where this job's turn is pushed."""
        return self.session.job.push_endpoint(timeout=timeout)

    def kill(self):
        """End the job's processes on every rank (a rank whose client goes away ends them)."""
        for c in list(self._conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def wait(self, timeout=None, check=True):
        """Wait for the job; return its exit code, raising its SpindleError when a rank failed (with check).

        Interrupting it (Ctrl-C) ends the job's processes first.
        """
        try:
            if not self._done.wait(timeout):
                raise subprocess.TimeoutExpired(f"session job {self.job_id}", timeout)
        except KeyboardInterrupt:
            self.kill()
            raise
        if check and self._error is not None:
            raise self._error
        return self.exit_code

    def _failure(self):
        return self._error or SpindleError(f"session job {self.job_id} failed")

    def results(self, all_ranks=False):
        """Return rank 0's result, or with all_ranks a list of every rank's."""
        self.wait()
        ranks = range(self.session.num_executors) if all_ranks else [0]
        out = [_run.loads(base64.b64decode(self._ends[r]["result"])) for r in ranks]
        return out if all_ranks else out[0]


def end_turn(run, quiet=False):
    """End a session job's turn of the pushed input (end-of-input with its number): its ranks see the end of its rows once they have had them.

    quiet ignores a failure (a turn its ranks have gone past already).
    """
    from . import spark
    try:
        spark.end_input(run)
    except Exception:  # noqa: BLE001 - quiet: the turn is over either way
        if not quiet:
            raise


def _pushed_schema(submit_options, epochs):
    """With pushed input (flight-put:), check the session's options and set its turns; return its schema spec, else None."""
    inputs = submit_options.get("input")
    inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
    if not any(str(i).startswith("flight-put:") for i in inputs):
        return None
    conf = dict(submit_options.get("conf") or {})
    if not conf.get(PUT_SCHEMA):
        raise SpindleError(f"spindle.Session: input='flight-put:' needs conf={{'{PUT_SCHEMA}': ...}} "
                           "(spindle.spark.push_schema(df.schema)): every job of the session pushes rows of that schema, "
                           "and its ranks start before any is pushed")
    conf[PUT_TURNS] = str(epochs)
    submit_options["conf"] = conf
    return str(conf[PUT_SCHEMA])


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

