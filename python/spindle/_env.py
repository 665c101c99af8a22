"""The training-process environment that Spindle's executor sets.

Every accessor reads ``os.environ`` when called, so a value is never stale,
and raises :class:`EnvError` naming the variable when it is missing or
malformed.
"""

import json
import os
import time

from . import _contract as C
from ._errors import EnvError

#: Every value of SPINDLE_FEED_MODE (``"none"``: a role that gets no input).
FEED_MODES = C.FEED_MODES

#: Seconds a collective operation waits for a silent peer when the
#: environment does not say (SPINDLE_COLLECTIVE_TIMEOUT).
DEFAULT_COLLECTIVE_TIMEOUT = C.DEFAULT_COLLECTIVE_TIMEOUT

_HINT = "run this script with spindle submit"


def _require(name):
    value = os.environ.get(name)
    if value is None or value == "":
        raise EnvError(f"{name} is not set: {_HINT}")
    return value


def _int(name, minimum):
    raw = _require(name)
    try:
        value = int(raw.strip())
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise EnvError(f"{name}={raw!r} is below {minimum}")
    return value


def in_spindle():
    """Return True when the process was started by a Spindle executor."""
    fed = bool(os.environ.get(C.FEED)) or os.environ.get(C.FEED_MODE) == "none"
    return bool(os.environ.get(C.RANK)) and fed


def rank():
    """Return this process's rank, 0 to ``world_size() - 1`` (SPINDLE_RANK)."""
    r = _int(C.RANK, 0)
    ws = os.environ.get(C.WORLD_SIZE)
    if ws and ws.strip().isdigit() and r >= int(ws):
        raise EnvError(f"{C.RANK}={r} is not below {C.WORLD_SIZE}={ws.strip()}")
    return r


def world_size():
    """Return the number of training processes in the job (SPINDLE_WORLD_SIZE)."""
    return _int(C.WORLD_SIZE, 1)


def role():
    """Return this process's role: ``"worker"``, ``"chief"`` or ``"ps"`` (SPINDLE_ROLE).

    Every rank of a job without roles is a worker. Only workers are fed.
    """
    return _require(C.ROLE).strip()


def role_rank():
    """Return this process's rank among the processes of its role (SPINDLE_ROLE_RANK)."""
    return _int(C.ROLE_RANK, 0)


def role_world_size():
    """Return the number of processes of this process's role (SPINDLE_ROLE_WORLD_SIZE)."""
    return _int(C.ROLE_WORLD_SIZE, 1)


def roles():
    """Return every role of the job and its number of processes, in rank order.

    For a chief, two workers and a parameter server (SPINDLE_ROLES
    ``chief:1,worker:2,ps:1``) it is ``[("chief", 1), ("worker", 2), ("ps", 1)]``.
    """
    raw = _require(C.ROLES)
    out = []
    for i, item in enumerate(raw.split(",")):
        name, sep, n = item.strip().partition(":")
        if not sep or not name or not n.isdigit() or int(n) < 1:
            raise EnvError(f"{C.ROLES} entry {i} ({item!r}) is not role:count")
        out.append((name, int(n)))
    return out


def local_rank():
    """Return this process's index among the job's processes on this host (SPINDLE_LOCAL_RANK)."""
    return _int(C.LOCAL_RANK, 0)


def local_world_size():
    """Return the number of the job's processes on this host (SPINDLE_LOCAL_WORLD_SIZE)."""
    return _int(C.LOCAL_WORLD_SIZE, 1)


def job_id():
    """Return the job's identifier (SPINDLE_JOB_ID)."""
    return _require(C.JOB_ID)


def checkpoint_dir():
    """Return the job's checkpoint directory, or None when the job has none.

    The value (SPINDLE_CHECKPOINT_DIR) is a local path, a ``file://`` URI or
    an ``hdfs://`` URI, exactly as given to ``spindle submit
    --checkpoint-dir``.
    """
    value = os.environ.get(C.CHECKPOINT_DIR, "")
    return value or None


def checkpoint_keep():
    """Return how many complete checkpoints of a prefix the checkpoint APIs keep; 0 keeps every one.

    The value is ``spindle.checkpoint.keep`` (SPINDLE_CHECKPOINT_KEEP), 3
    when unset.
    """
    if not os.environ.get(C.CHECKPOINT_KEEP, "").strip():
        return int(C.DEFAULTS[C.CHECKPOINT_KEEP])
    return _optional_int(C.CHECKPOINT_KEEP)


def files_dir():
    """Return the directory holding the job's ``--files``, or None (SPINDLE_FILES_DIR)."""
    return os.environ.get(C.FILES_DIR) or None


def peers():
    """Return every rank's peer address as a list of ``(host, port)``, in rank order.

    The port is the rank's Spindle peer port (SPINDLE_PEERS). IPv6 hosts
    are written in brackets (``[::1]:7000``) and returned without them.
    A job too large for the list to fit in one environment variable gets
    it in the file SPINDLE_PEERS_FILE names instead.
    """
    raw, source = _peer_list()
    out = []
    for i, item in enumerate(raw.split(",")):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise EnvError(f"{source} entry {i} ({item!r}) is not host:port")
        out.append((host, int(port)))
    return out


