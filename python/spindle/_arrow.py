"""A small Arrow IPC reader written with nothing but ``struct`` and numpy.

It reads the Arrow IPC streaming format (what an arrow-mode feed sends)
and the Arrow IPC file format (what direct mode may be told to read) for
flat columns: signed and unsigned integers, half, single and double
floats, booleans, UTF-8 strings and binary (regular and large), dates,
timestamps and durations, and in streams those columns dictionary-encoded
(decoded to their values: the arrow feed keeps Parquet's dictionary-encoded
strings so). Nested and compressed data, and dictionaries in files, raise
:class:`UnsupportedTypeError`; pyarrow, when installed, reads those.

The metadata of an Arrow message is a FlatBuffer (Message.fbs and
Schema.fbs of the Arrow format). A FlatBuffer table starts with a signed
32-bit offset back to its vtable; the vtable lists, for each field slot,
the field's offset inside the table (0 when the field is absent and takes
its default). Strings, vectors and sub-tables are reached through an
unsigned 32-bit offset relative to where that offset is stored.

Nulls are decoded as NaN in float columns, NaT in date and time columns,
None in string and binary columns, and as a ``numpy.ma.MaskedArray`` for
integer and boolean columns.
"""

import struct

import numpy as np

from ._columns import strings_from_offsets
from ._errors import FeedError, FeedTruncatedError, UnsupportedTypeError

CONTINUATION = 0xFFFFFFFF
FILE_MAGIC = b"ARROW1"

# Bounds that turn corrupt lengths into errors instead of huge allocations.
MAX_METADATA_BYTES = 64 << 20
MAX_BODY_BYTES = 16 << 30

# MessageHeader union tags (Message.fbs).
_HEADER_SCHEMA = 1
_HEADER_DICTIONARY_BATCH = 2
_HEADER_RECORD_BATCH = 3
_HEADER_NAMES = {1: "Schema", 2: "DictionaryBatch", 3: "RecordBatch", 4: "Tensor", 5: "SparseTensor"}

# MetadataVersion: V4 is Arrow 0.8, V5 is Arrow 1.0; earlier ones differ in layout.
_METADATA_V4 = 3

# Type union tags (Schema.fbs).
_TYPE_NAMES = {
    0: "none", 1: "null", 2: "int", 3: "floating_point", 4: "binary", 5: "utf8", 6: "bool",
    7: "decimal", 8: "date", 9: "time", 10: "timestamp", 11: "interval", 12: "list",
    13: "struct", 14: "union", 15: "fixed_size_binary", 16: "fixed_size_list", 17: "map",
    18: "duration", 19: "large_binary", 20: "large_utf8", 21: "large_list",
    22: "run_end_encoded", 23: "binary_view", 24: "utf8_view", 25: "list_view",
    26: "large_list_view",
}
_TIME_UNITS = {0: "s", 1: "ms", 2: "us", 3: "ns"}

_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")


