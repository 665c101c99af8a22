"""Column conversions shared by the feed modes."""

import sys

import numpy as np

from ._errors import FeedError


def is_masked(arr):
    """Say whether arr is a numpy masked array.

    numpy loads numpy.ma on first use, which takes tens of milliseconds; an
    array cannot be masked before it is loaded, so asking does not load it.
    """
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(arr, ma.MaskedArray)


def _kind_name(arr):
    k = arr.dtype.kind
    return {"O": "strings or other objects", "U": "strings", "S": "bytes", "M": "dates or timestamps",
            "m": "durations"}.get(k, str(arr.dtype))


def to_float32(name, arr):
    """Return column arr as float32, with nulls (masked entries) as NaN."""
    if arr.dtype.kind not in "biuf":
        raise FeedError(f"column {name!r} holds {_kind_name(arr)}; tensors() needs integer, float or "
                        "boolean columns (leave it out with --columns, or read it with batches())")
    if is_masked(arr):
        return np.ma.filled(arr.astype(np.float32), np.nan)
    return arr.astype(np.float32, copy=False)


def labels_of(name, arr):
    """Return a label column as a plain array: its own dtype, or float32 with NaN when it has nulls."""
    if is_masked(arr):
        if arr.mask is np.ma.nomask or not arr.mask.any():
            return arr.data
        return to_float32(name, arr)
    return arr


def assemble(columns, label, dtype=np.float32):
    """Turn a dict of columns into (features, labels).

    features is a (rows, F) matrix of dtype holding every column but the
    label, in order; labels is the label column, or None when label is None.
    """
    names = [n for n in columns if n != label]
    if not names:
        raise FeedError(f"no feature columns besides the label {label!r}")
    rows = len(columns[names[0]])
    x = np.empty((rows, len(names)), dtype=dtype)
    for j, n in enumerate(names):
        x[:, j] = to_float32(n, columns[n])
    y = labels_of(label, columns[label]) if label is not None else None
    return x, y


def _as_text(part):
    if part.dtype.kind == "O":
        return part
    out = np.empty(len(part), dtype=object)
    mask = np.ma.getmaskarray(part)
    for i, v in enumerate(np.ma.getdata(part).tolist()):
        out[i] = None if mask[i] else str(v)
    return out


def concat(parts):
    """Concatenate 1-D column pieces, keeping masks.

    Pieces typed apart (CSV splits infer their own types) meet in the
    widest type numpy finds; numbers beside text become text.
    """
    if len(parts) == 1:
        return parts[0]
    kinds = {p.dtype.kind for p in parts}
    if "O" in kinds and len(kinds) > 1:
        parts = [_as_text(p) for p in parts]
    if any(isinstance(p, np.ma.MaskedArray) for p in parts):
        return np.ma.concatenate(parts)
    return np.concatenate(parts)


def _bits(buf, offset, n):
    """Return bits offset..offset+n of an Arrow bitmap buffer as a bool array."""
    return np.unpackbits(np.frombuffer(buf, dtype=np.uint8), count=offset + n, bitorder="little")[offset:].astype(bool)


def strings_from_offsets(offsets, data, valid, utf8, where, name):
    """Return the values between consecutive offsets into data as an object array.

    valid (a bool array, or None when nothing is null) marks the rows that
    are not null; utf8 says to decode the values to str, else they stay
    bytes. A value that is not UTF-8 raises FeedError naming the row.
    """
    n = len(offsets) - 1
    out = np.empty(n, dtype=object)
    starts, ends = offsets[:-1].tolist(), offsets[1:].tolist()
    for i in range(n):
        if valid is not None and not valid[i]:
            out[i] = None
            continue
        v = data[starts[i]:ends[i]]
        if utf8:
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError:
                raise FeedError(f"{where}: column {name!r} row {i} is not valid UTF-8") from None
        out[i] = v
    return out


def _fixed_dtypes(pa, t):
    """Return (storage, dtype) of a fixed-width pyarrow type the built-in reader decodes, or None."""
    if pa.types.is_integer(t):
        return (np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}"),) * 2
    if pa.types.is_floating(t):
        return (np.dtype(f"f{t.bit_width // 8}"),) * 2
    if pa.types.is_date32(t):
        return np.dtype("i4"), np.dtype("M8[D]")
    if pa.types.is_date64(t):
        return (np.dtype("M8[ms]"),) * 2
    if pa.types.is_timestamp(t):
        return (np.dtype(f"M8[{t.unit}]"),) * 2
    if pa.types.is_duration(t):
        return (np.dtype(f"m8[{t.unit}]"),) * 2
    return None


def _from_buffers(pa, arr, name):
    """Convert a flat pyarrow Array by reading its buffers with numpy, or return None for other types.

    pyarrow's own conversions (to_numpy, fill_null, is_null) load pandas
    when it is installed, and pandas loads pyarrow.compute: together
    several tenths of a second on the first batch of every epoch.
    """
    t, n, off = arr.type, len(arr), arr.offset
    bufs = arr.buffers()
    valid = _bits(bufs[0], off, n) if arr.null_count and bufs[0] is not None else None
    if arr.null_count and valid is None:
        valid = np.zeros(n, dtype=bool)
    if pa.types.is_boolean(t):
        values = _bits(bufs[1], off, n)
    elif pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
            or pa.types.is_large_binary(t):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        if n == 0:
            return np.empty(0, dtype=object)
        offsets = np.frombuffer(bufs[1], dtype="i8" if large else "i4", count=off + n + 1)[off:]
        data = memoryview(bufs[2]) if bufs[2] is not None else memoryview(b"")
        utf8 = pa.types.is_string(t) or pa.types.is_large_string(t)
        return strings_from_offsets(offsets, data.tobytes(), valid, utf8, "a pyarrow batch", name)
    else:
        dtypes = _fixed_dtypes(pa, t)
        if dtypes is None:
            return None
        storage, dtype = dtypes
        values = np.frombuffer(bufs[1], dtype=storage, count=off + n)[off:] if n else np.empty(0, storage)
        if storage != dtype:
            values = values.astype(dtype)
    if valid is None:
        return values
    if values.dtype.kind in "fMm":
        values = values.copy()
        values[~valid] = np.nan if values.dtype.kind == "f" else values.dtype.type("NaT")
        return values
    values = values.copy()
    values[~valid] = 0
    return np.ma.MaskedArray(values, mask=~valid)


def from_pyarrow_array(arr, name="?"):
    """Convert a pyarrow Array the way the built-in reader decodes columns.

    Floats hold NaN for nulls, dates and times NaT, strings None, and
    integer and boolean columns with nulls become masked arrays. Flat
    columns are read from their buffers, so no conversion loads
    pyarrow.compute or pandas but those of dictionary and nested columns.
    """
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    out = _from_buffers(pa, arr, name)
    return out if out is not None else arr.to_numpy(zero_copy_only=False)


def from_pyarrow_batch(batch):
    """Convert a pyarrow RecordBatch into a dict of numpy columns."""
    names = batch.schema.names
    return {names[i]: from_pyarrow_array(batch.column(i), names[i]) for i in range(batch.num_columns)}
