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


def _masked_from_buffers(pa, arr):
    """Return an integer or boolean pyarrow Array with nulls as a masked array, its nulls 0 (False).

    Read from the array's buffers with numpy: pyarrow's own way (fill_null,
    is_null) loads pyarrow.compute, which costs a tenth of a second or more.
    """
    n, off = len(arr), arr.offset
    validity, data = arr.buffers()[:2]
    mask = ~_bits(validity, off, n)
    if pa.types.is_boolean(arr.type):
        values = _bits(data, off, n)
    else:
        values = np.frombuffer(data, dtype=arr.type.to_pandas_dtype(), count=off + n)[off:].copy()
    values[mask] = 0
    return np.ma.MaskedArray(values, mask=mask)


def from_pyarrow_array(arr):
    """Convert a pyarrow Array the way the built-in reader decodes columns.

    Floats hold NaN for nulls, dates and times NaT, strings None, and
    integer and boolean columns with nulls become masked arrays. No
    conversion loads pyarrow.compute but decoding a dictionary column.
    """
    import pyarrow as pa

    if hasattr(arr, "combine_chunks"):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if arr.null_count and (pa.types.is_integer(t) or pa.types.is_boolean(t)):
        return _masked_from_buffers(pa, arr)
    return arr.to_numpy(zero_copy_only=False)


def from_pyarrow_batch(batch):
    """Convert a pyarrow RecordBatch into a dict of numpy columns."""
    return {batch.schema.field(i).name: from_pyarrow_array(batch.column(i)) for i in range(batch.num_columns)}