class _Table:
    """A FlatBuffer table at position pos of buf."""

    __slots__ = ("buf", "pos", "vt", "vt_len")

    def __init__(self, buf, pos):
        if not 0 <= pos <= len(buf) - 4:
            raise FeedError(f"malformed Arrow metadata: table offset {pos} is outside {len(buf)} bytes")
        self.buf = buf
        self.pos = pos
        self.vt = pos - _I32.unpack_from(buf, pos)[0]
        if not 0 <= self.vt <= len(buf) - 4:
            raise FeedError(f"malformed Arrow metadata: vtable offset {self.vt} is outside {len(buf)} bytes")
        self.vt_len = _U16.unpack_from(buf, self.vt)[0]

    @classmethod
    def root(cls, buf):
        if len(buf) < 4:
            raise FeedError(f"malformed Arrow metadata: {len(buf)} bytes")
        return cls(buf, _U32.unpack_from(buf, 0)[0])

    def _field(self, slot):
        o = 4 + 2 * slot
        if o + 2 > self.vt_len:
            return 0
        return _U16.unpack_from(self.buf, self.vt + o)[0]

    def scalar(self, slot, fmt, default):
        off = self._field(slot)
        if not off:
            return default
        return struct.unpack_from(fmt, self.buf, self.pos + off)[0]

    def _target(self, slot):
        off = self._field(slot)
        if not off:
            return None
        p = self.pos + off
        target = p + _U32.unpack_from(self.buf, p)[0]
        if target > len(self.buf) - 4:
            raise FeedError(f"malformed Arrow metadata: offset {target} is outside {len(self.buf)} bytes")
        return target

    def table(self, slot):
        p = self._target(slot)
        return None if p is None else _Table(self.buf, p)

    def string(self, slot):
        p = self._target(slot)
        if p is None:
            return None
        n = _U32.unpack_from(self.buf, p)[0]
        if p + 4 + n > len(self.buf):
            raise FeedError("malformed Arrow metadata: string runs past the end")
        return bytes(self.buf[p + 4:p + 4 + n]).decode("utf-8", errors="replace")

    def vector(self, slot, elem_size):
        """Return (start, count) of a vector of elem_size-byte elements, or (0, 0)."""
        p = self._target(slot)
        if p is None:
            return 0, 0
        n = _U32.unpack_from(self.buf, p)[0]
        if p + 4 + n * elem_size > len(self.buf):
            raise FeedError("malformed Arrow metadata: vector runs past the end")
        return p + 4, n

    def tables(self, slot):
        start, n = self.vector(slot, 4)
        out = []
        for i in range(n):
            q = start + 4 * i
            out.append(_Table(self.buf, q + _U32.unpack_from(self.buf, q)[0]))
        return out


def _scalar(t, slot, fmt, default):
    return default if t is None else t.scalar(slot, fmt, default)


class Field:
    """One column of an Arrow schema, as far as this reader understands it.

    ``kind`` is ``"fixed"`` (one fixed-width value per row, ``dtype`` says
    which), ``"bool"``, ``"varbin"`` (strings or binary), ``"null"``,
    ``"dict"`` (indices, ``storage`` says their type, into the dictionary
    number ``dict_id`` of values described by ``value``), or
    ``"unsupported"`` (decoding it raises :class:`UnsupportedTypeError`).
    """

    __slots__ = ("name", "type_name", "kind", "dtype", "nullable", "utf8", "offset_dtype", "storage", "dict_id",
                 "value")

    def __init__(self, name, type_name, kind, dtype=None, nullable=True, utf8=False, offset_dtype=None,
                 storage=None):
        self.name = name
        self.type_name = type_name
        self.kind = kind
        #: The numpy dtype of the decoded column.
        self.dtype = dtype
        self.nullable = nullable
        self.utf8 = utf8
        self.offset_dtype = offset_dtype
        #: The numpy dtype of the values on the wire, when it differs from dtype.
        self.storage = storage if storage is not None else dtype
        self.dict_id = None
        self.value = None

    @property
    def buffers(self):
        """Return how many body buffers the column has in a record batch."""
        return {"fixed": 2, "bool": 2, "varbin": 3, "null": 0, "dict": 2}.get(self.kind, 0)

    def __repr__(self):
        return f"Field({self.name!r}, {self.type_name})"


class Schema:
    """The columns of an Arrow stream or file and its key/value metadata."""

    __slots__ = ("fields", "metadata", "little_endian")

    def __init__(self, fields, metadata, little_endian=True):
        self.fields = fields
        self.metadata = metadata
        self.little_endian = little_endian

    @property
    def names(self):
        """Return the column names, in order."""
        return [f.name for f in self.fields]

    def __repr__(self):
        return f"Schema({self.fields!r}, metadata={self.metadata!r})"


def _metadata(tables):
    md = {}
    for kv in tables:
        key = kv.string(0)
        if key is not None:
            md[key] = kv.string(1) or ""
    return md


def _parse_field(t, bo):
    f = _parse_value_field(t, bo)
    enc = t.table(4)
    if enc is None or f.kind == "unsupported":
        if enc is not None:
            f.type_name = f"dictionary-encoded {f.type_name}"
        return f
    # DictionaryEncoding: id, indexType (Int; int32 when absent), isOrdered.
    it = enc.table(1)
    bits = _scalar(it, 0, "<i", 32) if it is not None else 32
    signed = _scalar(it, 1, "<?", True) if it is not None else True
    if bits not in (8, 16, 32, 64) or f.kind == "null":
        return Field(f.name, f"dictionary-encoded {f.type_name}", "unsupported", nullable=f.nullable)
    d = Field(f.name, f"dictionary<{f.type_name}>", "dict", f.dtype, f.nullable,
              storage=np.dtype(f"{bo}{'i' if signed else 'u'}{bits // 8}"))
    d.dict_id = enc.scalar(0, "<q", 0)
    d.value = f
    return d


