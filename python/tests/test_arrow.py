"""Tests of the pure-numpy Arrow IPC reader against streams and files written by arrow-go.

The fixtures in testdata were written by testdata/gen (arrow-go) together
with JSON listings of their values, so these tests compare the reader with
an independent implementation of the format.
"""

import io
import os
import random
import unittest

import support

import numpy as np

from spindle import FeedError, FeedTruncatedError, UnsupportedTypeError, _arrow
from spindle._feed import pyarrow_available
from spindle._io import ExactReader


def stream(data, name="fixture", use_pyarrow=False):
    return _arrow.StreamReader(ExactReader(io.BufferedReader(io.BytesIO(data)), name), use_pyarrow=use_pyarrow)


def read_all(data, use_pyarrow=False):
    s = stream(data, use_pyarrow=use_pyarrow)
    out = []
    while True:
        b = s.next()
        if b is None:
            return s, out
        out.append(b)


class AssertColumns:
    """Compares decoded columns with the generator's JSON listing."""

    def assert_column(self, name, got, want, type_name):
        self.assertEqual(len(got), len(want), name)
        for i, w in enumerate(want):
            where = f"column {name} row {i}"
            if w is None:
                if isinstance(got, np.ma.MaskedArray):
                    self.assertTrue(got.mask[i], where)
                elif got.dtype.kind == "f":
                    self.assertTrue(np.isnan(got[i]), where)
                elif got.dtype.kind in "Mm":
                    self.assertTrue(np.isnat(got[i]), where)
                else:
                    self.assertIsNone(got[i], where)
                continue
            if isinstance(got, np.ma.MaskedArray):
                self.assertFalse(got.mask is not np.ma.nomask and got.mask[i], where)
                v = got.data[i]
            else:
                v = got[i]
            if type_name == "binary":
                self.assertEqual(v.hex(), w, where)
            elif got.dtype.kind in "Mm":
                self.assertEqual(int(v.astype(np.int64)), w, where)
            elif got.dtype.kind == "f":
                self.assertEqual(v, got.dtype.type(w), where)
            else:
                self.assertEqual(v, w, where)

    def assert_batch(self, got, want, fields):
        self.assertEqual(list(got), [f["name"] for f in fields])
        for f in fields:
            self.assert_column(f["name"], got[f["name"]], want["columns"][f["name"]], f["type"])


