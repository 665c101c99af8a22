"""Tests of direct mode: reading this rank's splits from the JSON description."""

import json
import os
import shutil
import unittest

import support

import numpy as np

from spindle import Feed, FeedError
from spindle._feed import pyarrow_available

HEADER = "id,x,flag,name,label\n"


def csv_rows(n):
    rows = []
    for i in range(n):
        x = "" if i % 7 == 3 else f"{i * 0.5}"
        rows.append(f"{i},{x},{'true' if i % 2 else 'false'},n{i},{i % 2}\n")
    return rows


class DirectTest(unittest.TestCase):
    def setUp(self):
        self.dir = support.short_tempdir(self)
        self.csv = os.path.join(self.dir, "data.csv")
        self.rows = csv_rows(23)
        with open(self.csv, "w") as f:
            f.write(HEADER + "".join(self.rows))

    def spec(self, splits, **kw):
        doc = {"version": 1, "rank": 0, "world_size": 1, "epochs": 2, "batch_rows": 4, "columns": [],
               "label_column": "label", "shuffle": False, "seed": 0, "splits": splits}
        doc.update(kw)
        path = os.path.join(self.dir, "feed.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def csv_splits(self, cuts):
        """Split the CSV at byte offsets cuts (anywhere, even mid-line)."""
        size = os.path.getsize(self.csv)
        bounds = [0] + list(cuts) + [size]
        return [{"uri": "file://" + self.csv, "format": "csv", "offset": a, "length": b - a}
                for a, b in zip(bounds, bounds[1:])]

    def test_csv_splits_cover_every_row_once(self):
        size = os.path.getsize(self.csv)
        line_start = len(HEADER) + len(self.rows[0])  # a cut exactly at a line start
        for cuts in ([], [10], [line_start], [line_start - 1, line_start + 1], list(range(5, size, 17))):
            with self.subTest(cuts=cuts):
                feed = Feed(self.spec(self.csv_splits(cuts)), use_pyarrow=False)
                ids = [i for b in feed.batches() for i in b["id"].tolist()]
                self.assertEqual(ids, list(range(23)))

    def test_row_offset_shares_one_unit(self):
        # Three ranks sharing the one CSV range, as the planner cuts a large
        # row group: each skips row_offset rows and reads rows rows.
        size = os.path.getsize(self.csv)
        seen = []
        for offset, rows in ((0, 8), (8, 8), (16, 7)):
            split = {"uri": "file://" + self.csv, "format": "csv", "offset": 0, "length": size,
                     "row_offset": offset, "rows": rows}
            feed = Feed(self.spec([split]), use_pyarrow=False)
            seen.append([i for b in feed.batches() for i in b["id"].tolist()])
        self.assertEqual(seen, [list(range(0, 8)), list(range(8, 16)), list(range(16, 23))])

    def test_batches_types_and_epochs(self):
        feed = Feed(self.spec(self.csv_splits([40, 90])), use_pyarrow=False)
        self.assertEqual(feed.columns(), ["id", "x", "flag", "name", "label"])
        for k in range(2):
            ep = feed.batches()
            self.assertEqual(ep.epoch, k)
            batches = list(ep)
            self.assertEqual([len(b["id"]) for b in batches], [4, 4, 4, 4, 4, 3])
            b = batches[0]
            self.assertEqual(list(b), ["id", "x", "flag", "name", "label"])
            self.assertEqual(b["id"].dtype, np.int64)
            self.assertEqual(b["x"].dtype, np.float64)
            self.assertEqual(b["flag"].tolist(), ["false", "true", "false", "true"])
            self.assertEqual(b["name"].tolist(), ["n0", "n1", "n2", "n3"])
            self.assertTrue(np.isnan(b["x"][3]))
            self.assertEqual(b["x"][2], 1.0)
        ep = feed.batches()
        self.assertTrue(ep.end_of_feed)
        self.assertEqual(list(ep), [])

    def test_tensors_and_column_selection(self):
        path = self.spec(self.csv_splits([50]), columns=["label", "x", "id"], batch_rows=10, epochs=1)
        feed = Feed(path, use_pyarrow=False)
        ep = feed.tensors()
        self.assertEqual((ep.columns, ep.label_column), (["x", "id", "label"], "label"))
        x, y = next(ep)
        self.assertEqual(x.shape, (10, 2))
        np.testing.assert_array_equal(x[:, 1], np.arange(10))
        self.assertEqual(y.tolist(), [i % 2 for i in range(10)])

    def test_shuffle_is_seeded(self):
        def ids(seed):
            feed = Feed(self.spec(self.csv_splits([30, 60, 120]), shuffle=True, seed=seed, shuffle_buffer_rows=8),
                        use_pyarrow=False)
            return [[i for b in ep for i in b["id"].tolist()] for ep in feed.epochs()]

        a, b, c = ids(5), ids(5), ids(6)
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)
        self.assertNotEqual(a[0], a[1])  # each epoch has its own order
        for order in a + c:
            self.assertEqual(sorted(order), list(range(23)))

    def test_even_batches(self):
        # 23 rows in batches of 4: 5 full batches and 3 rows left over. The
        # executor works out the rows per epoch (Go's feed.EpochRowLimit).
        cases = [
            ("pad", 28, [4] * 7, list(range(23)) + list(range(5))),
            ("pad", 24, [4] * 6, list(range(23)) + [0]),
            ("drop", 20, [4] * 5, list(range(20))),
            ("drop", 8, [4] * 2, list(range(8))),
            ("off", 0, [4, 4, 4, 4, 4, 3], list(range(23))),
        ]
        for mode, limit, sizes, ids in cases:
            with self.subTest(mode=mode, limit=limit):
                path = self.spec(self.csv_splits([33]), even_batches=mode, epoch_row_limit=limit)
                for ep in Feed(path, use_pyarrow=False).epochs():
                    batches = list(ep)
                    self.assertEqual([len(b["id"]) for b in batches], sizes)
                    self.assertEqual([i for b in batches for i in b["id"].tolist()], ids)

    def test_compressed_and_tab_separated_csv(self):
        import bz2
        import gzip
        import zlib

        text = (HEADER + "".join(self.rows)).encode()
        tsv = text.replace(b",", b"\t")
        cases = [("data.csv.gz", gzip.compress(text)), ("data.csv.bz2", bz2.compress(text)),
                 ("data.csv.deflate", zlib.compress(text)), ("data.tsv", tsv), ("data.tsv.gz", gzip.compress(tsv))]
        for name, data in cases:
            with self.subTest(name):
                path = os.path.join(self.dir, name)
                with open(path, "wb") as f:
                    f.write(data)
                split = {"uri": "file://" + path, "format": "csv", "offset": len(HEADER), "length": len(text) - len(HEADER)}
                batches = list(Feed(self.spec([split]), use_pyarrow=False).batches())
                self.assertEqual([i for b in batches for i in b["id"].tolist()], list(range(23)))

    def test_unreadable_compression_named(self):
        path = os.path.join(self.dir, "data.csv.snappy")
        with open(path, "wb") as f:
            f.write(b"\x00\x00\x00\x10xxxx")
        split = {"uri": "file://" + path, "format": "csv", "offset": 0, "length": 8}
        with self.assertRaises(FeedError) as cm:
            list(Feed(self.spec([split]), use_pyarrow=False).batches())
        self.assertIn("SnappyCodec", str(cm.exception))

    def test_pad_equalises_batch_counts_only(self):
        # 23 rows; the largest rank has 26 (7 batches of 4, the last of 2):
        # this rank is padded to 26 rows, not to 7 full batches.
        for epoch_rows, sizes in ((26, [4] * 6 + [2]), (23, [4] * 5 + [3])):
            with self.subTest(epoch_rows=epoch_rows):
                target = -(-epoch_rows // 4)
                path = self.spec(self.csv_splits([33]), even_batches="pad", target_batches=target, epoch_rows=epoch_rows,
                                 epoch_row_limit=epoch_rows)
                batches = list(Feed(path, use_pyarrow=False).batches())
                self.assertEqual([len(b["id"]) for b in batches], sizes)
                self.assertEqual([i for b in batches for i in b["id"].tolist()], (list(range(23)) * 2)[:epoch_rows])

    def test_even_batches_impossible(self):
        empty = os.path.join(self.dir, "empty.csv")
        with open(empty, "w") as f:
            f.write(HEADER)
        header_only = [{"uri": "file://" + empty, "format": "csv", "offset": 0, "length": len(HEADER)}]
        for mode, splits in (("pad", header_only), ("pad", [])):
            with self.subTest(mode=mode, splits=len(splits)):
                path = self.spec(splits, columns=["id"], even_batches=mode, target_batches=6, epoch_row_limit=24)
                with self.assertRaises(FeedError) as cm:
                    list(Feed(path, use_pyarrow=False).batches())
                self.assertIn("has no rows to fill its 24 rows per epoch", str(cm.exception))

    def test_csv_quoted_line_breaks_and_no_header(self):
        text = 'a,b\n1,"two\nlines"\n2,"x"\n3,"three\n""quoted""\nlines"\n4,y\n'
        with open(self.csv, "w") as f:
            f.write(text)
        cut = text.index("3,")  # the third record starts the second split
        feed = Feed(self.spec(self.csv_splits([cut]), label_column=""), use_pyarrow=False)
        b = next(feed.batches())
        self.assertEqual(b["a"].tolist(), [1, 2, 3, 4])
        self.assertEqual(b["b"].tolist(), ["two\nlines", "x", 'three\n"quoted"\nlines', "y"])

        path = self.spec(self.csv_splits([cut]), label_column="", batch_rows=10,
                         csv={"delimiter": ",", "header": False})
        b = next(Feed(path, use_pyarrow=False).batches())
        self.assertEqual(list(b), ["_c0", "_c1"])
        self.assertEqual(b["_c0"].tolist(), ["a", "1", "2", "3", "4"])

    def test_arrow_file_batches(self):
        data = os.path.join(self.dir, "part-0.arrow")
        shutil.copy(os.path.join(support.TESTDATA, "primitives.arrow"), data)
        exp = support.expected("primitives.arrow")["batches"]
        split = {"uri": "file://" + data, "format": "arrow", "batches": [2, 0], "rows": 5}
        feed = Feed(self.spec([split], batch_rows=100, label_column="label"), use_pyarrow=False)
        (b,) = list(feed.batches())
        self.assertEqual(b["i64"].tolist(), exp[2]["columns"]["i64"] + exp[0]["columns"]["i64"])
        self.assertEqual(list(b)[-1], "label")

    def test_missing_column(self):
        path = self.spec(self.csv_splits([]), columns=["id", "nope"])
        with self.assertRaises(FeedError) as cm:
            list(Feed(path, use_pyarrow=False).batches())
        self.assertIn("split 0 (file://", str(cm.exception))
        self.assertIn("no column 'nope' (the file has id, x, flag, name, label)", str(cm.exception))

    def test_bad_csv_record(self):
        with open(self.csv, "a") as f:
            f.write("1,2\n")
        with self.assertRaises(FeedError) as cm:
            list(Feed(self.spec(self.csv_splits([])), use_pyarrow=False).batches())
        self.assertIn("has 2 fields; the header names 5", str(cm.exception))

    @unittest.skipIf(pyarrow_available(), "pyarrow is installed")
    def test_needs_pyarrow(self):
        cases = [
            ({"uri": "file:///data/x.parquet", "format": "parquet", "row_groups": [0]}, "reading Parquet"),
            ({"uri": "hdfs://nn:8020/data/x.csv", "format": "csv", "offset": 0, "length": 5}, "reading hdfs://"),
        ]
        for split, want in cases:
            with self.subTest(want):
                with self.assertRaises(FeedError) as cm:
                    list(Feed(self.spec([split], columns=["a"]), use_pyarrow=False).batches())
                self.assertIn(want, str(cm.exception))
                self.assertIn("needs pyarrow", str(cm.exception))

    def test_raw_native_adapter(self):
        """Remote files (through pyarrow) are read with readline via a small raw-file adapter."""
        import io

        from spindle._direct import _RawNative

        f = io.BufferedReader(_RawNative(io.BytesIO(b"a,b\n1,2\n3,4\n")), buffer_size=4)
        self.assertEqual(f.readline(), b"a,b\n")
        f.seek(5)
        self.assertEqual(f.tell(), 5)
        self.assertEqual(f.readline(), b",2\n")
        self.assertEqual(f.read(), b"3,4\n")
        f.close()

    def test_bad_spec(self):
        split = {"uri": "file:///x.csv", "format": "csv"}
        cases = [
            ({"version": None}, "key 'version' is missing"),
            ({"version": 2}, "version 2 is newer than this package reads (1)"),
            ({"rank": 2, "world_size": 2}, "rank 2 is outside 0..1"),
            ({"epochs": 0}, "epochs 0: need at least 1"),
            ({"even_batches": "maybe"}, "even_batches 'maybe': want pad, drop or off"),
            ({"target_batches": -1}, "target_batches -1: must not be negative"),
            ({"epoch_row_limit": -2}, "epoch_row_limit -2: must not be negative"),
            ({"shuffle": True}, "key 'shuffle_buffer_rows' is missing"),
            ({"batch_rows": "many"}, "key 'batch_rows' is 'many', want int"),
            ({"splits": [{"uri": "file:///x.orc", "format": "orc"}]}, "split 0 (file:///x.orc): unknown format 'orc'"),
            ({"splits": [split, {"format": "csv"}]}, "split 1 has no uri"),
        ]
        for change, want in cases:
            with self.subTest(want):
                change = dict(change)
                path = self.spec(change.pop("splits", [split]), **change)
                if change.get("version", 1) is None:
                    with open(path) as f:
                        doc = json.load(f)
                    del doc["version"]
                    with open(path, "w") as f:
                        json.dump(doc, f)
                with self.assertRaises(FeedError) as cm:
                    Feed(path, mode="direct").batches()
                self.assertIn(want, str(cm.exception))
                self.assertIn(path, str(cm.exception))

        path = os.path.join(self.dir, "broken.json")
        with open(path, "w") as f:
            f.write("{")
        with self.assertRaises(FeedError) as cm:
            Feed(path, mode="direct").batches()
        self.assertIn(f"read direct feed spec {path}: not JSON", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