def _parse_value_field(t, bo):
    name = t.string(0) or ""
    nullable = t.scalar(1, "<?", False)
    type_id = t.scalar(2, "<B", 0)
    tt = t.table(3)
    type_name = _TYPE_NAMES.get(type_id, f"type {type_id}")

    def unsupported(what=None):
        return Field(name, what or type_name, "unsupported", nullable=nullable)

    if type_id == 1:
        return Field(name, "null", "null", nullable=True)
    if type_id == 2:
        bits = _scalar(tt, 0, "<i", 0)
        signed = _scalar(tt, 1, "<?", False)
        if bits not in (8, 16, 32, 64):
            return unsupported(f"int with {bits} bits")
        prefix = "i" if signed else "u"
        return Field(name, f"{'int' if signed else 'uint'}{bits}", "fixed",
                     np.dtype(f"{bo}{prefix}{bits // 8}"), nullable)
    if type_id == 3:
        precision = _scalar(tt, 0, "<h", 0)
        size = {0: 2, 1: 4, 2: 8}.get(precision)
        if size is None:
            return unsupported(f"floating point with precision {precision}")
        return Field(name, f"float{8 * size}", "fixed", np.dtype(f"{bo}f{size}"), nullable)
    if type_id == 6:
        return Field(name, "bool", "bool", np.dtype(bool), nullable)
    if type_id in (4, 5, 19, 20):
        large = type_id in (19, 20)
        utf8 = type_id in (5, 20)
        return Field(name, type_name, "varbin", np.dtype(object), nullable, utf8=utf8,
                     offset_dtype=np.dtype(f"{bo}i8" if large else f"{bo}i4"))
    if type_id == 8:
        unit = _scalar(tt, 0, "<h", 1)
        if unit == 0:
            return Field(name, "date32", "fixed", np.dtype("M8[D]"), nullable, storage=np.dtype(f"{bo}i4"))
        return Field(name, "date64", "fixed", np.dtype(f"{bo}M8[ms]"), nullable)
    if type_id in (10, 18):
        unit = _TIME_UNITS.get(_scalar(tt, 0, "<h", 0 if type_id == 10 else 1))
        if unit is None:
            return unsupported()
        code = "M8" if type_id == 10 else "m8"
        return Field(name, f"{type_name}[{unit}]", "fixed", np.dtype(f"{bo}{code}[{unit}]"), nullable)
    return unsupported()


def parse_schema(t):
    """Build a Schema from a Schema FlatBuffer table."""
    little = _scalar(t, 0, "<h", 0) == 0
    bo = "<" if little else ">"
    fields = [_parse_field(f, bo) for f in t.tables(1)]
    return Schema(fields, _metadata(t.tables(2)), little)


class Message:
    """One encapsulated Arrow IPC message: its header and its body."""

    __slots__ = ("header_type", "header", "body", "raw")

    def __init__(self, header_type, header, body, raw):
        self.header_type = header_type
        self.header = header
        #: The message body as a numpy uint8 array.
        self.body = body
        #: The whole message (prefix, metadata and body) as a numpy uint8
        #: array, which pyarrow can decode unchanged.
        self.raw = raw

    @property
    def kind(self):
        return _HEADER_NAMES.get(self.header_type, f"message type {self.header_type}")


def parse_message_metadata(meta):
    """Return (header_type, header table, body length) of Message FlatBuffer bytes."""
    msg = _Table.root(meta)
    version = msg.scalar(0, "<h", 0)
    if version < _METADATA_V4:
        raise FeedError(f"Arrow IPC metadata version V{version + 1} predates Arrow 0.8; this reader needs V4 or V5")
    header_type = msg.scalar(1, "<B", 0)
    header = msg.table(2)
    body_len = msg.scalar(3, "<q", 0)
    if header is None:
        raise FeedError("malformed Arrow message: no header")
    if not 0 <= body_len <= MAX_BODY_BYTES:
        raise FeedError(f"malformed Arrow message: body of {body_len} bytes")
    return header_type, header, body_len


