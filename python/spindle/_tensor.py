"""The tensor feed format: a small header, then dense little-endian float32 batches.

See docs/feed-protocol.md. Stream header, once per connection: magic
``SPTF``, uint16 version (1), uint16 flags (bit 0: labels follow each
feature matrix), int32 epoch (-1 after the last epoch), uint32 feature
count F, uint32 names length N, then N bytes of a UTF-8 JSON array naming
the F features and then the label. Each batch: uint32 rows R (0 ends the
epoch), R*F float32 features row-major, then R float32 labels when flagged.
"""

import json
import struct
import sys

import numpy as np

from ._errors import FeedError

MAGIC = b"SPTF"
VERSION = 1
FLAG_LABEL = 1
HEADER = struct.Struct("<4sHHiII")

# Bounds that turn corrupt lengths into errors instead of huge allocations.
MAX_NAMES_BYTES = 64 << 20
MAX_BATCH_BYTES = 4 << 30

_F32 = np.dtype("<f4")
_NATIVE = sys.byteorder == "little"


class Header:
    """The header of one tensor-format stream."""

    __slots__ = ("epoch", "features", "label")

    def __init__(self, epoch, features, label):
        #: Epoch number, or -1 for the empty stream after the last epoch.
        self.epoch = epoch
        #: Names of the feature columns, in the order of a row's values.
        self.features = features
        #: Name of the label column, or None when batches carry no labels.
        self.label = label


def read_header(rd):
    """Read the stream header from rd (an ExactReader)."""
    head = rd.read_exact(HEADER.size, "inside the tensor stream header")
    magic, version, flags, epoch, nf, nn = HEADER.unpack(head)
    if magic != MAGIC:
        if head[:4] == b"\xff\xff\xff\xff":
            raise FeedError(f"{rd.name}: the feed speaks Arrow IPC, not the tensor format "
                            "(SPINDLE_FEED_MODE should be arrow)")
        raise FeedError(f"{rd.name}: bad magic {magic!r}, want {MAGIC!r}: not a tensor feed")
    if version != VERSION:
        raise FeedError(f"{rd.name}: tensor format version {version}; this package reads version {VERSION} "
                        "(upgrade the spindle Python package)")
    if nn > MAX_NAMES_BYTES:
        raise FeedError(f"{rd.name}: malformed tensor header: column names take {nn} bytes")
    raw = rd.read_exact(nn, "inside the tensor stream header")
    try:
        names = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FeedError(f"{rd.name}: malformed tensor header: column names: {e}") from None
    has_label = bool(flags & FLAG_LABEL)
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) \
            or len(names) != nf + has_label:
        raise FeedError(f"{rd.name}: malformed tensor header: {len(names) if isinstance(names, list) else names!r} "
                        f"names for {nf} features (label: {has_label})")
    return Header(epoch, names[:nf], names[nf] if has_label else None)


def read_batch(rd, header):
    """Read one batch. Returns (features, labels) or None at the end of the epoch.

    features is a float32 array of shape (rows, F); labels is a float32
    array of shape (rows,), or None when the stream has no labels. Both are
    views of one fresh buffer, so they stay valid after the next call.
    """
    (rows,) = struct.unpack("<I", rd.read_exact(4, "before the end-of-epoch frame"))
    if rows == 0:
        return None
    nf = len(header.features)
    n = rows * (nf + (header.label is not None))
    if 4 * n > MAX_BATCH_BYTES:
        raise FeedError(f"{rd.name}: malformed tensor batch: {rows} rows x {nf} features is too large")
    values = np.empty(n, dtype=_F32)
    rd.read_into(values, f"inside a batch of {rows} rows")
    return _split(values, rows, header)


def batch_from_message(msg, header, name):
    """Return (features, labels) of one batch frame held whole in msg, a uint8 array.

    The arrays are views of msg (which the shared-memory feed hands back
    once nothing refers to it), not copies.
    """
    if len(msg) < 4:
        raise FeedError(f"{name}: malformed tensor batch of {len(msg)} bytes")
    rows = int.from_bytes(msg[:4].tobytes(), "little")
    nf = len(header.features)
    n = rows * (nf + (header.label is not None))
    if rows == 0 or len(msg) != 4 + 4 * n:
        raise FeedError(f"{name}: malformed tensor batch: {len(msg)} bytes for {rows} rows x {nf} features")
    return _split(msg[4:].view(_F32), rows, header)


def _split(values, rows, header):
    """Return (features, labels) of a batch frame's values, as read off the stream (little-endian)."""
    if not _NATIVE:
        values = values.astype(np.float32)
    nf = len(header.features)
    x = values[:rows * nf].reshape(rows, nf)
    y = values[rows * nf:] if header.label is not None else None
    return x, y


def encode_header(epoch, features, label=None):
    """Return the header bytes of a tensor stream (for servers and tests)."""
    names = list(features) + ([label] if label is not None else [])
    js = json.dumps(names).encode("utf-8")
    flags = FLAG_LABEL if label is not None else 0
    return HEADER.pack(MAGIC, VERSION, flags, epoch, len(features), len(js)) + js


def encode_batch(x, y=None):
    """Return one batch frame for the feature matrix x and labels y (for servers and tests)."""
    x = np.asarray(x, dtype=_F32)
    if x.ndim != 2:
        raise ValueError(f"features must be a 2-D matrix, got shape {x.shape}")
    if x.shape[0] == 0:
        raise ValueError("a batch needs at least one row (a row count of 0 ends the epoch)")
    parts = [struct.pack("<I", x.shape[0]), np.ascontiguousarray(x).tobytes()]
    if y is not None:
        y = np.asarray(y, dtype=_F32)
        if y.shape != (x.shape[0],):
            raise ValueError(f"labels have shape {y.shape}, want ({x.shape[0]},)")
        parts.append(y.tobytes())
    return b"".join(parts)


END_OF_EPOCH = struct.pack("<I", 0)
