"""Shared helpers of the spindle package's tests: paths, fixtures and a feed server.

Importing this module puts the package directory (python/) first on
sys.path, so the tests run against the checkout, not an installed copy.
"""

import atexit
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(PYTHON_DIR)
TESTDATA = os.path.join(PYTHON_DIR, "tests", "testdata")

if sys.path[0] != PYTHON_DIR:
    sys.path.insert(0, PYTHON_DIR)

import numpy as np  # noqa: E402

from spindle import _tensor  # noqa: E402


def timescale():
    """Return how much every timing in the tests stretches, as testutil.Scale's in the Go ones.

    SPINDLE_TEST_TIMESCALE (default 1) times load_stretch(), read now: for a
    duration a test configures (a timeout it passes on). A wait's own
    deadline is a Budget, which keeps reading the load.
    """
    return env_timescale() * load_stretch()


def env_timescale():
    """Return SPINDLE_TEST_TIMESCALE (1 when unset), raising ValueError naming it when it is not a positive number up to 1000."""
    value = os.environ.get("SPINDLE_TEST_TIMESCALE", "")
    try:
        scale = float(value) if value else 1.0
    except ValueError:
        scale = 0
    if not 0 < scale <= 1000:
        raise ValueError(f"SPINDLE_TEST_TIMESCALE={value!r}: want a positive number up to 1000")
    return scale


def scaled(seconds):
    """Return seconds stretched by timescale(): for a timeout a test passes to a call that blocks (subprocess.run, Popen.wait)."""
    return seconds * timescale()


# As testutil.QuietLoadPerCore and MaxLoadStretch: the load per core of
# one make test alone, at which the timings were chosen, and the most a
# busier machine stretches them.
QUIET_LOAD_PER_CORE = 12.0
MAX_LOAD_STRETCH = 4.0


def load_stretch():
    """Return how much busier than one make test alone the machine is (testutil.LoadStretch): 1 to 4."""
    if os.environ.get("SPINDLE_TEST_LOAD_STRETCH") == "off":
        return 1.0
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    cores = len(os.sched_getaffinity(0))
    return min(max(load / cores / QUIET_LOAD_PER_CORE, 1.0), MAX_LOAD_STRETCH)


class Budget:
    """A wait's deadline of seconds that keeps stretching while the machine is busy, as testutil.Budget.

    The wall time between two checks counts against it divided by
    load_stretch() at the later one, so a wait that began on a quiet
    machine holds out when the load rises during it. It never lasts more
    than seconds times SPINDLE_TEST_TIMESCALE and MAX_LOAD_STRETCH.
    """

    def __init__(self, seconds):
        self.total = seconds * env_timescale()
        self.left = self.total
        self.start = self.last = time.monotonic()

    def spent(self):
        """Charge the time since the last check; return whether the budget is gone."""
        now = time.monotonic()
        self.left -= (now - self.last) / load_stretch()
        self.last = now
        return self.left <= 0

    def __str__(self):
        wall = self.last - self.start
        if wall - (self.total - self.left) > self.total / 4:
            return f"{self.total:g}s ({wall:.1f}s on the wall clock: the machine was busy)"
        return f"{self.total:g}s"


def wait_for(what, cond, within=120):
    """Poll cond until it holds, failing after a Budget of within seconds with what it waited for.

    what may be a function, called at the deadline to describe what is
    still missing. As the Go tests' testutil.Poll: the first check at once,
    then sleeps backing off from 1 ms to 50 ms, so a loaded machine is not
    spun.
    """
    budget = Budget(within)
    sleep = 0.001
    while not cond():
        if budget.spent():
            raise AssertionError(f"timed out after {budget} waiting for {what() if callable(what) else what}")
        time.sleep(sleep)
        sleep = min(2 * sleep, 0.05)


def fixture(name):
    """Return the bytes of a fixture file in testdata."""
    with open(os.path.join(TESTDATA, name), "rb") as f:
        return f.read()