def read_stream_message(rd):
    """Read the next message of an Arrow IPC stream from rd.

    rd is a :class:`spindle._io.ExactReader`. Returns None at the
    end-of-stream marker. A stream that ends without the marker, or inside
    a message, raises :class:`FeedTruncatedError`: Spindle always writes
    the marker, so its absence means the executor stopped mid-epoch.
    """
    head = rd.read_exact(4, "before the end-of-stream marker", allow_eof=True)
    if not head:
        raise FeedTruncatedError(f"{rd.name}: stream ended without an end-of-stream marker")
    if head == b"SPTF":
        raise FeedError(f"{rd.name}: the feed speaks the tensor format, not Arrow IPC "
                        "(SPINDLE_FEED_MODE should be tensor)")
    (first,) = _U32.unpack(head)
    if first == CONTINUATION:
        (meta_len,) = _I32.unpack(rd.read_exact(4, "after a continuation marker (the stream was cut)"))
    else:
        # Streams written before Arrow 0.15 have no continuation marker.
        (meta_len,) = _I32.unpack(head)
    if meta_len == 0:
        return None
    if not 0 < meta_len <= MAX_METADATA_BYTES:
        raise FeedError(f"{rd.name}: malformed Arrow stream: message metadata of {meta_len} bytes")
    meta = rd.read_exact(meta_len, "inside a message's metadata")
    header_type, header, body_len = _parse_metadata(meta, rd.name)
    raw = np.empty(8 + meta_len + body_len, dtype=np.uint8)
    raw[:4] = 0xFF
    raw[4:8] = np.frombuffer(_I32.pack(meta_len), dtype=np.uint8)
    raw[8:8 + meta_len] = np.frombuffer(meta, dtype=np.uint8)
    body = raw[8 + meta_len:]
    rd.read_into(body, f"inside a message body of {body_len} bytes")
    return Message(header_type, header, body, raw)


def _parse_metadata(meta, name):
    """parse_message_metadata, its errors naming the stream."""
    try:
        return parse_message_metadata(meta)
    except (struct.error, UnicodeDecodeError) as e:
        raise FeedError(f"{name}: malformed Arrow message metadata: {e}") from None
    except FeedError as e:
        raise FeedError(f"{name}: {e}") from None


def message_from_array(raw, name):
    """Return the Message held whole in raw, a uint8 array (its body a view of raw, not a copy)."""
    if len(raw) < 8 or raw[:4].tobytes() != b"\xff\xff\xff\xff":
        if raw[:4].tobytes() == b"SPTF":
            raise FeedError(f"{name}: the feed speaks the tensor format, not Arrow IPC "
                            "(SPINDLE_FEED_MODE should be tensor)")
        raise FeedError(f"{name}: malformed Arrow stream: a message without its continuation marker")
    (meta_len,) = _I32.unpack(raw[4:8].tobytes())
    if not 0 < meta_len <= min(MAX_METADATA_BYTES, len(raw) - 8):
        raise FeedError(f"{name}: malformed Arrow stream: message metadata of {meta_len} bytes")
    header_type, header, body_len = _parse_metadata(raw[8:8 + meta_len].tobytes(), name)
    if 8 + meta_len + body_len != len(raw):
        raise FeedError(f"{name}: malformed Arrow stream: a message of {len(raw)} bytes says its body has {body_len}")
    return Message(header_type, header, raw[8 + meta_len:], raw)


