"""Reading the feed: one epoch per connection, in arrow, tensor or direct mode."""

import os
import socket
import stat

import numpy as np

from . import _arrow, _contract, _direct, _env, _shm, _tensor, _timeline
from ._arrow import pyarrow_available  # noqa: F401  (the package exports it from here)
from ._columns import assemble
from ._errors import FeedError
from ._io import ExactReader

# The metadata key of an arrow-mode schema that holds the epoch number.
META_EPOCH = "spindle.epoch"
# An optional metadata key naming the label column.
META_LABEL = "spindle.label"

_READ_BUFFER = 256 << 10

# The epoch the process opened last (not the empty one after the last),
# whose count of batches taken is the feed's position for checkpoints.
_last = None


def position():
    """Return (epoch, batches) where the process's feed stands: the batches of the epoch taken so far.

    An epoch read to its end puts the position at the start of the next
    one. Before any epoch is opened it is where the feed starts
    (SPINDLE_FEED_START_EPOCH, SPINDLE_FEED_START_BATCH).
    """
    ep = _last
    if ep is None:
        return _env.feed_start()
    if ep.ended:
        return ep.epoch + 1, 0
    return ep.epoch, ep.start_batch + ep.batches
_SOCKET_BUFFER = 4 << 20


class _ArrowSource:
    def __init__(self, rd, sock, use_pyarrow):
        self._sock = sock
        self._stream = _arrow.StreamReader(rd, use_pyarrow=use_pyarrow)
        md = self._stream.schema.metadata
        raw = md.get(META_EPOCH)
        try:
            self.epoch = int(raw)
        except (TypeError, ValueError):
            raise FeedError(f"{rd.name}: schema metadata {META_EPOCH} is {raw!r}, want an epoch number "
                            "(is this a Spindle feed?)") from None
        self.columns = self._stream.schema.names
        self.label = md.get(META_LABEL) or None

    def next_columns(self):
        return self._stream.next()

    def close(self):
        self._sock.close()


class _TensorSource:
    def __init__(self, rd, sock):
        self._rd = rd
        self._sock = sock
        self.header = _tensor.read_header(rd)
        self.epoch = self.header.epoch
        self.label = self.header.label
        self.columns = self.header.features + ([self.label] if self.label is not None else [])
        self._done = False

    def next_matrix(self):
        if self._done:
            return None
        if isinstance(self._rd, _shm.ShmStream):
            # Through shared memory: the arrays are views of the batch's
            # message, handed back once they are garbage.
            msg = self._rd.take_message()
            b = None if msg is None else _tensor.batch_from_message(msg, self.header, self._rd.name)
        else:
            b = _tensor.read_batch(self._rd, self.header)
        if b is None:
            self._done = True
        return b

    def next_columns(self):
        b = self.next_matrix()
        if b is None:
            return None
        x, y = b
        out = {n: x[:, j] for j, n in enumerate(self.header.features)}
        if y is not None:
            out[self.label] = y
        return out

    def close(self):
        self._sock.close()


class _EndSource:
    """The epoch after the last one in direct mode: no batches."""

    def __init__(self, columns, label):
        self.epoch = -1
        self.columns = columns
        self.label = label

    def next_columns(self):
        return None

    def close(self):
        pass


class Epoch:
    """One epoch of the feed: an iterator over its batches.

    Iterating yields dicts of columns (from :meth:`Feed.batches`) or
    ``(features, labels)`` pairs (from :meth:`Feed.tensors`). The epoch
    closes its connection when its batches run out; close it yourself (or
    use it as a context manager) to abandon the rest of the epoch.
    """

    def __init__(self, source, kind, label, dtype, where):
        self._src = source
        self._kind = kind
        self._dtype = dtype
        self._where = where
        #: Epoch number (0, 1, ...), or -1 when the feed has no epochs left.
        self.epoch = source.epoch
        #: Names of every column in a batch.
        self.columns = list(source.columns)
        #: Name of the label column, or None when the batches have none.
        self.label_column = label
        #: Rows and batches read so far.
        self.rows = 0
        self.batches = 0
        self.closed = False
        #: Batches of this epoch consumed before this generation (a resumed
        #: feed leaves them out), and whether the epoch was read to its end.
        self.start_batch = 0
        self.ended = False
        start_epoch, start_batch = _env.feed_start()
        if self.epoch >= 0 and self.epoch == start_epoch:
            self.start_batch = start_batch

    @property
    def end_of_feed(self):
        """Report whether this is the empty epoch that follows the last one."""
        return self.epoch < 0

    @property
    def feature_columns(self):
        """Return the names of the feature columns: every column but the label."""
        return [c for c in self.columns if c != self.label_column]

    def __iter__(self):
        return self

    def __next__(self):
        if self.closed:
            raise StopIteration
        try:
            with _timeline.span("feed", "next batch"):
                if self._kind == "tensors":
                    item = self._next_tensors()
                else:
                    item = self._src.next_columns()
        except BaseException:
            self.close()
            raise
        if item is None:
            self.ended = True
            self.close()
            raise StopIteration
        self.batches += 1
        self.rows += len(item[0]) if self._kind == "tensors" else (len(next(iter(item.values()))) if item else 0)
        return item

    def _next_tensors(self):
        if isinstance(self._src, _TensorSource):
            b = self._src.next_matrix()
            if b is None:
                return None
            x, y = b
            if self._dtype is not None and x.dtype != self._dtype:
                x = x.astype(self._dtype)
            return x, y
        cols = self._src.next_columns()
        if cols is None:
            return None
        return assemble(cols, self.label_column, dtype=self._dtype or np.float32)

    def close(self):
        """Close the connection; the rest of the epoch is skipped."""
        if not self.closed:
            self.closed = True
            self._src.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return f"<spindle.Epoch {self.epoch} of {self._where}: {self.batches} batches read>"


