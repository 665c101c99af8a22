"""Spindle's parameter server, from Python: numpy arrays in and out.

In a job submitted with ``--num-ps N`` (and no ``--ps-command``), every
worker's executor serves a small proxy on a private Unix socket named by
``SPINDLE_PS_SOCKET``; the proxy holds the connections to the servers,
authenticated with the job's secret, so this process needs neither gRPC
nor the secret. Keys are uint64s; rows and gradients are float32s::

    import numpy as np
    import spindle.ps

    ps = spindle.ps.connect()
    ps.declare("emb", dim=16, optimizer="adagrad", lr=0.05, initializer="normal", scale=0.01)
    for ids, ... in batches:
        rows = ps.pull("emb", ids)          # float32, ids.shape + (16,); waits as BSP/SSP asks
        grads = ...                         # same shape as rows
        ps.push("emb", ids, grads)          # applied by the servers' optimizer
        ps.clock()                          # this worker finished a step
    ps.close()                              # leave: no one waits for this worker any more

``spindle.ps.Embedding(ps, "emb", 16)`` is a ``torch.nn.Module`` over a
table (it needs PyTorch; nothing here imports torch until it is used):
its forward pulls the rows of a batch's distinct ids, and the backward
pass pushes their gradients, so a model can hold a table larger than one
machine. The protocol is in docs/ps-python.md.
"""

import json
import operator
import os
import socket
import struct
import threading

import numpy as np

from . import _contract as C
from ._errors import EnvError, SpindleError

__all__ = ["Client", "Embedding", "PSError", "connect"]

#: The variable naming the proxy's socket.
SOCKET = C.PS_SOCKET

#: The servers' optimizers and row initializers.
OPTIMIZERS = ("sgd", "adagrad", "adam", "ftrl")
INITIALIZERS = ("zeros", "uniform", "normal")

#: The longest request the proxy reads; split larger pushes.
MAX_REQUEST_BYTES = 1 << 30

_DECLARE, _PULL, _PUSH, _CLOCK, _STATS, _LEAVE, _BARRIER, _EXPORT = 1, 2, 3, 4, 5, 6, 7, 8
_OK = 0
_OP_NAMES = {_DECLARE: "declare", _PULL: "pull", _PUSH: "push", _CLOCK: "clock", _STATS: "stats", _LEAVE: "leave",
             _BARRIER: "barrier", _EXPORT: "export"}

# Optimizer hyper-parameters declare takes besides lr; 0 leaves the
# servers' default.
_HYPER = ("beta1", "beta2", "epsilon", "l1", "l2", "ftrl_beta", "initial_accumulator")


class PSError(SpindleError, RuntimeError):
    """A call to the parameter servers failed; the message names the table, dim or server at fault."""


def connect(path=None, timeout=None):
    """Connect to this worker's parameter-server proxy and return a :class:`Client`.

    path defaults to SPINDLE_PS_SOCKET. timeout (seconds) bounds each
    call; None waits as long as the servers do (a pull under BSP waits for
    the slowest worker, up to ``spindle.ps.waitTimeout``).
    """
    if path is None:
        path = os.environ.get(SOCKET, "")
        if not path:
            raise EnvError(f"{SOCKET} is not set: this job has no Spindle parameter server (submit with "
                           "--num-ps N and without --ps-command), or this process is not one of its workers")
    return Client(path, timeout=timeout)


def _name_bytes(table):
    if not isinstance(table, str) or not table:
        raise TypeError(f"table name {table!r}: want a non-empty str")
    b = table.encode("utf-8")
    if len(b) > 0xFFFF:
        raise ValueError(f"table name of {len(b)} bytes: at most 65535")
    return struct.pack("<H", len(b)) + b


def _as_keys(keys, table):
    """Return keys as a contiguous little-endian uint64 array (no copy when they are one already)."""
    a = np.asarray(keys)
    if a.dtype.kind == "i":
        if a.size and a.min() < 0:
            raise ValueError(f"table {table}: key {a[a < 0].flat[0]} is negative: keys are uint64s")
    elif a.dtype.kind != "u":
        raise TypeError(f"table {table}: keys of dtype {a.dtype}: want integers (uint64)")
    return np.ascontiguousarray(a.reshape(-1), dtype="<u8")


