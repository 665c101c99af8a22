"""Batch inference: the worker ``spindle predict`` runs in every executor.

Run as ``python -m spindle.predict SPEC``, where SPEC (a file among the
job's ``--files``) names the ONNX model, says which feed columns make each
model input, which columns to keep, and where to write. The worker reads
the rank's pushed Arrow feed (one epoch, in split order, unshuffled),
scores each batch with ONNX Runtime, and writes one Parquet file per split
of the input (``SPINDLE_FEED_SPLITS`` says how many rows each holds). A
file appears under its final name only once complete (temporary name, then
rename; ``hdfs://`` outputs through the executor's checkpoint service,
which does the same there), and its name depends on the split alone: a
split scored again after a restart replaces its own file, so the output
holds every row once.

Needs numpy, pyarrow and onnxruntime.
"""

import hashlib
import json
import os
import re
import sys

import numpy as np

from . import _arrow, _contract as C
from ._errors import SpindleError
from ._feed import Feed

SPEC_VERSION = 1


class PredictError(SpindleError, RuntimeError):
    """Batch inference cannot go on; the message says why."""


def load_spec(path):
    """Read the worker's spec (JSON) from path."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        raise PredictError(f"predict spec {path}: {e}") from None
    if spec.get("version", 0) > SPEC_VERSION:
        raise PredictError(f"predict spec {path}: version {spec.get('version')} is newer than this "
                           f"package reads ({SPEC_VERSION}): use the spindle binary's own Python package")
    return spec


def split_units(path):
    """Return the rank's output units from its split spec: (name, rows) in feed order.

    Each split is a unit named by a hash of what it holds. When a split's row
    count is unknown (Arrow Flight endpoints dealt whole), the rank's whole
    feed is one unit, named by all its splits: the same on a rerun.
    """
    try:
        with open(path, encoding="utf-8") as f:
            splits = json.load(f).get("splits") or []
    except (OSError, ValueError) as e:
        raise PredictError(f"split spec {path} ({C.FEED_SPLITS}): {e}") from None
    if splits and all(s.get("rows", 0) > 0 for s in splits):
        return [(part_name(s["uri"], _identity(s)), s["rows"]) for s in splits]
    ident = "|".join(_identity(s) for s in splits)
    return [(part_name(splits[0]["uri"] if splits else "empty", ident), None)]


def _identity(split):
    keys = ("uri", "ticket", "row_groups", "batches", "offset", "length", "row_offset", "rows")
    return json.dumps([split.get(k) for k in keys], separators=(",", ":"))


def part_name(uri, identity):
    """Return the output file name of a unit: the input file's stem and a hash of the unit."""
    stem = os.path.basename(uri.rstrip("/")).split(".")[0]
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem)[:40].lstrip("_-") or "part"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return f"{stem}-{digest}.parquet"


def _session(model, threads):
    try:
        import onnxruntime as ort
    except ImportError:
        raise PredictError(f"onnxruntime is not installed for {sys.executable}: pip install onnxruntime, or "
                           "name an interpreter that has it with --python") from None
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        raise PredictError(f"load model {model}: {e}") from None


def _column(batch, name, dtype):
    arr = batch.column(batch.schema.get_field_index(name))
    if dtype == "object":
        return np.asarray(arr.to_pylist(), dtype=object)
    if arr.null_count and np.dtype(dtype).kind in "iub":
        raise PredictError(f"column {name} has nulls, which the model's {dtype} input cannot take "
                           "(float inputs take them as NaN)")
    values = arr.to_numpy(zero_copy_only=False)
    return values.astype(dtype, copy=False)


def model_inputs(batch, inputs):
    """Return the ONNX Runtime feeds of one batch, built as the spec's bindings say."""
    feeds = {}
    for b in inputs:
        cols = [_column(batch, c, b["dtype"]) for c in b["columns"]]
        if b["shape"] == "matrix":
            m = np.empty((batch.num_rows, len(cols)), dtype=cols[0].dtype)
            for j, c in enumerate(cols):
                m[:, j] = c
            feeds[b["name"]] = m
        elif b["shape"] == "column":
            feeds[b["name"]] = cols[0].reshape(-1, 1)
        else:
            feeds[b["name"]] = cols[0]
    return feeds


