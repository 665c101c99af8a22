"""Tests of the predict worker: output units from the split spec, and
scoring a stream whose batches straddle split boundaries into one file per
split. Needs pyarrow, onnx and onnxruntime (the test venv); skips without
them.
"""

import io
import json
import os
import tempfile
import unittest

import support  # noqa: F401  (puts the package on sys.path)

import numpy as np

from spindle import predict
from spindle._io import ExactReader

try:
    import onnx
    import onnxruntime  # noqa: F401
    import pyarrow as pa
    import pyarrow.parquet as pq
    from onnx import TensorProto, helper
except ImportError:
    onnx = None


def write_splits(path, splits):
    with open(path, "w") as f:
        json.dump({"version": 1, "splits": splits}, f)


class SplitUnitsTest(unittest.TestCase):
    def test_names_follow_the_split_alone(self):
        a = {"uri": "hdfs://nn/data/part-0.parquet", "format": "parquet", "row_groups": [0], "rows": 5}
        b = {"uri": "hdfs://nn/data/part-0.parquet", "format": "parquet", "row_groups": [1], "rows": 7}
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "s.json")
            write_splits(p, [a, b])
            first = predict.split_units(p)
            write_splits(p, [b])  # another rank, or a rerun dealt differently
            second = predict.split_units(p)
        self.assertEqual([rows for _, rows in first], [5, 7])
        self.assertEqual(second[0], first[1])
        self.assertNotEqual(first[0][0], first[1][0])
        self.assertTrue(first[0][0].startswith("part-0-") and first[0][0].endswith(".parquet"))

    def test_unknown_rows_make_one_unit(self):
        # Two endpoints of one flight, dealt whole to two ranks: told apart by their tickets.
        ends = [{"uri": "grpc://h:1/f", "format": "flight", "rows": 0, "ticket": t} for t in ("AAE=", "AAI=")]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "s.json")
            write_splits(p, ends)
            units = predict.split_units(p)
            write_splits(p, ends[:1])
            rank0 = predict.split_units(p)
            write_splits(p, ends[1:])
            rank1 = predict.split_units(p)
        self.assertEqual(len(units), 1)
        self.assertIsNone(units[0][1])
        self.assertNotEqual(rank0[0][0], rank1[0][0])


class FakeFeed:
    """Serves one Arrow IPC stream, as the executor's socket would."""

    def __init__(self, data):
        self.data = data

    def _connect(self):
        f = io.BufferedReader(io.BytesIO(self.data))
        return f, ExactReader(f, "fake feed")


@unittest.skipIf(onnx is None, "needs pyarrow, onnx and onnxruntime")
class RunTest(unittest.TestCase):
    def test_one_file_per_split_across_batches(self):
        w = np.array([[0.5], [-1.0]], dtype=np.float32)
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W"], ["score"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
            [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N", 1])],
            [helper.make_tensor("W", TensorProto.FLOAT, [2, 1], w.ravel().tolist())])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        rows = 15
        ids = np.arange(rows, dtype=np.int64)
        a, b = np.linspace(0, 1, rows), np.linspace(2, 3, rows).astype(np.float32)
        schema = pa.schema([("id", pa.int64()), ("a", pa.float64()), ("b", pa.float32())], metadata={"spindle.epoch": "0"})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as wr:
            for lo in range(0, rows, 4):  # batches of 4 straddle splits of 5, 7 and 3 rows
                wr.write_batch(pa.record_batch([ids[lo:lo + 4], a[lo:lo + 4], b[lo:lo + 4]], schema=schema))
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            os.mkdir(out)
            onnx.save(model, os.path.join(d, "model.onnx"))
            os.environ["SPINDLE_FILES_DIR"] = d
            try:
                spec = {"version": 1, "model": "model.onnx", "output": out, "threads": 1, "keep": ["id"],
                        "inputs": [{"name": "x", "columns": ["a", "b"], "dtype": "float32", "shape": "matrix"}],
                        "outputs": [{"name": "score", "column": "score"}]}
                units = [("s0.parquet", 5), ("s1.parquet", 7), ("s2.parquet", 3)]
                self.assertEqual(predict.run(spec, units, FakeFeed(sink.getvalue().to_pybytes())), rows)
            finally:
                del os.environ["SPINDLE_FILES_DIR"]
            self.assertEqual(sorted(os.listdir(out)), ["s0.parquet", "s1.parquet", "s2.parquet"])
            got = {}
            for name, lo, n in (("s0.parquet", 0, 5), ("s1.parquet", 5, 7), ("s2.parquet", 12, 3)):
                t = pq.read_table(os.path.join(out, name))
                self.assertEqual(t.column("id").to_pylist(), list(range(lo, lo + n)), name)
                got.update(zip(t.column("id").to_pylist(), t.column("score").to_pylist()))
            want = (np.column_stack([a, b]).astype(np.float32) @ w)[:, 0]
            np.testing.assert_allclose([got[i] for i in range(rows)], want, rtol=1e-6)

    def test_a_short_feed_publishes_nothing_partial(self):
        schema = pa.schema([("id", pa.int64())], metadata={"spindle.epoch": "0"})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schema) as wr:
            wr.write_batch(pa.record_batch([np.arange(3, dtype=np.int64)], schema=schema))
        graph = helper.make_graph([helper.make_node("Identity", ["id"], ["y"])], "g",
                                  [helper.make_tensor_value_info("id", TensorProto.INT64, ["N"])],
                                  [helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        with tempfile.TemporaryDirectory() as d:
            onnx.save(model, os.path.join(d, "model.onnx"))
            out = os.path.join(d, "out")
            os.mkdir(out)
            os.environ["SPINDLE_FILES_DIR"] = d
            try:
                spec = {"version": 1, "model": "model.onnx", "output": out, "keep": [],
                        "inputs": [{"name": "id", "columns": ["id"], "dtype": "int64", "shape": "vector"}],
                        "outputs": [{"name": "y", "column": "y"}]}
                with self.assertRaisesRegex(predict.PredictError, "ended after 3 rows"):
                    predict.run(spec, [("s0.parquet", 2), ("s1.parquet", 5)], FakeFeed(sink.getvalue().to_pybytes()))
            finally:
                del os.environ["SPINDLE_FILES_DIR"]
            self.assertEqual(os.listdir(out), ["s0.parquet"])  # s1 was cut short: neither it nor its temporary file


if __name__ == "__main__":
    unittest.main()