class Client:
    """A connection to this worker's parameter-server proxy.

    Calls may come from several threads; they take turns on the one
    connection. A forked process (a DataLoader worker) connects anew. Call :meth:`clock` after each step's pushes and
    :meth:`close` when done.
    """

    def __init__(self, path, timeout=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        # A push's keys and gradients cross in one write, not several
        # wake-ups of the proxy (the proxy does the same for its replies).
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        try:
            s.connect(path)
        except OSError as e:
            s.close()
            raise PSError(f"connect to the parameter-server proxy at {path}: {e}") from None
        self._sock = s
        self._path = path
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._broken = None
        self._closed = False
        self._dims = {}
        self.steps = 0

    # The protocol: a request is a little-endian uint32 length, an op byte
    # and its body; the reply a length, a status byte and its body.

    def _call(self, op, *parts):
        views = [memoryview(p).cast("B") for p in parts]
        n = 1 + sum(v.nbytes for v in views)
        if n > MAX_REQUEST_BYTES:
            raise ValueError(f"{_OP_NAMES[op]} request of {n} bytes is over the proxy's {MAX_REQUEST_BYTES}: "
                             "split it into smaller calls")
        if os.getpid() != self._pid:
            # A forked child (a DataLoader worker) shares the socket: its
            # frames would interleave with the parent's.
            raise PSError(f"this client was connected in process {self._pid}, not this one ({os.getpid()}): "
                          "call spindle.ps.connect() in each process")
        with self._lock:
            if self._closed:
                raise PSError("this client is closed (it left the parameter servers)")
            if self._broken:
                raise PSError(f"the connection to the parameter-server proxy broke earlier: {self._broken}")
            try:
                self._sock.sendall(struct.pack("<IB", n, op))
                for v in views:
                    if v.nbytes:
                        self._sock.sendall(v)
                head = self._recv(5)
                size, status = struct.unpack("<IB", head)
                body = self._recv(size - 1)
            except (OSError, EOFError) as e:
                # A reply half read leaves the stream out of step: no more calls.
                self._broken = f"{_OP_NAMES[op]}: {e}"
                raise PSError(f"{_OP_NAMES[op]} through the parameter-server proxy at {self._path}: {e}") from None
        if status != _OK:
            raise PSError(body.decode("utf-8", "replace"))
        return body

    def _recv(self, n):
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise EOFError(f"the proxy closed the connection after {got} of {n} bytes")
            got += k
        return buf

    def declare(self, name, dim, optimizer="adagrad", lr=None, initializer="zeros", scale=None, seed=0,
                rows=None, **hyper):
        """Create table name on the servers, or check that the one there is the same.

        Every worker declares the tables it uses, alike, before touching
        them. dim is the length of a row (1 to 65536). optimizer is
        ``"sgd"``, ``"adagrad"``, ``"adam"`` or ``"ftrl"``, applied by the
        servers with learning rate lr (0.01 when None) and the optional
        hyper-parameters beta1, beta2, epsilon, l1, l2, ftrl_beta and
        initial_accumulator. initializer is ``"zeros"``, ``"uniform"`` (in
        [-scale, scale]) or ``"normal"`` (standard deviation scale); seed
        makes a row's first value a function of (seed, key). rows, when
        set, makes the table dense: keys 0..rows-1, created at once.
        """
        _name_bytes(name)
        dim = operator.index(dim)
        unknown = sorted(set(hyper) - set(_HYPER))
        if unknown:
            raise TypeError(f"declare {name}: unknown optimizer parameter {unknown[0]!r}: want one of {', '.join(_HYPER)}")
        opt = {"kind": optimizer}
        if lr is not None:
            opt["learning_rate"] = float(lr)
        for k, v in hyper.items():
            opt[k] = float(v)
        init = {"kind": initializer, "seed": operator.index(seed)}
        if scale is not None:
            init["scale"] = float(scale)
        spec = {"name": name, "dim": dim, "optimizer": opt, "initializer": init}
        if rows is not None:
            spec["rows"] = operator.index(rows)
        self._call(_DECLARE, json.dumps(spec).encode("utf-8"))
        self._dims[name] = dim

    def dim(self, table):
        """Return the dim of a table this client declared, or None."""
        return self._dims.get(table)

    def pull(self, table, keys):
        """Return the rows of keys, a float32 array of shape keys.shape + (dim,).

        keys are integers (any shape; uint64 avoids a copy); a row is
        created by the table's initializer on first touch. Under BSP or
        SSP the call waits while this worker is ahead of the slowest by
        more than the job's bound.
        """
        shape = np.shape(keys)
        k = _as_keys(keys, table)
        body = self._call(_PULL, _name_bytes(table), k)
        (dim,) = struct.unpack_from("<I", body)
        rows = np.frombuffer(body, dtype="<f4", offset=4)
        if rows.size != k.size * dim:
            raise PSError(f"pull {k.size} keys of table {table} (dim {dim}): the proxy sent {rows.size} values")
        return rows.reshape(tuple(shape) + (dim,))

    def push(self, table, keys, grads):
        """Send gradients of keys' rows, for the servers to apply with the table's optimizer.

        grads holds dim values per key: shape keys.shape + (dim,) or
        (number of keys, dim); float32 avoids a copy. A key may appear
        more than once (its gradients are applied in turn). The push is
        all or nothing: a bad one (wrong shape, NaN or infinite values, a
        table not declared) changes no row. It returns once every server
        has applied its part.
        """
        k = _as_keys(keys, table)
        dim = self._dims.get(table)
        g = np.asarray(grads)
        if g.dtype.kind not in "fiu":
            raise TypeError(f"push to table {table}: gradients of dtype {g.dtype}: want float32")
        g = np.ascontiguousarray(g, dtype="<f4")
        if dim is not None and g.size != k.size * dim:
            raise ValueError(f"push {k.size} keys of table {table} (dim {dim}) with gradients of shape "
                             f"{g.shape}: want {k.size * dim} values; nothing applied")
        if not np.isfinite(g).all():
            flat = g.reshape(-1)
            bad = int(np.flatnonzero(~np.isfinite(flat))[0])
            row = bad // max(1, flat.size // max(1, k.size))
            key = f"key {int(k[row])}" if row < k.size else "a key"
            raise ValueError(f"push to table {table}: the gradient of {key} holds {flat[bad]}; nothing applied")
        self._call(_PUSH, _name_bytes(table), struct.pack("<I", k.size), k, g.reshape(-1))

    def clock(self):
        """End this worker's step (after its pushes) and return the number of steps it has finished."""
        (self.steps,) = struct.unpack("<q", self._call(_CLOCK))
        return self.steps

    def barrier(self):
        """Wait until every worker still in the job has finished as many steps as this one (any consistency model)."""
        self._call(_BARRIER)

    def export(self, table, uri):
        """Write every row of table to one Parquet file at uri (a path or hdfs://) and return the rows written.

        Columns: key (uint64) and value (fixed-size list of float32); the
        file appears whole or not at all.
        """
        (rows,) = struct.unpack("<Q", self._call(_EXPORT, _name_bytes(table), str(uri).encode("utf-8")))
        return rows

    def stats(self):
        """Return what the servers hold: {"worker", "clock", "servers": [{"server", "tables", "clocks"}]}.

        Each table entry has its name, keys, bytes, pushes and pulls on
        that server; clocks are the workers' clocks (-1: left).
        """
        return json.loads(bytes(self._call(_STATS)))

    def close(self):
        """Leave the parameter servers (no one waits for this worker's clock any more) and disconnect.

        A worker that has left cannot come back; closing twice does
        nothing. A process that ends well without closing is left for by
        its executor.
        """
        if self._closed:
            return
        try:
            if not self._broken:
                self._call(_LEAVE)
        finally:
            self._closed = True
            self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._closed else f"{self.steps} steps"
        return f"<spindle.ps.Client {self._path} {state}>"


def __getattr__(name):
    # Embedding needs torch, which `import spindle.ps` does not import.
    if name == "Embedding":
        try:
            from ._ps_torch import Embedding
        except ImportError as e:
            raise ImportError(f"spindle.ps.Embedding needs PyTorch: {e}") from None
        return Embedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
