"""Checkpoints in the job's checkpoint directory, wherever it is.

A local path or ``file://`` URI is written directly: under a temporary
name, flushed to disk and renamed into place. An ``hdfs://`` directory (or
any other the executor can reach) is written through the executor, which
runs a small service for its training process on a Unix socket named by
``SPINDLE_CHECKPOINT_SERVICE``: the upload goes to a temporary HDFS file
that replaces the checkpoint only once every byte is stored, as the Go
``task`` package does. Either way a reader sees the old checkpoint or the
new one, never half of one.

Nothing here needs torch; :mod:`spindle.torch` builds on it.
"""

import functools
import http.client
import os
import shutil
import socket
import tempfile
import urllib.parse

from . import _contract as C
from . import _env, _timeline
from ._errors import EnvError, SpindleError

__all__ = ["CheckpointError", "load_bytes", "load_file", "save_bytes", "save_file"]

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
