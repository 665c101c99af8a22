"""Checkpoints in the job's checkpoint directory, wherever it is.

A local path or ``file://`` URI is written directly: under a temporary
name, flushed to disk and renamed into place. An ``hdfs://`` directory (or
any other the executor can reach) is written through the executor, which
runs a small service for its training process on a Unix socket named by
``SPINDLE_CHECKPOINT_SERVICE``: the upload goes to a temporary HDFS file
that replaces the checkpoint only once every byte is stored, as the Go
``task`` package does. Either way a reader sees the old checkpoint or the
new one, never half of one.

:class:`Checkpointer` saves numbered checkpoints every N steps or seconds
together with the feed's position, and loads the one a restarted job
resumes from: the newest checkpoint every rank finished saving, which the
driver names in SPINDLE_RESUME_CHECKPOINT while each rank's feed starts
where that checkpoint left it, so no row is fed twice or skipped within
an epoch.

Nothing here needs torch; :mod:`spindle.torch` builds on it.
"""

import datetime
import functools
import http.client
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import urllib.parse

from . import _contract as C
from . import _env, _timeline
from ._errors import EnvError, SpindleError

__all__ = ["CheckpointError", "Checkpointer", "load_bytes", "load_file", "save_bytes", "save_file"]

SERVICE = C.CHECKPOINT_SERVICE

_CHUNK = 1 << 20


class CheckpointError(SpindleError, RuntimeError):
    """A checkpoint could not be saved or loaded; the message says where and why."""


def _directory(directory):
    if directory is None:
        directory = _env.checkpoint_dir()
        if directory is None:
            raise EnvError("SPINDLE_CHECKPOINT_DIR is not set: submit with --checkpoint-dir, or pass a directory")
    return os.fspath(directory)


def _local(directory):
    """Return the local path of directory, or None when it is a remote URI."""
    if "://" not in directory:
        return directory
    u = urllib.parse.urlparse(directory)
    if u.scheme == "file" and u.netloc in ("", "localhost"):
        return urllib.parse.unquote(u.path)
    return None


def _check_name(name):
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise CheckpointError(f"checkpoint name {name!r}: want a plain file name not starting with a dot")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _service(directory):
    path = os.environ.get(SERVICE, "")
    if not path:
        raise CheckpointError(f"checkpoint directory {directory}: only the executor can write there and "
                              f"{SERVICE} is not set (run the script with spindle submit --checkpoint-dir, "
                              "or use a local directory)")
    return _UnixConnection(path, timeout=600)


def _query(directory, name):
    return "/checkpoint?" + urllib.parse.urlencode({"dir": directory, "name": name})


def _traced(verb, name_at):
    """Record calls of the decorated function as checkpoint spans on the job's timeline."""
    def wrap(fn):
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            name = args[name_at] if len(args) > name_at else kwargs.get("name", "")
            with _timeline.span("checkpoint", f"{verb} {name}"):
                return fn(*args, **kwargs)
        return traced
    return wrap