def output_array(pa, name, value, rows):
    """Return one model output as an Arrow column: a value per row, or a fixed-size list per row."""
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] != rows:
        raise PredictError(f"model output {name} has shape {value.shape}; want one row per input row ({rows})")
    if value.ndim == 1:
        return pa.array(value)
    width = int(np.prod(value.shape[1:]))
    flat = np.ascontiguousarray(value).reshape(rows, width)
    if width == 1:
        return pa.array(flat[:, 0])
    return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), width)


class UnitWriter:
    """Writes one unit's Parquet file under a temporary name and publishes it whole."""

    def __init__(self, output, name):
        self.output = output
        self.name = name
        self.rows = 0
        self._writer = None
        local = output[len("file://"):] if output.startswith("file://") else output
        self.local = None if "://" in local else local
        where = self.local if self.local is not None else os.getcwd()
        self.tmp = os.path.join(where, f".{name}.tmp-{os.getpid()}")

    def write(self, table):
        import pyarrow.parquet as pq

        if self._writer is None:
            self._writer = pq.ParquetWriter(self.tmp, table.schema)
        self._writer.write_table(table)
        self.rows += table.num_rows

    def publish(self):
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        if self.local is None:
            from .checkpoint import save_file

            try:
                save_file(self.tmp, self.name, directory=self.output)
            finally:
                os.unlink(self.tmp)
            return
        with open(self.tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(self.tmp, os.path.join(self.local, self.name))
        fd = os.open(self.local, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def abort(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


def run(spec, units, feed=None):
    """Score the rank's feed and write its units. Returns the rows written."""
    import pyarrow as pa

    files = os.environ.get(C.FILES_DIR) or "."
    sess = _session(os.path.join(files, spec["model"]), spec.get("threads") or 0)
    out_names = [o["name"] for o in spec["outputs"]]
    out_cols = [o["column"] for o in spec["outputs"]]
    keep = spec["keep"]
    feed = feed or Feed()
    conn, rd = feed._connect()
    try:
        stream = _arrow.StreamReader(rd, use_pyarrow=True)
        total = 0
        k = 0
        writer = UnitWriter(spec["output"], units[0][0])
        try:
            while True:
                batch = stream.next_record_batch()
                if batch is None:
                    break
                off = 0
                while off < batch.num_rows:
                    if k >= len(units):
                        raise PredictError(f"the feed holds more rows than the rank's splits ({total})")
                    want = units[k][1]
                    take = batch.num_rows - off if want is None else min(want - writer.rows, batch.num_rows - off)
                    piece = batch.slice(off, take)
                    values = sess.run(out_names, model_inputs(piece, spec["inputs"]))
                    arrays = [piece.column(piece.schema.get_field_index(c)) for c in keep]
                    arrays += [output_array(pa, n, v, take) for n, v in zip(out_names, values)]
                    writer.write(pa.Table.from_arrays(arrays, names=keep + out_cols))
                    off += take
                    total += take
                    if want is not None and writer.rows == want:
                        writer.publish()
                        k += 1
                        if k < len(units):
                            writer = UnitWriter(spec["output"], units[k][0])
            if units[k:] and units[k][1] is None:
                writer.publish()
                k += 1
            if k != len(units):
                raise PredictError(f"the feed ended after {total} rows, inside output file {units[k][0]} "
                                   f"({writer.rows} of its {units[k][1]} rows)")
        except BaseException:
            writer.abort()
            raise
        return total
    finally:
        conn.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m spindle.predict SPEC (spindle predict runs it)", file=sys.stderr)
        return 2
    path = argv[0]
    if not os.path.isabs(path) and os.environ.get(C.FILES_DIR):
        path = os.path.join(os.environ[C.FILES_DIR], path)
    try:
        splits = os.environ.get(C.FEED_SPLITS)
        if not splits:
            raise PredictError(f"{C.FEED_SPLITS} is not set: run this under spindle predict")
        rows = run(load_spec(path), split_units(splits))
    except SpindleError as e:
        print(f"spindle predict: {e}", file=sys.stderr)
        return 1
    print(f"spindle predict: rank {os.environ.get(C.RANK, '?')} wrote {rows} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
