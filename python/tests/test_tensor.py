"""Tests of the tensor-format reader against bytes built by hand from docs/feed-protocol.md."""

import io
import json
import struct
import unittest

import support  # noqa: F401  (puts the package on sys.path)

import numpy as np

from spindle import FeedError, FeedTruncatedError, _tensor
from spindle._io import ExactReader


def header(epoch, names, nfeatures, flags, magic=b"SPTF", version=1, names_bytes=None):
    js = names_bytes if names_bytes is not None else json.dumps(names).encode()
    return magic + struct.pack("<HHiII", version, flags, epoch, nfeatures, len(js)) + js


def reader(data):
    return ExactReader(io.BufferedReader(io.BytesIO(data)), "test-stream")


class TensorFormatTest(unittest.TestCase):
    def test_batches_with_labels(self):
        data = (header(7, ["a", "b", "y"], 2, 1)
                + struct.pack("<I", 3) + struct.pack("<6f", 1, 2, 3, 4, 5, float("nan")) + struct.pack("<3f", 1, 0, 1)
                + struct.pack("<I", 1) + struct.pack("<2f", -1.5, 2.25) + struct.pack("<f", 0)
                + struct.pack("<I", 0))
        rd = reader(data)
        h = _tensor.read_header(rd)
        self.assertEqual((h.epoch, h.features, h.label), (7, ["a", "b"], "y"))
        x, y = _tensor.read_batch(rd, h)
        self.assertEqual(x.dtype, np.float32)
        self.assertEqual(x.shape, (3, 2))
        np.testing.assert_array_equal(x[:2], [[1, 2], [3, 4]])
        self.assertEqual(x[2, 0], 5)
        self.assertTrue(np.isnan(x[2, 1]))
        np.testing.assert_array_equal(y, [1, 0, 1])
        x, y = _tensor.read_batch(rd, h)
        np.testing.assert_array_equal(x, [[-1.5, 2.25]])
        np.testing.assert_array_equal(y, [0])
        self.assertIsNone(_tensor.read_batch(rd, h))

    def test_no_labels_and_end_stream(self):
        data = header(-1, ["f0"], 1, 0) + struct.pack("<I", 0)
        rd = reader(data)
        h = _tensor.read_header(rd)
        self.assertEqual((h.epoch, h.features, h.label), (-1, ["f0"], None))
        self.assertIsNone(_tensor.read_batch(rd, h))

        data = header(0, ["f0", "f1"], 2, 0) + struct.pack("<I", 2) + struct.pack("<4f", 1, 2, 3, 4) + b"\0" * 4
        rd = reader(data)
        h = _tensor.read_header(rd)
        x, y = _tensor.read_batch(rd, h)
        self.assertIsNone(y)
        np.testing.assert_array_equal(x, [[1, 2], [3, 4]])

    def test_encoder_matches_hand_built_bytes(self):
        hand = header(3, ["a", "b", "lbl"], 2, 1) + struct.pack("<I", 2) + struct.pack("<4f", 1, 2, 3, 4) \
            + struct.pack("<2f", 1, 0) + struct.pack("<I", 0)
        built = support.tensor_stream(3, ["a", "b"], "lbl", [(np.array([[1, 2], [3, 4]]), np.array([1, 0]))])
        self.assertEqual(built, hand)

    def test_malformed(self):
        good_batch = struct.pack("<I", 1) + struct.pack("<2f", 1, 2)
        cases = [
            ("bad magic", header(0, ["a"], 1, 0, magic=b"NOPE"), FeedError, "bad magic"),
            ("arrow bytes", b"\xff\xff\xff\xff" + b"\0" * 16, FeedError, "speaks Arrow IPC"),
            ("newer version", header(0, ["a"], 1, 0, version=2), FeedError, "version 2"),
            ("names not JSON", header(0, None, 1, 0, names_bytes=b"[a"), FeedError, "column names"),
            ("names count", header(0, ["a", "b"], 1, 0), FeedError, "2 names for 1 features"),
            ("label name missing", header(0, ["a"], 1, 1), FeedError, "1 names for 1 features (label: True)"),
            ("names not strings", header(0, [1], 1, 0), FeedError, "names"),
            ("short header", b"SPTF\x01\x00", FeedTruncatedError, "inside the tensor stream header"),
            ("short names", header(0, ["abc"], 1, 0)[:-2], FeedTruncatedError, "inside the tensor stream header"),
        ]
        for name, data, exc, want in cases:
            with self.subTest(name):
                with self.assertRaises(exc) as cm:
                    _tensor.read_header(reader(data))
                self.assertIn(want, str(cm.exception))
                self.assertIn("test-stream", str(cm.exception))

        h = _tensor.Header(0, ["a", "b"], None)
        cut = [
            ("no end frame", b"", "before the end-of-epoch frame"),
            ("half a row count", b"\x01\x00", "before the end-of-epoch frame"),
            ("inside a batch", good_batch[:-3], "inside a batch of 1 rows"),
        ]
        for name, data, want in cut:
            with self.subTest(name):
                with self.assertRaises(FeedTruncatedError) as cm:
                    _tensor.read_batch(reader(data), h)
                self.assertIn(want, str(cm.exception))

    def test_huge_row_count_is_refused(self):
        h = _tensor.Header(0, ["f"] * 1000, None)
        with self.assertRaises(FeedError) as cm:
            _tensor.read_batch(reader(struct.pack("<I", 0xFFFFFFFF)), h)
        self.assertIn("too large", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