class Feed:
    """A training process's feed.

    With no arguments it reads SPINDLE_FEED and SPINDLE_FEED_MODE. path
    overrides SPINDLE_FEED; mode (``"arrow"``, ``"tensor"``, ``"direct"``)
    overrides SPINDLE_FEED_MODE, and when neither says, the mode is detected
    from the path (a socket or a JSON file) and the stream's first bytes.
    use_pyarrow chooses the Arrow decoder: True uses pyarrow, False the
    built-in reader. None (unless SPINDLE_PYARROW is ``0``, which means
    False) decodes a stream from the executor with the built-in reader,
    which is faster and needs no import, and with pyarrow, when installed,
    where it is needed (columns of nested types, compressed batches);
    Parquet read directly goes through pyarrow when installed. Both
    decoders give the same columns. label_column names the label for
    :meth:`tensors` when the feed does not say.
    """

    def __init__(self, path=None, mode=None, use_pyarrow=None, label_column=None):
        if path is None:
            path = _env.feed_path()
            if mode is None and os.environ.get(_contract.FEED_MODE):
                mode = _env.feed_mode()
        if mode is not None:
            mode = str(mode).strip().lower()
            if mode not in _env.FEED_MODES:
                raise FeedError(f"feed mode {mode!r} is not one of {', '.join(_env.FEED_MODES)}")
        if use_pyarrow is None and os.environ.get(_contract.PYARROW, "1") == "0":
            use_pyarrow = False
        self.path = os.fspath(path)
        self.mode = mode
        #: True, False, or None: each decoder where it serves best.
        self.use_pyarrow = None if use_pyarrow is None else bool(use_pyarrow)
        self.label_column = label_column
        #: The number of the epoch opened last, or None before the first.
        self.last_epoch = None
        self._pending = None
        self._spec = None
        self._direct_next = None
        # In a job of a session with input: the session feed's epochs
        # [first, end) that are this job's, numbered from 0 for it.
        self._window = _env.session_epochs()
        self._window_next = self._window[0] if self._window else 0
        self._window_columns = ([], None)  # the columns the end of the job's turn shows

    def __repr__(self):
        return f"<spindle.Feed {self.mode or 'auto'} {self.path}>"

    # Opening epochs.

    def _is_direct(self):
        if self.mode is None:
            try:
                st = os.stat(self.path)
            except OSError as e:
                raise FeedError(f"feed {self.path}: {e.strerror} (the executor creates it before starting "
                                "the training process; is SPINDLE_FEED right?)") from None
            self.mode = "direct" if stat.S_ISREG(st.st_mode) else None
        return self.mode == "direct"

    def _connect(self):
        """Connect for the next epoch: through shared memory where the executor offers it, else the socket.

        Returns the connection (what closing the epoch closes) and the reader of its stream.
        """
        shm = _shm.connect(self.path, _READ_BUFFER)
        if shm is not None:
            return shm, shm
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        except OSError:
            pass
        try:
            s.connect(self.path)
        except FileNotFoundError:
            s.close()
            raise FeedError(f"connect to feed {self.path}: no such socket (the executor creates it "
                            "before starting the training process; is SPINDLE_FEED right?)") from None
        except ConnectionRefusedError:
            s.close()
            raise FeedError(f"connect to feed {self.path}: connection refused (the executor has stopped)") from None
        except OSError as e:
            s.close()
            raise FeedError(f"connect to feed {self.path}: {e.strerror or e}") from None
        return s, ExactReader(s.makefile("rb", buffering=_READ_BUFFER), self.path)

    def _direct_pyarrow(self):
        """Say whether direct mode reads files with pyarrow: when installed, unless told otherwise."""
        if self.use_pyarrow is None:
            self.use_pyarrow = pyarrow_available()
        return self.use_pyarrow

    def _open_source(self):
        if self._pending is not None:
            src, self._pending = self._pending, None
            return src
        if self._is_direct():
            return self._open_direct()
        if self._window is None:
            return self._open_stream()
        # A job of a session: its turn of the session's epochs. An epoch
        # below it is one an earlier job left unread: skipped whole, so
        # that every rank's job starts on the same epoch.
        end = self._window[1]
        while self._window_next < end:
            src = self._open_stream()
            if src.epoch < 0:
                return src
            if src.epoch < self._window_next:
                src.close()
                continue
            self._window_next = src.epoch + 1
            if src.epoch < end:
                self._window_columns = (list(src.columns), src.label)
                return src
            src.close()
        self._window_next = end
        return _EndSource(*self._window_columns)

    def _open_direct(self):
        if self._spec is None:
            self._spec = _direct.load_spec(self.path)
        spec = self._spec
        first, end = self._window or (0, spec.epochs)
        if self._direct_next is None:
            self._direct_next = max(spec.start_epoch, first)  # a resumed feed starts there
        k = self._direct_next
        self._direct_next += 1
        if k >= min(spec.epochs, end):
            try:
                cols = _direct.DirectEpoch(spec, -1, self._direct_pyarrow()).columns
            except FeedError:
                cols = []  # the end of the feed needs no data
            return _EndSource(cols, spec.label_column)
        src = _direct.DirectEpoch(spec, k, self._direct_pyarrow())
        if k == spec.start_epoch:
            for _ in range(spec.start_batch):  # consumed before the restart
                if src.next_columns() is None:
                    break
        return src

    def _open_stream(self):
        """Connect for the next epoch the executor serves and read its header."""
        sock, rd = self._connect()
        try:
            head = rd.read_exact(4, "before the stream's first message", allow_eof=True)
            if not head:
                raise FeedError(f"{self.path}: the feed closed the connection without sending anything")
            rd.push_back(head)
            fmt = "tensor" if head == _tensor.MAGIC else "arrow"
            if self.mode is not None and fmt != self.mode:
                raise FeedError(f"{self.path}: the feed speaks the {fmt} format, but the mode is {self.mode} "
                                "(SPINDLE_FEED_MODE)")
            if fmt == "tensor":
                return _TensorSource(rd, sock)
            return _ArrowSource(rd, sock, self.use_pyarrow)
        except BaseException:
            sock.close()
            raise

    def _label_for(self, src, label_column):
        if isinstance(src, _EndSource) and not src.columns:
            return None  # a session job's turn ended before it opened an epoch
        header_label = src.label if isinstance(src, _TensorSource) else None
        if header_label is not None or isinstance(src, _TensorSource):
            if label_column is not None and label_column != header_label:
                raise FeedError(f"{self.path}: label column {label_column!r} was asked for, but the tensor "
                                f"feed's label is {header_label!r}")
            return header_label
        label = label_column or self.label_column or _env.label_column() or src.label
        if label is not None and label not in src.columns:
            raise FeedError(f"{self.path}: label column {label!r} is not among the feed's columns "
                            f"{', '.join(src.columns)}")
        return label

    def _open(self, kind, label_column=None, dtype=None):
        src = self._open_source()
        try:
            label = self._label_for(src, label_column)
        except BaseException:
            src.close()
            raise
        ep = Epoch(src, kind, label, dtype, self.path)
        if self._window is not None and ep.epoch >= 0:
            ep.epoch -= self._window[0]  # the job's own numbering, from 0
        self.last_epoch = ep.epoch
        if ep.epoch >= 0:
            global _last
            _last = ep
        return ep

    def batches(self):
        """Open the next epoch and return it as an iterator of batches.

        Each batch is a dict mapping column name to a 1-D numpy array. After
        the last epoch the returned iterator is empty (its ``epoch`` is -1).
        """
        return self._open("batches")

    def tensors(self, label_column=None, dtype=np.float32):
        """Open the next epoch and return it as an iterator of ``(features, labels)``.

        features is a 2-D array (rows x features) of dtype holding every
        column but the label; labels is a 1-D array, or None when the feed
        has no label column. In tensor mode labels are float32; otherwise
        they keep the label column's type.
        """
        return self._open("tensors", label_column, np.dtype(dtype) if dtype is not None else None)

    def epochs(self, kind="batches", label_column=None, dtype=np.float32):
        """Yield each remaining epoch (an :class:`Epoch`) until the feed has none left."""
        if kind not in ("batches", "tensors"):
            raise ValueError(f"kind {kind!r}: want 'batches' or 'tensors'")
        while True:
            ep = self._open(kind, label_column, np.dtype(dtype) if kind == "tensors" else None)
            if ep.end_of_feed:
                ep.close()
                return
            with ep:
                yield ep

    def columns(self):
        """Return the names of the feed's columns, the label last when there is one.

        In arrow and tensor mode this opens the next epoch's connection to
        read its header and keeps it for the next :meth:`batches` or
        :meth:`tensors` call; no data are lost.
        """
        if self._pending is None:
            self._pending = self._open_source()
        return list(self._pending.columns)

    def feature_columns(self, label_column=None):
        """Return the names of the feature columns (every column but the label)."""
        cols = self.columns()
        label = self._label_for(self._pending, label_column)
        return [c for c in cols if c != label]