class StreamTest(unittest.TestCase, AssertColumns):
    def check_fixture(self, name, use_pyarrow=False):
        exp = support.expected(name)
        s, batches = read_all(support.fixture(name), use_pyarrow)
        self.assertEqual(s.schema.metadata.get("spindle.epoch"), exp["epoch"])
        self.assertEqual(s.schema.names, [f["name"] for f in exp["fields"]])
        self.assertEqual(len(batches), len(exp["batches"]))
        for i, (got, want) in enumerate(zip(batches, exp["batches"])):
            with self.subTest(batch=i):
                self.assert_batch(got, want, exp["fields"])
        return s, batches

    def test_fixtures(self):
        for name in ("primitives.arrows", "epoch1.arrows", "end.arrows", "variable.arrows", "dictionary.arrows"):
            with self.subTest(name):
                self.check_fixture(name)

    def test_dictionaries(self):
        """Dictionary-encoded columns decode to their values, across replaced dictionaries."""
        data = support.fixture("dictionary.arrows")
        rd = ExactReader(io.BufferedReader(io.BytesIO(data)), "dictionary.arrows")
        kinds = []
        while (msg := _arrow.read_stream_message(rd)) is not None:
            kinds.append(msg.kind)
        # Each batch's dictionary differs from the last: three replacements.
        self.assertEqual(kinds.count("DictionaryBatch"), 3, kinds)
        s, batches = read_all(data)
        self.assertEqual([f.type_name for f in s.schema.fields], ["dictionary<utf8>", "int32"])
        self.assertEqual(batches[1]["cat"].dtype, np.dtype(object))
        self.assertEqual(list(batches[1]["cat"]), ["blue", "héllo", "blue"])
        self.assertIsNone(batches[0]["cat"][2])

    def test_dictionary_errors(self):
        data = support.fixture("dictionary.arrows")
        rd = ExactReader(io.BufferedReader(io.BytesIO(data)), "dictionary.arrows")
        msgs = []
        while (msg := _arrow.read_stream_message(rd)) is not None:
            msgs.append(msg.raw.tobytes())
        eos = b"\xff\xff\xff\xff\x00\x00\x00\x00"
        cases = [
            # A record batch before its dictionary.
            ("no dictionary", msgs[0] + msgs[2] + eos, "has not sent"),
            # A dictionary batch as the stream's last message.
            ("dictionary at the end", msgs[0] + msgs[1] + eos, "ends after a dictionary batch"),
        ]
        for name, stream_bytes, want in cases:
            with self.subTest(name):
                with self.assertRaises(FeedError) as cm:
                    read_all(stream_bytes)
                self.assertIn(want, str(cm.exception))

    def test_types(self):
        s, batches = self.check_fixture("primitives.arrows")
        exp = support.expected("primitives.arrows")
        self.assertEqual([f.type_name for f in s.schema.fields], [f["type"] for f in exp["fields"]])
        b = batches[0]
        want = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
                "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16, "f32": np.float32,
                "f64": np.float64, "b": np.bool_, "label": np.int64}
        self.assertEqual({k: v.dtype.type for k, v in b.items()}, want)
        # Nulls: NaN in floats, masks in integers and booleans, nothing masked without nulls.
        self.assertIsInstance(b["i32"], np.ma.MaskedArray)
        self.assertIsInstance(b["b"], np.ma.MaskedArray)
        self.assertNotIsInstance(b["f32"], np.ma.MaskedArray)
        self.assertNotIsInstance(b["i64"], np.ma.MaskedArray)
        # The second batch was sliced out of a longer one before writing.
        self.assertEqual(len(batches[1]["i8"]), 4)
        self.assertEqual(len(batches[2]["i8"]), 0)

        s, _ = read_all(support.fixture("variable.arrows"))
        self.assertEqual([f.type_name for f in s.schema.fields],
                         ["utf8", "large_utf8", "binary", "date32", "date64", "timestamp[ms]", "timestamp[ns]",
                          "duration[us]", "null"])

    def test_end_stream(self):
        s, batches = read_all(support.fixture("end.arrows"))
        self.assertEqual(s.schema.metadata, {"spindle.epoch": "-1"})
        self.assertEqual(batches, [])
        self.assertIsNone(s.next())

    def test_unsupported(self):
        cases = [
            ("lz4.arrows", "compressed"),
            ("nested.arrows", "column 'xs' has type list"),
        ]
        for name, want in cases:
            with self.subTest(name):
                with self.assertRaises(UnsupportedTypeError) as cm:
                    read_all(support.fixture(name))
                self.assertIn(want, str(cm.exception))

    def test_tensor_stream_is_named(self):
        with self.assertRaises(FeedError) as cm:
            stream(support.tensor_stream(0, ["a"]))
        self.assertIn("tensor format", str(cm.exception))

    def test_truncated(self):
        data = support.fixture("primitives.arrows")
        eos = b"\xff\xff\xff\xff\x00\x00\x00\x00"
        self.assertTrue(data.endswith(eos))
        cases = [
            ("empty", b"", FeedError),
            ("no end-of-stream marker", data[:-8], FeedTruncatedError),
            ("abort marker", data[:-8] + b"\xff\xff\xff\xff", FeedTruncatedError),
            ("half a marker", data[:-6], FeedTruncatedError),
        ]
        # Every cut inside the stream is an error too, never a short epoch.
        for cut in range(9, len(data) - 8, 37):
            cases.append((f"cut at {cut}", data[:cut], FeedError))
        for name, cut, exc in cases:
            with self.subTest(name):
                with self.assertRaises(exc):
                    read_all(cut)

    def test_corrupt_bytes_fail_cleanly(self):
        """Random byte flips give a FeedError or a decoded stream, never another exception."""
        data = support.fixture("primitives.arrows")
        rnd = random.Random(1)
        for trial in range(300):
            b = bytearray(data)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            try:
                read_all(bytes(b))
            except FeedError:
                pass
            except MemoryError:
                self.fail(f"trial {trial}: corrupt length allocated too much")

    @unittest.skipUnless(pyarrow_available(), "pyarrow is not installed")
    def test_pyarrow_decodes_the_same(self):
        for name in ("primitives.arrows", "epoch1.arrows", "end.arrows", "variable.arrows", "lz4.arrows",
                     "dictionary.arrows"):
            with self.subTest(name):
                exp = support.expected(name)
                _, batches = read_all(support.fixture(name), use_pyarrow=True)
                for got, want in zip(batches, exp["batches"]):
                    self.assert_batch(got, want, exp["fields"])


class FileTest(unittest.TestCase, AssertColumns):
    def test_batches_by_index(self):
        exp = support.expected("primitives.arrow")
        with open(os.path.join(support.TESTDATA, "primitives.arrow"), "rb") as f:
            r = _arrow.FileReader(f, "primitives.arrow")
            self.assertEqual(r.num_batches, 3)
            self.assertEqual(r.schema.names, [x["name"] for x in exp["fields"]])
            for i in (2, 0, 1):
                with self.subTest(batch=i):
                    self.assert_batch(r.read_batch(i), exp["batches"][i], exp["fields"])
            with self.assertRaises(FeedError) as cm:
                r.read_batch(3)
            self.assertIn("record batch 3 does not exist (the file has 3)", str(cm.exception))

    def test_not_a_file(self):
        cases = [
            ("stream", support.fixture("primitives.arrows"), "not an Arrow IPC file"),
            ("short", b"ARROW1", "too short"),
            ("cut", support.fixture("primitives.arrow")[:-30], "not an Arrow IPC file"),
        ]
        for name, data, want in cases:
            with self.subTest(name):
                with self.assertRaises(FeedError) as cm:
                    _arrow.FileReader(io.BytesIO(data), "x.arrow")
                self.assertIn(want, str(cm.exception))
                self.assertIn("x.arrow", str(cm.exception))


