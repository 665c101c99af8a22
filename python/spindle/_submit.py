"""Submitting jobs from Python: spindle.submit, a Job handle, and JobFailed.

A Job runs ``spindle submit`` as a child process with ``--events-file``:
the ranks' output arrives on its stdout and stderr (streamed into the
caller's, a notebook cell's, as it comes), and the events file says, as
JSON lines, the job id, where its web UI and pushed input are, its state,
and at the end how it ended, naming the failed rank and its stderr tail.
"""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref

from . import _contract
from ._errors import SpindleError

# Flags taking one value: submit's keyword -> spindle submit's flag.
_VALUE_FLAGS = (
    "master", "deploy_mode", "name", "num_executors", "executor_cores", "executor_memory", "executor_gpus",
    "num_ps", "ps_command", "queue", "principal", "keytab", "input_format", "label_column", "feed", "batch_rows",
    "epochs", "seed", "checkpoint_dir", "python", "log_level", "properties_file",
)
# Flags given once per value.
_LIST_FLAGS = ("input", "files", "archives", "py_files")
_BOOL_FLAGS = ("shuffle", "chief")
# How long kill() lets a job stop its executors before it insists.
_KILL_GRACE = 30.0


class JobFailed(SpindleError):
    """A job that did not succeed.

    ``rank`` is the failed rank (None when the failure names none, -1 when
    its executor failed before it had a rank), ``host`` where it ran,
    ``stderr_tail`` the last lines its training process wrote on stderr,
    ``exit_code`` spindle submit's exit status (1 failed, 2 bad input found
    before anything ran, 130 killed), ``state`` FAILED or KILLED.
    """

    def __init__(self, message, job_id=None, exit_code=None, state="FAILED", rank=None, host=None, stderr_tail=""):
        super().__init__(message)
        self.job_id, self.exit_code, self.state = job_id, exit_code, state
        self.rank, self.host, self.stderr_tail = rank, host, stderr_tail


def binary():
    """Return the spindle executable to run: $SPINDLE_BINARY, the one beside this interpreter, or PATH's."""
    env = os.environ.get(_contract.BINARY)
    if env:
        return env
    # A notebook kernel from a venv may not have the venv's bin on PATH.
    beside = os.path.join(sysconfig.get_path("scripts"), "spindle")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("spindle")
    if found:
        return found
    raise SpindleError("no spindle binary: pip install spindle-ml (it puts spindle on PATH), or set SPINDLE_BINARY")


def command_line(command):
    """Turn a training command (a list, a shell-quoted string, or a .py script) into argv."""
    if isinstance(command, (list, tuple)):
        argv = [str(a) for a in command]
    elif isinstance(command, str):
        argv = shlex.split(command)
    else:
        raise TypeError(f"command must be a string or a list of strings, not {type(command).__name__}")
    if not argv:
        raise ValueError("empty training command")
    if argv[0].endswith(".py"):
        argv = [sys.executable] + argv
    return argv


def submit_args(options):
    """Return spindle submit's flags for submit()'s keyword options; unknown keys raise TypeError."""
    args = []
    for key, value in options.items():
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if key in _VALUE_FLAGS:
            args += [flag, str(value)]
        elif key in _LIST_FLAGS:
            for v in [value] if isinstance(value, str) else value:
                args += [flag, str(v)]
        elif key in _BOOL_FLAGS:
            if value:
                args.append(flag)
        elif key == "conf":
            for k, v in value.items():
                args += ["--conf", f"{k}={_conf_value(v)}"]
        elif key == "env":
            for k, v in value.items():
                args += ["--env", f"{k}={v}"]
        else:
            raise TypeError(f"spindle.submit got an unknown option {key!r}")
    return args


def _conf_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def submit(command, *, stream=True, cwd=None, _tap=None, **options):
    """Start a job, as ``spindle submit [options] -- command`` does, and return its :class:`Job`.

    command is a list, a shell-quoted string, or a script (``train.py``,
    run with this interpreter). Options are submit's flags with underscores
    (``master="local[2]"``, ``num_executors=4``, ``input=[...]``,
    ``label_column="label"``, ``feed="tensor"``, ``epochs=3``,
    ``shuffle=True``, ``conf={"spindle.job.timeout": "1h"}``,
    ``env={"K": "V"}``, ``files=[...]``, ``log_level="info"``; the driver's
    own log defaults to warn). With stream the ranks' output is copied to
    this process's stdout and stderr as it arrives (a notebook cell's).
    """
    options.setdefault("log_level", "warn")
    return Job(command_line(command), submit_args(options), stream=stream, cwd=cwd, tap=_tap)