def _valid_bits(body, off, n):
    return np.unpackbits(np.frombuffer(body, dtype=np.uint8, count=(n + 7) // 8, offset=off),
                         count=n, bitorder="little").astype(bool)


class _Buffers:
    """The body buffers of a record batch, bounds-checked."""

    def __init__(self, rb, body, where):
        self.buf = rb.buf
        self.start, self.count = rb.vector(2, 16)
        self.body = body
        self.where = where

    def get(self, i, column):
        if i >= self.count:
            raise FeedError(f"{self.where}: record batch lists {self.count} buffers; column {column!r} needs more")
        off, length = struct.unpack_from("<qq", self.buf, self.start + 16 * i)
        if off < 0 or length < 0 or off + length > len(self.body):
            raise FeedError(f"{self.where}: column {column!r}: buffer [{off}, {off + length}) is outside "
                            f"the {len(self.body)}-byte message body")
        return off, length


def decode_record_batch(schema, rb, body, where, dicts=None):
    """Decode a RecordBatch FlatBuffer table and its body into columns.

    Returns a dict mapping each column name to a 1-D numpy array, in schema
    order. dicts maps dictionary ids to their decoded values, for
    dictionary-encoded columns.
    """
    if rb.table(3) is not None:
        raise UnsupportedTypeError(f"{where}: the record batch is compressed (LZ4 or ZSTD); "
                                   "install pyarrow to read compressed Arrow data")
    rows = rb.scalar(0, "<q", 0)
    nodes_start, nodes = rb.vector(1, 16)
    if nodes < len(schema.fields):
        raise FeedError(f"{where}: record batch has {nodes} field nodes for {len(schema.fields)} columns")
    bufs = _Buffers(rb, body, where)
    out = {}
    bi = 0
    for i, f in enumerate(schema.fields):
        n, nulls = struct.unpack_from("<qq", rb.buf, nodes_start + 16 * i)
        if n != rows:
            raise FeedError(f"{where}: column {f.name!r} has {n} rows in a batch of {rows}")
        if f.kind == "unsupported":
            raise UnsupportedTypeError(
                f"{where}: column {f.name!r} has type {f.type_name}, which the built-in Arrow reader "
                "does not decode; install pyarrow, or leave the column out with --columns")
        col_bufs = [bufs.get(bi + j, f.name) for j in range(f.buffers)]
        bi += f.buffers
        if f.kind == "dict":
            out[f.name] = _decode_dict_column(f, n, nulls, col_bufs, body, where, dicts or {})
        else:
            out[f.name] = _decode_column(f, n, nulls, col_bufs, body, where)
    return out


def _decode_dict_column(f, n, nulls, bufs, body, where, dicts):
    """Decode a dictionary-encoded column to its values, as the column would be without the dictionary."""
    values = dicts.get(f.dict_id)
    if values is None:
        raise FeedError(f"{where}: column {f.name!r} uses dictionary {f.dict_id}, which the stream has not sent")
    idx = _decode_column(Field(f.name, "indices", "fixed", f.storage, f.nullable), n, nulls, bufs, body, where)
    valid = None
    if isinstance(idx, np.ma.MaskedArray):
        valid = ~np.ma.getmaskarray(idx)
        idx = idx.filled(0)
    idx = idx.astype(np.int64)
    live = idx if valid is None else idx[valid]
    if len(live) and (live.min() < 0 or live.max() >= len(values)):
        raise FeedError(f"{where}: column {f.name!r}: index outside its dictionary of {len(values)} values")
    vals = values.filled() if isinstance(values, np.ma.MaskedArray) else values
    out = vals[idx] if len(vals) else np.empty(n, dtype=vals.dtype)
    dict_nulls = np.ma.getmaskarray(values)[idx] if isinstance(values, np.ma.MaskedArray) and len(vals) else None
    if valid is not None:
        dict_nulls = ~valid if dict_nulls is None else dict_nulls | ~valid
    if dict_nulls is None or not dict_nulls.any():
        return out
    kind = out.dtype.kind
    if kind == "O":
        out[dict_nulls] = None
    elif kind == "f":
        out[dict_nulls] = np.nan
    elif kind in "Mm":
        out[dict_nulls] = np.datetime64("NaT") if kind == "M" else np.timedelta64("NaT")
    else:
        return np.ma.MaskedArray(out, mask=dict_nulls)
    return out


def _decode_dictionary_batch(schema, header, body, dicts, where):
    """Add a DictionaryBatch message's values to dicts (by dictionary id)."""
    did = header.scalar(0, "<q", 0)
    rb = header.table(1)
    delta = header.scalar(2, "<?", False)
    f = next((f for f in schema.fields if f.kind == "dict" and f.dict_id == did), None)
    if f is None:
        raise FeedError(f"{where}: dictionary batch for dictionary {did}, which no column uses")
    if rb is None:
        raise FeedError(f"{where}: dictionary batch {did} has no data")
    values = decode_record_batch(Schema([f.value], {}), rb, body, where)[f.value.name]
    if delta:
        if did not in dicts:
            raise FeedError(f"{where}: delta for dictionary {did}, which the stream has not sent")
        old = dicts[did]
        if isinstance(old, np.ma.MaskedArray) or isinstance(values, np.ma.MaskedArray):
            values = np.ma.concatenate([old, values])
        else:
            values = np.concatenate([old, values])
    dicts[did] = values


def _decode_column(f, n, nulls, bufs, body, where):
    if f.kind == "null":
        return np.full(n, None, dtype=object)
    valid = None
    if nulls > 0:
        voff, vlen = bufs[0]
        if vlen == 0 and nulls == n:
            valid = np.zeros(n, dtype=bool)
        elif vlen < (n + 7) // 8:
            raise FeedError(f"{where}: column {f.name!r}: validity bitmap of {vlen} bytes for {n} rows")
        else:
            valid = _valid_bits(body, voff, n)
    off, length = bufs[1]

    if f.kind == "fixed":
        need = n * f.storage.itemsize
        if length < need:
            raise FeedError(f"{where}: column {f.name!r}: {length} bytes of values for {n} rows of {f.type_name}")
        values = np.frombuffer(body, dtype=f.storage, count=n, offset=off) if n else np.empty(0, f.storage)
        if f.storage != f.dtype:
            values = values.astype(f.dtype)
        if valid is None:
            return values
        if f.dtype.kind in "fMm":
            if not values.flags.writeable:
                values = values.copy()
            values[~valid] = np.nan if f.dtype.kind == "f" else np.datetime64("NaT") if f.dtype.kind == "M" \
                else np.timedelta64("NaT")
            return values
        return np.ma.MaskedArray(values, mask=~valid)

    if f.kind == "bool":
        if length < (n + 7) // 8:
            raise FeedError(f"{where}: column {f.name!r}: {length} bytes of bits for {n} rows")
        values = _valid_bits(body, off, n)
        return values if valid is None else np.ma.MaskedArray(values, mask=~valid)

    # Strings and binary: n+1 offsets into a data buffer.
    doff, dlen = bufs[2]
    if n == 0:
        return np.empty(0, dtype=object)
    if length < (n + 1) * f.offset_dtype.itemsize:
        raise FeedError(f"{where}: column {f.name!r}: {length} bytes of offsets for {n} rows")
    offsets = np.frombuffer(body, dtype=f.offset_dtype, count=n + 1, offset=off).astype(np.int64)
    if offsets[0] < 0 or offsets[-1] > dlen or np.any(offsets[1:] < offsets[:-1]):
        raise FeedError(f"{where}: column {f.name!r}: offsets run outside its {dlen} bytes of data")
    data = body[doff:doff + dlen].tobytes()
    return strings_from_offsets(offsets, data, valid, f.utf8, where, f.name)


class StreamReader:
    """Reads one Arrow IPC stream: its schema, then record batches.

    With ``use_pyarrow``, message framing is still done here (so that a cut
    stream is always detected) and pyarrow decodes the batches. With
    ``use_pyarrow=None`` the built-in reader decodes them unless the schema
    has columns it does not decode, or a batch comes compressed (in a
    stream without dictionaries), and pyarrow is installed: importing
    pyarrow alone costs more than the built-in reader takes for a
    stream's first million rows.
    """

    def __init__(self, rd, use_pyarrow=False):
        self._rd = rd
        if hasattr(rd, "take_message"):
            # Shared memory: each message whole, its body not copied.
            def read_message():
                raw = rd.take_message()
                return None if raw is None else message_from_array(raw, rd.name)
        else:
            def read_message():
                return read_stream_message(rd)
        self._read_message = read_message
        self._pa = None
        self._pa_schema = None
        self._pa_replay = None
        self._dicts = {}
        self.done = False
        msg = self._read_message()
        if msg is None:
            raise FeedError(f"{rd.name}: Arrow stream ends before its schema")
        if msg.header_type != _HEADER_SCHEMA:
            raise FeedError(f"{rd.name}: Arrow stream starts with a {msg.kind} message, not a schema")
        try:
            self.schema = parse_schema(msg.header)
        except (struct.error, UnicodeDecodeError) as e:
            raise FeedError(f"{rd.name}: malformed Arrow schema: {e}") from None
        # A copy: msg.raw may be a view of the shared region, which a
        # reference kept here would hold for as long as the reader lives.
        self._schema_raw = memoryview(bytes(msg.raw))
        self._auto = use_pyarrow is None
        if self._auto:
            use_pyarrow = any(f.kind == "unsupported" for f in self.schema.fields) and pyarrow_available()
        if use_pyarrow:
            self._use_pyarrow()

    def _use_pyarrow(self):
        """Decode this stream's batches with pyarrow from here on."""
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401  (loads the submodule)

        self._pa = pa
        if any(f.kind == "dict" for f in self.schema.fields):
            # pyarrow keeps the dictionaries itself: its stream reader
            # reads the messages framed here.
            self._pa_replay = _Replay(self._schema_raw)
            self._pa_reader = pa.ipc.open_stream(self._pa_replay)
        else:
            self._pa_schema = pa.ipc.read_schema(pa.py_buffer(self._schema_raw))

    def next(self):
        """Return the next batch as a dict of columns, or None at the end of the stream."""
        return self._next(raw=False)

    def next_record_batch(self):
        """Return the next batch as a pyarrow RecordBatch, or None at the end of the stream.

        The batch may lie in the feed's shared memory, which goes back to
        the executor once the batch and every slice of it are garbage.
        """
        if self._pa is None:
            self._use_pyarrow()
        return self._next(raw=True)

    def _next(self, raw):
        if self.done:
            return None
        msg = self._read_message()
        if msg is None:
            self.done = True
            return None
        while msg.header_type == _HEADER_DICTIONARY_BATCH:
            if self._pa_replay is not None:
                self._pa_replay.add(msg.raw)
            else:
                try:
                    _decode_dictionary_batch(self.schema, msg.header, msg.body, self._dicts, self._rd.name)
                except struct.error as e:
                    raise FeedError(f"{self._rd.name}: malformed dictionary batch: {e}") from None
            msg = self._read_message()
            if msg is None:
                raise FeedError(f"{self._rd.name}: Arrow stream ends after a dictionary batch")
        if msg.header_type != _HEADER_RECORD_BATCH:
            raise FeedError(f"{self._rd.name}: unexpected {msg.kind} message inside an Arrow stream")
        if (self._auto and self._pa is None and msg.header.table(3) is not None
                and not any(f.kind == "dict" for f in self.schema.fields) and pyarrow_available()):
            self._use_pyarrow()  # compressed: the built-in reader cannot
        if self._pa is not None:
            from ._columns import from_pyarrow_batch

            pa = self._pa
            if self._pa_replay is not None:
                self._pa_replay.add(msg.raw)
                try:
                    batch = self._pa_reader.read_next_batch()
                except (pa.ArrowException, StopIteration) as e:
                    raise FeedError(f"{self._rd.name}: pyarrow could not read a record batch: {e}") from None
            else:
                batch = pa.ipc.read_record_batch(pa.ipc.read_message(pa.py_buffer(msg.raw)), self._pa_schema)
            return batch if raw else from_pyarrow_batch(batch)
        try:
            return decode_record_batch(self.schema, msg.header, msg.body, self._rd.name, self._dicts)
        except struct.error as e:
            raise FeedError(f"{self._rd.name}: malformed record batch: {e}") from None


def pyarrow_available():
    """Report whether pyarrow and its IPC module can be imported."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        return False
    return True


class _Replay:
    """A read-only file object of the messages a StreamReader has framed, for pyarrow's stream reader.

    pyarrow reads each message exactly (prefix, metadata, body), so it never
    asks for bytes not added yet.
    """

    closed = False

    def __init__(self, first):
        self._chunks = [memoryview(first.tobytes())]
        self._pos = 0

    def add(self, raw):
        self._chunks.append(memoryview(raw.tobytes()))

    def readable(self):
        return True

    def read(self, n=-1):
        out = []
        while self._chunks and n != 0:
            c = self._chunks[0]
            take = len(c) - self._pos if n < 0 else min(n, len(c) - self._pos)
            out.append(c[self._pos:self._pos + take])
            self._pos += take
            if n > 0:
                n -= take
            if self._pos == len(c):
                self._chunks.pop(0)
                self._pos = 0
        return b"".join(out)

    def close(self):
        pass


class FileReader:
    """Reads record batches of an Arrow IPC file by their index in its footer.

    f is a seekable binary file object; name is used in error messages.
    """

    def __init__(self, f, name):
        self._f = f
        self.name = name
        f.seek(0, 2)
        size = f.tell()
        if size < 2 * 8 + 4:
            raise FeedError(f"{name}: {size} bytes is too short for an Arrow IPC file")
        f.seek(0)
        head = f.read(6)
        f.seek(size - 10)
        tail = f.read(10)
        if head != FILE_MAGIC or tail[4:] != FILE_MAGIC:
            raise FeedError(f"{name}: not an Arrow IPC file (no ARROW1 magic at both ends)")
        (footer_len,) = _I32.unpack(tail[:4])
        if not 0 < footer_len <= min(MAX_METADATA_BYTES, size - 18):
            raise FeedError(f"{name}: malformed Arrow IPC file: footer of {footer_len} bytes")
        f.seek(size - 10 - footer_len)
        footer = f.read(footer_len)
        try:
            ft = _Table.root(footer)
            st = ft.table(1)
            if st is None:
                raise FeedError(f"{name}: Arrow IPC file footer has no schema")
            self.schema = parse_schema(st)
            start, n = ft.vector(3, 24)
            self._blocks = [struct.unpack_from("<qi4xq", footer, start + 24 * i) for i in range(n)]
            _, dicts = ft.vector(2, 24)
        except struct.error as e:
            raise FeedError(f"{name}: malformed Arrow IPC file footer: {e}") from None
        self._size = size
        self._has_dictionaries = dicts > 0

    @property
    def num_batches(self):
        """Return the number of record batches in the file."""
        return len(self._blocks)

    def read_raw(self, i):
        """Return the i-th record batch's message as (header table, body, raw bytes)."""
        if not 0 <= i < len(self._blocks):
            raise FeedError(f"{self.name}: record batch {i} does not exist (the file has {len(self._blocks)})")
        offset, meta_len, body_len = self._blocks[i]
        if offset < 0 or meta_len < 8 or body_len < 0 or offset + meta_len + body_len > self._size:
            raise FeedError(f"{self.name}: record batch {i}: block runs past the end of the file")
        self._f.seek(offset)
        raw = np.empty(meta_len + body_len, dtype=np.uint8)
        got = self._f.readinto(memoryview(raw))
        if got != len(raw):
            raise FeedTruncatedError(f"{self.name}: record batch {i}: file ended early")
        prefix = raw[:8].tobytes()
        (first,) = _U32.unpack_from(prefix, 0)
        skip = 8 if first == CONTINUATION else 4
        (flat_len,) = _I32.unpack_from(prefix, skip - 4)
        if not 0 < flat_len <= meta_len - skip:
            raise FeedError(f"{self.name}: record batch {i}: malformed message prefix")
        meta = raw[skip:skip + flat_len].tobytes()
        try:
            header_type, header, declared = parse_message_metadata(meta)
        except struct.error as e:
            raise FeedError(f"{self.name}: record batch {i}: malformed metadata: {e}") from None
        if header_type != _HEADER_RECORD_BATCH:
            raise FeedError(f"{self.name}: block {i} holds a {_HEADER_NAMES.get(header_type)} message")
        if declared > body_len:
            raise FeedError(f"{self.name}: record batch {i}: body of {declared} bytes in a block of {body_len}")
        return header, raw[meta_len:], raw

    def read_batch(self, i):
        """Decode the i-th record batch into a dict of columns."""
        if self._has_dictionaries:
            raise UnsupportedTypeError(f"{self.name}: dictionary-encoded columns are not supported "
                                       "by the built-in Arrow reader; install pyarrow")
        header, body, _ = self.read_raw(i)
        where = f"{self.name} record batch {i}"
        try:
            return decode_record_batch(self.schema, header, body, where)
        except struct.error as e:
            raise FeedError(f"{where}: malformed record batch: {e}") from None