def _peer_list():
    """Return the comma-separated peer list and where it came from."""
    if os.environ.get(C.PEERS):
        return os.environ[C.PEERS], C.PEERS
    path = os.environ.get(C.PEERS_FILE)
    if not path:
        _require(C.PEERS)
    source = f"{C.PEERS_FILE} {path}"
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip(), source
    except OSError as e:
        raise EnvError(f"{source}: cannot read the peer list: {e.strerror}") from None


def feed_path():
    """Return where the feed is (SPINDLE_FEED).

    In ``arrow`` and ``tensor`` mode it is the path of a Unix socket; in
    ``direct`` mode the path of a JSON file describing this rank's splits.
    """
    if os.environ.get(C.FEED_MODE) == "none":
        who = os.environ.get(C.ROLE) or "this process"
        raise EnvError(f"{C.FEED_MODE}=none: the job's {who} gets no feed (only workers are fed; see {C.ROLE})")
    return _require(C.FEED)


def feed_mode():
    """Return the feed mode: ``"arrow"``, ``"tensor"`` or ``"direct"`` (SPINDLE_FEED_MODE)."""
    raw = _require(C.FEED_MODE)
    mode = raw.strip().lower()
    if mode not in FEED_MODES:
        raise EnvError(f"{C.FEED_MODE}={raw!r} is not one of {', '.join(FEED_MODES)}")
    return mode


def label_column():
    """Return the job's label column (SPINDLE_LABEL_COLUMN), or None when not set."""
    return os.environ.get(C.LABEL_COLUMN) or None


def collective_timeout():
    """Return the seconds a collective waits for a silent peer.

    The value comes from SPINDLE_COLLECTIVE_TIMEOUT and defaults to 30
    seconds (as in Go trainers) when it is not set, far below PyTorch's default of 30 minutes,
    so that a dead or stalled peer fails the job quickly.
    """
    raw = os.environ.get(C.COLLECTIVE_TIMEOUT, "")
    if raw.strip() == "":
        return DEFAULT_COLLECTIVE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{C.COLLECTIVE_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise EnvError(f"{C.COLLECTIVE_TIMEOUT}={raw!r} must be a positive number of seconds")
    return value


def _optional_int(name):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise EnvError(f"{name}={raw!r} is below 0")
    return value


def generation():
    """Return the gang's generation: 0 at first, one more at each restart (SPINDLE_GENERATION)."""
    return _optional_int(C.GENERATION)


def replacement():
    """Return 0, or k in the kth process started alone to replace this rank's lost one
    while the other ranks kept running (SPINDLE_REPLACEMENT, spindle.failure.replaceWorkers)."""
    return _optional_int(C.REPLACEMENT)


def membership():
    """Return the gang's collective membership as the executor last wrote it
    (SPINDLE_MEMBERSHIP), or None when it keeps none: a dict with ``version``
    (one more with every rank replaced alone, or left behind by an elastic
    job that went on in place, while this process runs), ``peers`` (every
    rank's "host:port": after an elastic job shrank, the survivors in their
    old order, so this process's new rank is the index of its own address),
    ``incarnations`` (how often each rank's process was replaced),
    ``joined`` (the rank the last version replaced; -1 when it shrank) and,
    after a shrink, ``left`` (the ranks, numbered as before, it lost)."""
    path = os.environ.get(C.MEMBERSHIP, "").strip()
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise EnvError(f"{C.MEMBERSHIP}={path!r}: cannot read the membership: {e}") from None


def wait_membership(after, timeout=None, poll=0.05):
    """Wait until the membership's version is above ``after`` (a rank was
    replaced) and return it; None when ``timeout`` seconds passed first or the
    executor keeps no membership."""
    if not os.environ.get(C.MEMBERSHIP, "").strip():
        return None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        m = membership()
        if m is not None and m.get("version", 0) > after:
            return m
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(poll)


def resume_checkpoint():
    """Return (name, step) of the checkpoint this generation resumes from, or None to start afresh."""
    name = os.environ.get(C.RESUME_CHECKPOINT, "").strip()
    if not name:
        return None
    return name, _optional_int(C.RESUME_STEP)


def feed_start():
    """Return (epoch, batches) where the feed starts: SPINDLE_FEED_START_EPOCH and SPINDLE_FEED_START_BATCH."""
    return _optional_int(C.FEED_START_EPOCH), _optional_int(C.FEED_START_BATCH)


def session_epochs():
    """Return the session feed's epochs [first, end) that this job of a session reads, or None outside one.

    A warm session with input serves epoch after epoch; its job n reads
    SPINDLE_SESSION_EPOCHS of them, from (n-1) times that on.
    """
    if not os.environ.get(C.SESSION_EPOCHS, "").strip():
        return None
    per, job = _optional_int(C.SESSION_EPOCHS), _optional_int(C.SESSION_JOB)
    if job < 1 or per < 1:
        raise EnvError(f"{C.SESSION_EPOCHS}={per} needs {C.SESSION_JOB}, the job's number in the session (1, 2, ...), "
                       f"and at least 1 epoch: is this process a session's job?")
    return (job - 1) * per, job * per