def expected(name):
    """Return the JSON that the fixture generator wrote beside fixture name."""
    with open(os.path.join(TESTDATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


# The sockets free_port holds, open until the interpreter exits.
_held_ports = []


def free_port():
    """Return a 127.0.0.1 port for a child process (or a server) to bind, held until this interpreter exits.

    A port the kernel picked and this process closed can be taken by any
    process's next outgoing connection before the child binds it (on a busy
    machine that happens: "Address already in use"). The port stays bound,
    with SO_REUSEADDR and never listening, which keeps it out of the kernel's
    choice while letting a child that sets SO_REUSEADDR too (PyTorch's
    store, Go's listeners) bind it, as Spindle's executors hold MASTER_PORT.
    It is held on every address: one held on 127.0.0.1 alone can still go
    to a socket bound to another (PyTorch's store, on 0.0.0.0, then fails).
    """
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 0))
    _held_ports.append(s)
    return s.getsockname()[1]


def short_tempdir(test):
    """Make a temporary directory short enough for Unix socket paths, removed after test."""
    d = tempfile.mkdtemp(prefix="sp", dir="/tmp")
    test.addCleanup(shutil.rmtree, d, True)
    return d


def tensor_frames(batches):
    """Return the batch frames of batches, each (features, labels) or a features matrix."""
    parts = []
    for b in batches:
        x, y = b if isinstance(b, tuple) else (b, None)
        parts.append(_tensor.encode_batch(x, y))
    return b"".join(parts)


def tensor_stream(epoch, features, label=None, batches=()):
    """Return a whole tensor-format stream: header, batches, end-of-epoch frame."""
    return _tensor.encode_header(epoch, features, label) + tensor_frames(batches) + _tensor.END_OF_EPOCH


class FeedServer:
    """Serves streams over a Unix socket the way an executor does.

    Connection k receives stream(k): streams may be a list (connections
    past its end get end) or a function of k returning bytes. Connections
    are served one at a time, in order.
    """

    def __init__(self, path, streams, end=b""):
        self.path = path
        self._streams = streams
        self._end = end
        self.served = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(16)
        self._thread = threading.Thread(target=self._run, name=f"feed-server {path}", daemon=True)
        self._thread.start()

    def _stream(self, k):
        if callable(self._streams):
            return self._streams(k)
        return self._streams[k] if k < len(self._streams) else self._end

    def _run(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                with self._lock:
                    k = self.served
                    self.served += 1
                try:
                    conn.sendall(self._stream(k))
                except OSError:
                    pass  # the consumer left mid-epoch

    def close(self):
        """Stop serving and wait for the server thread."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=10)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def serve(test, streams, end=b"", name="feed.sock"):
    """Start a FeedServer in a fresh directory, stopped when test ends."""
    srv = FeedServer(os.path.join(short_tempdir(test), name), streams, end)
    test.addCleanup(srv.close)
    return srv


def logistic_data(rows, features, seed):
    """Return (x, y, bayes_accuracy) of a logistic model: float32 features, int64 0/1 labels."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=features)
    w *= 4.0 / np.linalg.norm(w)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    p = 1.0 / (1.0 + np.exp(-(x.astype(np.float64) @ w)))
    y = (rng.random(rows) < p).astype(np.int64)
    bayes = float(np.mean((p > 0.5) == (y == 1)))
    return x, y, bayes


_binary = None


def spindle_binary(test):
    """Return a spindle binary for tests that run jobs: $SPINDLE_BINARY, else one built with go once per run.

    Skips the test when neither is there. The binary carries this
    checkout's Python package, which the jobs' training processes import.
    """
    global _binary
    if os.environ.get("SPINDLE_BINARY"):
        return os.environ["SPINDLE_BINARY"]
    if _binary is None:
        go = shutil.which("go")
        if go is None:
            test.skipTest("no go to build spindle with (or set SPINDLE_BINARY)")
        out = tempfile.mkdtemp(prefix="spindle-bin-")
        atexit.register(shutil.rmtree, out, True)
        import subprocess
        subprocess.run([go, "build", "-o", os.path.join(out, "spindle"), "./cmd/spindle"], cwd=REPO_DIR, check=True)
        _binary = os.path.join(out, "spindle")
    return _binary