class Job:
    """A running ``spindle submit``: its state, output, web UI, and how it ended."""

    def __init__(self, argv, flags, stream=True, cwd=None, tap=None):
        self._dir = tempfile.mkdtemp(prefix="spindle-job-")
        # Removed when the handle is left (with-block, garbage collection or
        # the interpreter's exit), not only by a with-block.
        self._remove_dir = weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
        self._events_path = os.path.join(self._dir, "events.jsonl")
        self.command = argv
        self._stream = stream
        self._cond = threading.Condition()
        self._lines = []  # (stream, line) of the job's output, in order
        # tap(stream, line) sees each output line first; True keeps it out of the output.
        self._tap = tap or (lambda stream, line: False)
        self._state = "SUBMITTED"
        self._events_lock = threading.Lock()
        self._events_pos, self._events_pending = 0, b""
        self._info = {}
        self._web_url = None
        self._result = None
        full = [binary(), "submit"] + flags + ["--events-file", self._events_path, "--"] + argv
        # Its own session, so a notebook's interrupt reaches the job only
        # through kill(), which stops it gracefully.
        self._proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                      cwd=cwd, start_new_session=True)
        self._threads = [threading.Thread(target=self._pump, args=(self._proc.stdout, "stdout"), daemon=True),
                         threading.Thread(target=self._pump, args=(self._proc.stderr, "stderr"), daemon=True),
                         threading.Thread(target=self._follow_events, daemon=True)]
        for t in self._threads:
            t.start()

    # Output ----------------------------------------------------------------

    def _pump(self, pipe, stream):
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if self._tap(stream, line):
                continue
            with self._cond:
                self._lines.append((stream, line))
                self._cond.notify_all()
            if self._stream:
                out = sys.stdout if stream == "stdout" else sys.stderr
                print(line, file=out, flush=True)
        pipe.close()

    def logs(self, follow=True):
        """Yield the job's output lines ("[rank N] ..." and the driver's), from the first.

        With follow, wait for more until the job ends; else stop at the
        lines that came so far.
        """
        i = 0
        while True:
            with self._cond:
                while follow and i >= len(self._lines) and not self._output_done():
                    self._cond.wait(0.5)
                if i >= len(self._lines):
                    return
                batch = self._lines[i:]
            for _, line in batch:
                yield line
            i += len(batch)

    def _output_done(self):
        return self._proc.poll() is not None and not any(t.is_alive() for t in self._threads[:2])

    # Events ----------------------------------------------------------------

    def _follow_events(self):
        while True:
            exited = self._proc.poll() is not None
            if not self._read_events() and exited:
                break
            time.sleep(0.05)
        with self._cond:
            self._cond.notify_all()

    def _read_events(self):
        """Take the events the driver wrote since the last read; say whether there were any.

        The follower thread calls it every 50 ms, and status before it
        answers, so a caller never sees a state older than the file.
        """
        with self._events_lock:
            try:
                with open(self._events_path, "rb") as f:
                    f.seek(self._events_pos)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            self._events_pos += len(chunk)
            self._events_pending += chunk
            *whole, self._events_pending = self._events_pending.split(b"\n")
            for line in whole:
                if line.strip():
                    self._event(json.loads(line))
            return bool(chunk)

    def _event(self, ev):
        with self._cond:
            kind = ev.get("kind")
            if kind == "submitted":
                self._info = ev.get("info") or {}
            elif kind == "job_state":
                self._state = ev.get("state", self._state)
            elif kind == "web_ui":
                self._web_url = ev.get("message")
            elif kind == "result":
                self._result = ev
                self._state = ev.get("state", self._state)
            self._cond.notify_all()

    def _wait_for(self, pred, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not pred():
                if self._proc.poll() is not None and not self._threads[2].is_alive():
                    return pred()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.2 if left is None else min(0.2, left))
            return True

    @property
    def job_id(self):
        """The job's id (the standalone or YARN application id), once the driver has one."""
        return self._info.get("id")

    @property
    def status(self):
        """SUBMITTED, RUNNING, SUCCEEDED, FAILED or KILLED."""
        self._read_events()
        return self._state

    @property
    def web_url(self):
        """The job's web UI, once it listens (None when the job has none)."""
        self._wait_for(lambda: self._web_url is not None or self._result is not None, 10)
        return self._web_url

    @property
    def exit_code(self):
        """spindle submit's exit status, None while it runs."""
        return self._proc.poll()

    def push_endpoint(self, timeout=60):
        """Return the job's pushed input ({"endpoint", "token_file", "ca_file"}), waiting for the driver to say it.

        Raises SpindleError when the job has no pushed input (its input is
        not flight-put:) or ended first.
        """
        if not self._wait_for(lambda: bool(self._info) or self._result is not None, timeout):
            raise SpindleError(f"spindle submit said nothing about the job within {timeout}s")
        push = self._info.get("push")
        if not push:
            if self._result is not None and not self._info:
                raise self._failure()
            raise SpindleError(f"job {self.job_id} takes no pushed input: submit it with input=\"flight-put:\"")
        return push

    # Ending ----------------------------------------------------------------

    def wait(self, timeout=None, check=True):
        """Wait for the job to end and return its exit code; raise :class:`JobFailed` when it failed (with check).

        Interrupting the wait (Ctrl-C, a notebook's stop button) kills the
        job before the KeyboardInterrupt goes on.
        """
        try:
            code = self._proc.wait(timeout)
        except KeyboardInterrupt:
            self.kill()
            raise
        for t in self._threads:
            t.join()
        if check and code != 0:
            raise self._failure()
        return code

    def _failure(self):
        r = self._result or {}
        code = self._proc.poll()
        msg = r.get("message") or self._last_stderr() or f"spindle submit exited with status {code}"
        return JobFailed(msg, job_id=r.get("job_id") or self.job_id, exit_code=code, state=r.get("state", "FAILED"),
                         rank=r.get("failed_rank"), host=r.get("host"), stderr_tail=r.get("stderr_tail", ""))

    def _last_stderr(self):
        with self._cond:
            for stream, line in reversed(self._lines):
                if stream == "stderr" and line.strip():
                    return line.strip()
        return ""

    def kill(self, grace=_KILL_GRACE):
        """Stop the job: every executor is stopped, training processes get their grace period.

        Past grace seconds it is told again (no more grace), and past
        twice that the submit process is killed.
        """
        for sig, wait in ((signal.SIGINT, grace), (signal.SIGINT, grace), (signal.SIGKILL, None)):
            if self._proc.poll() is not None:
                break
            try:
                self._proc.send_signal(sig)
            except ProcessLookupError:
                break
            try:
                self._proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        for t in self._threads:
            t.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._proc.poll() is None:
            self.kill()
        self._remove_dir()
        return False

    def __repr__(self):
        return f"<spindle.Job {self.job_id or '(starting)'} {self.status}>"