@unittest.skipUnless(pyarrow_available(), "pyarrow is not installed")
class PyarrowColumnsTest(unittest.TestCase):
    """Columns decoded by pyarrow, converted without loading pyarrow.compute."""

    def test_nulls_in_integers_and_booleans(self):
        import pyarrow as pa

        from spindle._columns import from_pyarrow_array

        values = {
            pa.int8(): [1, None, -3, 4, None, 6, 7, 8, 9, None, 11],
            pa.uint16(): [None, 2, 3, None, 5, 6, 7, 8, 9, 10, 11],
            pa.int64(): [2**40, None, 3, 4, 5, 6, 7, 8, 9, 10, -(2**40)],
            pa.bool_(): [True, None, False, True, True, None, False, True, False, True, None],
        }
        for typ, vals in values.items():
            for off in (0, 1, 3, 9):  # sliced arrays start inside their buffers' bytes
                with self.subTest(type=str(typ), offset=off):
                    arr = pa.array(vals, type=typ).slice(off)
                    got = from_pyarrow_array(arr)
                    want = vals[off:]
                    self.assertEqual(isinstance(got, np.ma.MaskedArray), None in want)
                    self.assertEqual(got.dtype, np.dtype(typ.to_pandas_dtype()))
                    self.assertEqual(np.ma.getmaskarray(got).tolist(), [v is None for v in want])
                    self.assertEqual(np.ma.getdata(got).tolist(), [0 if v is None else v for v in want])

    def test_reading_loads_no_pyarrow_compute(self):
        # A fresh interpreter: pyarrow.compute takes a tenth of a second or
        # more to load, which the first batch of every epoch paid; pandas,
        # which pyarrow's own conversions load when it is installed, more.
        import subprocess
        import sys
        import tempfile

        import pyarrow as pa
        import pyarrow.ipc

        t = pa.table({"f": pa.array([1.5, None, 2.5], pa.float32()), "i": pa.array([1, None, 3], pa.int32()),
                      "b": pa.array([True, None, False]), "s": pa.array(["a", None, "c"])})
        with tempfile.NamedTemporaryFile(suffix=".arrows") as f:
            with pa.ipc.new_stream(f.name, t.schema) as w:
                w.write_table(t)
            code = (
                "import io, sys\n"
                "from spindle import _arrow\n"
                "from spindle._io import ExactReader\n"
                "s = _arrow.StreamReader(ExactReader(open(sys.argv[1], 'rb'), 'f'), use_pyarrow=True)\n"
                "b = s.next()\n"
                "assert b['i'].mask.tolist() == [False, True, False], b\n"
                "print('pyarrow.compute' in sys.modules, 'pandas' in sys.modules)\n")
            out = subprocess.run([sys.executable, "-c", code, f.name], capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=support.PYTHON_DIR), check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "False False",
                         "reading a batch through pyarrow loaded pyarrow.compute or pandas (printed: loaded them?)")


@unittest.skipUnless(pyarrow_available(), "pyarrow is not installed")
class AutoDecoderTest(unittest.TestCase, AssertColumns):
    """use_pyarrow=None: the built-in reader, pyarrow only where it is needed."""

    def test_compressed_batches_go_to_pyarrow(self):
        exp = support.expected("lz4.arrows")
        _, batches = read_all(support.fixture("lz4.arrows"), use_pyarrow=None)
        self.assertEqual(len(batches), len(exp["batches"]))
        for got, want in zip(batches, exp["batches"]):
            self.assert_batch(got, want, exp["fields"])

    def test_nested_columns_go_to_pyarrow(self):
        s, batches = read_all(support.fixture("nested.arrows"), use_pyarrow=None)
        self.assertIsNotNone(s._pa)
        self.assertTrue(batches)

    def test_plain_streams_stay_builtin(self):
        for name in ("primitives.arrows", "variable.arrows", "dictionary.arrows"):
            with self.subTest(name):
                exp = support.expected(name)
                s, batches = read_all(support.fixture(name), use_pyarrow=None)
                self.assertIsNone(s._pa)
                for got, want in zip(batches, exp["batches"]):
                    self.assert_batch(got, want, exp["fields"])

    def test_default_feed_does_not_import_pyarrow(self):
        # A fresh interpreter: importing pyarrow costs more than the
        # built-in reader takes for the stream's first million rows.
        import subprocess
        import sys

        d = support.short_tempdir(self)
        srv = support.FeedServer(os.path.join(d, "feed.sock"), [support.fixture("primitives.arrows")])
        self.addCleanup(srv.close)
        code = ("import sys\n"
                "import spindle\n"
                "ep = spindle.Feed(sys.argv[1], mode='arrow').batches()\n"
                "n = sum(1 for _ in ep)\n"
                "assert n > 0, n\n"
                "print('pyarrow' in sys.modules)\n")
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
        env.pop("SPINDLE_PYARROW", None)
        out = subprocess.run([sys.executable, "-c", code, srv.path], capture_output=True, text=True, env=env,
                             check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "False", "the default feed imported pyarrow for a plain stream")


if __name__ == "__main__":
    unittest.main()