@_traced("save", 1)
def save_file(src, name, directory=None):
    """Save the file at src as checkpoint name in directory (default: SPINDLE_CHECKPOINT_DIR), atomically.

    Returns where the checkpoint is: a path for a local directory, else
    directory/name.
    """
    _check_name(name)
    directory = _directory(directory)
    local = _local(directory)
    if local is not None:
        os.makedirs(local, exist_ok=True)
        path = os.path.join(local, name)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=local)
        try:
            with os.fdopen(fd, "wb") as out, open(src, "rb") as f:
                shutil.copyfileobj(f, out, _CHUNK)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(local)
        return path
    conn = _service(directory)
    try:
        with open(src, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            conn.request("PUT", _query(directory, name), body=f,
                         headers={"Content-Length": str(size), "Content-Type": "application/octet-stream"})
            resp = conn.getresponse()
            detail = resp.read().decode("utf-8", "replace").strip()
        if resp.status != 204:
            raise CheckpointError(f"save checkpoint {name} in {directory}: {detail or resp.reason} (HTTP {resp.status})")
    except OSError as e:
        raise CheckpointError(f"save checkpoint {name} in {directory}: the executor's checkpoint service: {e}") from None
    finally:
        conn.close()
    return directory.rstrip("/") + "/" + name


@_traced("load", 0)
def load_file(name, dest, directory=None):
    """Copy checkpoint name from directory (default: SPINDLE_CHECKPOINT_DIR) to the file dest.

    Returns False, leaving dest alone, when there is no such checkpoint.
    """
    _check_name(name)
    directory = _directory(directory)
    local = _local(directory)
    if local is not None:
        path = os.path.join(local, name)
        if not os.path.exists(path):
            return False
        shutil.copyfile(path, dest)
        return True
    conn = _service(directory)
    try:
        conn.request("GET", _query(directory, name))
        resp = conn.getresponse()
        if resp.status == 404:
            resp.read()
            return False
        if resp.status != 200:
            detail = resp.read().decode("utf-8", "replace").strip()
            raise CheckpointError(f"load checkpoint {name} from {directory}: {detail or resp.reason} (HTTP {resp.status})")
        want = int(resp.getheader("Content-Length", "-1"))
        got = 0
        tmp = dest + ".part"
        with open(tmp, "wb") as out:
            while True:
                chunk = resp.read(_CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                got += len(chunk)
        if want >= 0 and got != want:
            os.unlink(tmp)
            raise CheckpointError(f"load checkpoint {name} from {directory}: got {got} of {want} bytes")
        os.replace(tmp, dest)
        return True
    except OSError as e:
        raise CheckpointError(f"load checkpoint {name} from {directory}: the executor's checkpoint service: {e}") from None
    finally:
        conn.close()


def save_bytes(data, name, directory=None):
    """Save data (bytes) as checkpoint name; see :func:`save_file`."""
    with tempfile.NamedTemporaryFile(prefix="spindle-ckpt-") as f:
        f.write(data)
        f.flush()
        return save_file(f.name, name, directory)


def load_bytes(name, directory=None):
    """Return checkpoint name as bytes, or None when there is none."""
    with tempfile.TemporaryDirectory(prefix="spindle-ckpt-") as d:
        dest = os.path.join(d, name)
        if not load_file(name, dest, directory):
            return None
        with open(dest, "rb") as f:
            return f.read()


def _fsync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


# The hidden directory of the checkpoints' resume records (Go's task/resume.Dir).
RESUME_DIR = ".spindle-resume"

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=-]*$")


def _write_record(directory, record):
    """Store one rank's resume record of a checkpoint, atomically, after its files."""
    data = json.dumps(record, separators=(",", ":")).encode()
    local = _local(directory)
    if local is not None:
        d = os.path.join(local, RESUME_DIR, record["checkpoint"])
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rank-", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(d, f"rank-{record['rank']}.json"))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(d)
        return
    conn = _service(directory)
    try:
        conn.request("PUT", "/resume?" + urllib.parse.urlencode({"dir": directory}), body=data,
                     headers={"Content-Length": str(len(data)), "Content-Type": "application/json"})
        resp = conn.getresponse()
        detail = resp.read().decode("utf-8", "replace").strip()
        if resp.status != 204:
            raise CheckpointError(f"record checkpoint {record['checkpoint']} in {directory}: {detail or resp.reason} "
                                  f"(HTTP {resp.status})")
    except OSError as e:
        raise CheckpointError(f"record checkpoint {record['checkpoint']} in {directory}: "
                              f"the executor's checkpoint service: {e}") from None
    finally:
        conn.close()


class Checkpointer:
    """Numbered checkpoints (``prefix-STEP``) with the feed's position beside them.

    Every rank calls :meth:`save` (or :meth:`maybe_save`) for the same
    steps. Rank 0 writes the checkpoint (every rank its own
    ``prefix-STEP.rank-R`` with per_rank=True); then each rank records where
    its feed stands (:func:`spindle.position`: the batches of the epoch it
    has taken). A checkpoint counts as complete once every fed rank has
    recorded it; a restarted job resumes from the newest complete one:
    :meth:`resume` returns it and each rank's feed continues from its
    position, with the same shuffle. Save after the step that used the
    last batch taken, before taking the next.

    every_steps and every_seconds say when :meth:`due` holds: at steps that
    are multiples of every_steps, or once every_seconds passed since the
    last save (both 0: every step).
    A time-based schedule needs the ranks to agree on it (decide on rank 0
    and broadcast), or use every_steps.

    keep is how many complete checkpoints of prefix stay: once a checkpoint
    is complete, the rank whose record completed it deletes the older
    complete ones beyond the keep most recently completed (records first,
    then files). None takes the job's ``spindle.checkpoint.keep``
    (SPINDLE_CHECKPOINT_KEEP, 3 when unset); 0 keeps every one. A
    checkpoint that not every rank has recorded (one being written) is
    never deleted, and neither is the newest complete one, nor one the
    driver handed a worker replaced alone that has not saved a newer one.
    """

    def __init__(self, prefix="ckpt", every_steps=0, every_seconds=0, per_rank=False, directory=None, keep=None):
        if not _NAME.match(prefix or ""):
            raise CheckpointError(f"checkpoint prefix {prefix!r}: want letters, digits and _.+=- only, "
                                  "not starting with a dot")
        if every_steps < 0 or every_seconds < 0:
            raise CheckpointError(f"checkpoint every {every_steps} steps or {every_seconds} s: must not be negative")
        self.directory = _directory(directory)
        self.prefix = prefix
        self.every_steps = int(every_steps)
        self.every_seconds = float(every_seconds)
        self.per_rank = bool(per_rank)
        if keep is None:
            keep = _env.checkpoint_keep()
        if int(keep) < 0:
            raise CheckpointError(f"keep {keep} checkpoints: must not be negative (0 keeps every one)")
        self.keep = int(keep)
        self._rank = _env.rank()
        self._world = _env.world_size()
        self._last_step = 0
        self._last_time = _now()

    def name(self, step):
        """Return the name of the checkpoint of step."""
        return f"{self.prefix}-{int(step)}"

    def _file(self, step):
        return f"{self.name(step)}.rank-{self._rank}" if self.per_rank else self.name(step)

    def resume(self):
        """Return (step, data) of the checkpoint this generation resumes from, or None to start afresh."""
        got = _env.resume_checkpoint()
        if got is None:
            return None
        name, step = got
        if name != self.name(step):
            raise CheckpointError(f"the job resumes from checkpoint {name}, which this Checkpointer "
                                  f"(prefix {self.prefix!r}) did not save: want {self.name(step)}")
        data = load_bytes(self._file(step), self.directory)
        if data is None:
            raise CheckpointError(f"checkpoint {self._file(step)} is missing from {self.directory}, "
                                  f"though every rank recorded {name}")
        self._last_step, self._last_time = step, _now()
        return step, data

    def due(self, step):
        """Report whether step is due for a checkpoint."""
        if not self.every_steps and not self.every_seconds:
            return True
        # Multiples of every_steps, so that every rank, whatever it resumed from, saves the same steps.
        return bool((self.every_steps and step % self.every_steps == 0 and step != self._last_step) or
                    (self.every_seconds and _now() - self._last_time >= self.every_seconds))

    def maybe_save(self, step, data):
        """Save checkpoint step when it is due; data is bytes or a function returning them. Return whether it saved."""
        if not self.due(step):
            return False
        self.save(step, data() if callable(data) else data)
        return True

    def save(self, step, data):
        """Save checkpoint step (data: bytes; rank 0's, or every rank's with per_rank), then this rank's record."""
        step = int(step)
        if step < 0:
            raise CheckpointError(f"checkpoint step {step}: must not be negative")
        from . import _feed

        record = {"checkpoint": self.name(step), "step": step, "rank": self._rank, "world_size": self._world,
                  "generation": _env.generation(),
                  "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        if _env.replacement():
            record["replacement"] = _env.replacement()  # which process of the rank wrote it (pins, below)
        if os.environ.get(C.FEED):
            epoch, batches = _feed.position()
            record["feed"] = {"epoch": epoch, "batches": batches}
        if self.per_rank or self._rank == 0:
            save_bytes(data, self._file(step), self.directory)
            record["files"] = [self._file(step)]
        _write_record(self.directory, record)  # last: it says the files are stored
        self._last_step, self._last_time = step, _now()
        if self.keep > 0:
            try:
                prune(self.directory, self.prefix, self.keep, after=self.name(step))
            except (OSError, CheckpointError) as e:
                # The checkpoint is saved: old ones left behind cost disk, not the job.
                print(f"spindle: could not delete old checkpoints in {self.directory}: {e}", file=sys.stderr, flush=True)


def _now():
    return time.monotonic()


_RECORD = re.compile(r"^rank-(\d+)\.json$")
_PIN = re.compile(r"^pin-rank-(\d+)\.json$")
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def _record_time(value):
    """Parse a record's RFC 3339 time (Go writes nanoseconds); None when it is not one."""
    m = _TIME.match(value or "")
    if not m:
        return None
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}")


def _complete_records(path):
    """Return the records of the checkpoint whose record directory is path when they make it
    complete in the strict sense (every rank of their world, one generation and step), else None."""
    try:
        entries = os.listdir(path)
    except FileNotFoundError:
        return None
    recs = {}
    for entry in entries:
        m = _RECORD.match(entry)
        if not m:
            continue  # a save in progress, or not ours
        try:
            with open(os.path.join(path, entry)) as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return None
        if rec.get("rank") != int(m.group(1)):
            return None
        recs[int(m.group(1))] = rec
    if not recs:
        return None
    world = next(iter(recs.values())).get("world_size", 0)
    if world <= 0 or sorted(recs) != list(range(world)):
        return None
    if len({(r.get("world_size"), r.get("step"), r.get("generation", 0)) for r in recs.values()}) != 1:
        return None
    return list(recs.values())


def prune(directory, prefix, keep, after=None):
    """Delete the complete checkpoints ``prefix-STEP`` in directory beyond the keep most recently completed.

    With after (the name of a checkpoint just recorded), only once that one
    is complete. Each goes records first, so that it stops being complete
    before any of its files goes. Returns the names deleted, oldest first.
    A directory only the executor can write (``hdfs://``) is pruned by the
    executor's checkpoint service, with the same rules (Go's
    task/resume.Prune).
    """
    keep = int(keep)
    if keep < 1:
        return []
    local = _local(directory)
    if local is None:
        return _prune_remote(directory, prefix, keep, after)
    root = os.path.join(local, RESUME_DIR)
    if after is not None and _complete_records(os.path.join(root, after)) is None:
        return []
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    done = []
    for name in names:
        step = name[len(prefix) + 1:] if name.startswith(prefix + "-") else ""
        if not step.isdigit():
            continue
        recs = _complete_records(os.path.join(root, name))
        if recs is None:
            continue
        times = [t for t in (_record_time(r.get("time")) for r in recs) if t is not None]
        completed = max(times) if times else datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)
        files = sorted({f for r in recs for f in r.get("files") or [] if _NAME.match(f)})
        writers = {r.get("rank"): (r.get("generation", 0), r.get("replacement", 0)) for r in recs}
        done.append((completed, int(step), name, files, writers))
    done.sort(key=lambda c: c[:3], reverse=True)
    removed = []
    for i in range(len(done) - 1, keep - 1, -1):
        _, _, name, files, _ = done[i]
        d = os.path.join(root, name)
        if _pinned(d, [c[4] for c in done[:i]]):
            continue
        try:
            entries = os.listdir(d)
        except FileNotFoundError:
            continue  # another rank pruned it
        for entry in entries:
            _remove(os.path.join(d, entry))
        try:
            os.rmdir(d)
        except FileNotFoundError:
            pass
        for f in files:
            _remove(os.path.join(local, f))
        removed.append(name)
    return removed


