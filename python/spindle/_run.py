"""spindle.run: call a Python function on every worker rank of a job and return its result.

The function and its arguments travel to the ranks as a file shipped with
the job (--files): pickled with cloudpickle, which carries functions
defined in a notebook or a __main__ script by value, or, for a function
named as "module:function", with pickle and an import on the worker.
Each rank runs ``python -m spindle._worker``, calls it, and hands its
result back: into a directory of this host with a local master, else as
marked lines of its output, which the Job takes out of the stream.
"""

import base64
import os
import pickle
import re
import shutil
import sys
import tempfile
import weakref

from . import _contract, _submit
from ._errors import SpindleError

PAYLOAD = "spindle-run-payload.pkl"
RESULTS_ENV = _contract.RUN_RESULTS
# Marks the lines a rank prints its pickled return value on.
MARK = "spindle.run:result"
_MARKED = re.compile(r"^\[rank (\d+)\] " + re.escape(MARK) + r" (\d+)/(\d+) (\S*)$")


def _pickler():
    try:
        import cloudpickle
    except ImportError:
        return None
    return cloudpickle


def payload(fn, args, kwargs):
    """Return the bytes that tell a worker what to call."""
    if isinstance(fn, str):
        if ":" not in fn:
            raise ValueError(f"spindle.run: {fn!r} is not a function nor 'module:function'")
        target = {"target": fn, "args": args, "kwargs": kwargs}
        try:
            return b"P" + pickle.dumps(target)
        except Exception as e:  # noqa: BLE001 - pickle raises many kinds
            cp = _pickler()
            if cp is None:
                raise SpindleError(f"spindle.run: the arguments do not pickle ({e}); install cloudpickle") from e
            return b"C" + cp.dumps(target)
    if not callable(fn):
        raise TypeError(f"spindle.run needs a function or 'module:function', not {type(fn).__name__}")
    cp = _pickler()
    if cp is None:
        raise SpindleError("spindle.run sends a function to the workers with cloudpickle, which is not installed: "
                           "pip install cloudpickle, or pass the function as 'module:function' (importable on the workers)")
    return b"C" + cp.dumps({"fn": fn, "args": args, "kwargs": kwargs})


def run(fn, *args, num_workers=None, all_ranks=False, kwargs=None, **submit_options):
    """Run fn(*args, **kwargs) on every worker rank of a new job; return rank 0's result (all_ranks: every rank's, in rank order).

    fn is a function (sent with cloudpickle) or "module:function".
    num_workers is the number of ranks (--num-executors); the master
    defaults to local[num_workers]. Other options are spindle.submit's
    (input, label_column, feed, epochs, conf, env, ...): the function
    reads the job's feed with spindle.batches() / spindle.tensors() as a
    script would. A rank that raises fails the job: JobFailed names it and
    carries its traceback's last lines. Interrupting the call kills the job.
    """
    job = start(fn, args, kwargs or {}, num_workers=num_workers, **submit_options)
    with job:
        job.wait()
        return job.results(all_ranks)


def start(fn, args, kwargs, num_workers=None, **submit_options):
    """Start the job of run() and return its RunJob, not waiting for it."""
    data = payload(fn, args, kwargs)
    stream = submit_options.pop("stream", True)
    cwd = submit_options.pop("cwd", None)
    n = num_workers or submit_options.pop("num_executors", None) or 2
    master = submit_options.setdefault("master", f"local[{n}]")
    local = master == "local" or master.startswith("local[")
    work = tempfile.mkdtemp(prefix="spindle-run-")
    path = os.path.join(work, PAYLOAD)
    with open(path, "wb") as f:
        f.write(data)
    results = os.path.join(work, "results")
    os.mkdir(results)
    env = dict(submit_options.pop("env", None) or {})
    if local:
        env[RESULTS_ENV] = results
    files = submit_options.pop("files", None) or []
    files = [files] if isinstance(files, str) else list(files)
    submit_options.setdefault("log_level", "warn")
    # Local ranks run this interpreter (the notebook's venv); elsewhere
    # spindle.python or --python says which.
    python = submit_options.pop("python", None) or (sys.executable if local else "python3")
    argv = [python, "-m", "spindle._worker"]
    return RunJob(argv, _submit.submit_args(dict(submit_options, num_executors=n, env=env, files=files + [path])),
                  work=work, results_dir=results, stream=stream, cwd=cwd)


class RunJob(_submit.Job):
    """The Job of spindle.run: it also collects the ranks' results."""

    def __init__(self, argv, flags, work, results_dir, stream=True, cwd=None):
        self._work, self._results_dir = work, results_dir
        self._remove_work = weakref.finalize(self, shutil.rmtree, work, ignore_errors=True)
        self._marked = {}  # rank -> [chunks]
        super().__init__(argv, flags, stream=stream, cwd=cwd, tap=self._take_mark)

    def _take_mark(self, stream, line):
        m = _MARKED.match(line) if stream == "stdout" else None
        if not m:
            return False
        rank, i, n, chunk = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        self._marked.setdefault(rank, [None] * n)[i] = chunk
        return True

    def results(self, all_ranks=False):
        """Return rank 0's result, or with all_ranks a list of every rank's."""
        world = self._info.get("world_size") or len(self._marked) or 1
        ranks = range(world) if all_ranks else [0]
        out = [self._result_of(r) for r in ranks]
        return out if all_ranks else out[0]

    def _result_of(self, rank):
        path = os.path.join(self._results_dir, f"rank-{rank}.pkl")
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
        elif rank in self._marked and None not in self._marked[rank]:
            data = base64.b64decode("".join(self._marked[rank]))
        else:
            raise SpindleError(f"spindle.run: rank {rank} succeeded but its result did not come back "
                               "(its output lines were lost: see the job's log)")
        return loads(data)

    def __exit__(self, *exc):
        self._remove_work()
        return super().__exit__(*exc)


def loads(data):
    """Unpickle a payload or result written by dumps_result or payload."""
    kind, body = data[:1], data[1:]
    if kind == b"C":
        cp = _pickler()
        if cp is None:
            raise SpindleError("spindle.run: this result was pickled with cloudpickle, which is not installed here")
        return cp.loads(body)
    return pickle.loads(body)


def dumps_result(value):
    """Pickle a rank's result: with pickle when it can, else cloudpickle."""
    try:
        return b"P" + pickle.dumps(value)
    except Exception:  # noqa: BLE001 - pickle raises many kinds
        cp = _pickler()
        if cp is None:
            raise
        return b"C" + cp.dumps(value)