def _pinned(path, newer):
    """Say whether a pin in the record directory path holds its checkpoint (Go's task/resume.Pin).

    The driver pins the checkpoint it hands a worker replaced alone; the pin
    holds until one of the newer complete checkpoints (newer: each one's
    {rank: (generation, replacement)} of its records) has a record of the
    pin's rank written by that replacement or a later process.
    """
    try:
        entries = os.listdir(path)
    except FileNotFoundError:
        return False
    for entry in entries:
        m = _PIN.match(entry)
        if not m:
            continue
        rank, gen, repl = int(m.group(1)), 0, 0
        try:
            with open(os.path.join(path, entry)) as f:
                pin = json.load(f)
            if pin.get("rank") == rank:
                gen, repl = int(pin.get("generation", 0)), int(pin.get("replacement", 0))
        except FileNotFoundError:
            continue
        except (OSError, ValueError, TypeError, AttributeError):
            pass  # unreadable: any newer record of its rank spends it
        if not any(rank in w and w[rank] >= (gen, repl) for w in newer):
            return True
    return False


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # another rank pruning at the same time


def _prune_remote(directory, prefix, keep, after):
    if after is None:
        raise CheckpointError(f"prune {directory}: the executor's service prunes after a checkpoint it names")
    conn = _service(directory)
    try:
        conn.request("POST", "/prune?" + urllib.parse.urlencode(
            {"dir": directory, "checkpoint": after, "prefix": prefix, "keep": keep}))
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace").strip()
        if resp.status != 200:
            raise CheckpointError(f"delete old checkpoints in {directory}: {body or resp.reason} (HTTP {resp.status})")
        return json.loads(body)
    except OSError as e:
        raise CheckpointError(f"delete old checkpoints in {directory}: the executor's checkpoint service: {e}") from None
    finally:
        conn.close()
