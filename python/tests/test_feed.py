"""Tests of epoch iteration over a Unix socket served the way an executor serves it."""

import os
import socket
import unittest
from unittest import mock

import support

import numpy as np

import spindle
from spindle import Feed, FeedError, FeedTruncatedError

ARROW_EPOCHS = [support.fixture("primitives.arrows"), support.fixture("epoch1.arrows")]
ARROW_END = support.fixture("end.arrows")


def tensor_epochs(n_epochs=2):
    """Return the streams of n_epochs tensor epochs (epoch k: k+1 batches) and the end stream."""
    streams = []
    for k in range(n_epochs):
        batches = []
        for b in range(k + 1):
            x = np.arange(6, dtype=np.float32).reshape(3, 2) + 100 * k + 10 * b
            batches.append((x, np.array([k, b, 1], dtype=np.float32)))
        streams.append(support.tensor_stream(k, ["a", "b"], "y", batches))
    return streams, support.tensor_stream(-1, ["a", "b"], "y")


class ArrowFeedTest(unittest.TestCase):
    def feed(self, **kw):
        srv = support.serve(self, ARROW_EPOCHS, ARROW_END)
        return srv, Feed(srv.path, mode=kw.pop("mode", "arrow"), use_pyarrow=False, **kw)

    def test_epoch_sequence(self):
        srv, feed = self.feed()
        exp0 = support.expected("primitives.arrows")
        ep = feed.batches()
        self.assertEqual(ep.epoch, 0)
        self.assertEqual(feed.last_epoch, 0)
        self.assertFalse(ep.end_of_feed)
        self.assertEqual(ep.columns, [f["name"] for f in exp0["fields"]])
        batches = list(ep)
        self.assertEqual([len(b["i8"]) for b in batches], [5, 4, 0])
        self.assertEqual(batches[0]["i64"].tolist(), exp0["batches"][0]["columns"]["i64"])
        self.assertEqual((ep.rows, ep.batches, ep.closed), (9, 3, True))

        ep = feed.batches()
        self.assertEqual(ep.epoch, 1)
        self.assertEqual([len(b["label"]) for b in ep], [7])

        for _ in range(2):  # every call after the last epoch yields nothing
            ep = feed.batches()
            self.assertEqual(ep.epoch, -1)
            self.assertTrue(ep.end_of_feed)
            self.assertEqual(list(ep), [])
            self.assertEqual(feed.last_epoch, -1)
        self.assertEqual(srv.served, 4)

    def test_epochs_generator(self):
        _, feed = self.feed()
        seen = [(ep.epoch, sum(1 for _ in ep)) for ep in feed.epochs()]
        self.assertEqual(seen, [(0, 3), (1, 1)])
        self.assertEqual(list(feed.epochs()), [])

    def test_tensors_from_columns(self):
        _, feed = self.feed()
        exp = support.expected("primitives.arrows")["batches"][0]["columns"]
        ep = feed.tensors(label_column="label")
        self.assertEqual(ep.label_column, "label")
        self.assertEqual(ep.feature_columns, ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "f32",
                                              "f64", "b"])
        x, y = next(ep)
        self.assertEqual(x.dtype, np.float32)
        self.assertEqual(x.shape, (5, 12))
        self.assertEqual(y.dtype, np.int64)
        self.assertEqual(y.tolist(), exp["label"])
        for j, name in enumerate(ep.feature_columns):
            for i, v in enumerate(exp[name]):
                if v is None:
                    self.assertTrue(np.isnan(x[i, j]), (name, i))
                else:
                    self.assertEqual(x[i, j], np.float32(float(v)), (name, i))

    def test_label_from_environment(self):
        _, feed = self.feed()
        with mock.patch.dict(os.environ, {"SPINDLE_LABEL_COLUMN": "label"}):
            x, y = next(feed.tensors())
        self.assertEqual(x.shape[1], 12)
        self.assertEqual(y.dtype, np.int64)

    def test_no_label_gives_all_columns(self):
        _, feed = self.feed()
        with mock.patch.dict(os.environ, {"SPINDLE_LABEL_COLUMN": ""}):
            x, y = next(feed.tensors())
        self.assertEqual(x.shape, (5, 13))
        self.assertIsNone(y)

    def test_unknown_label(self):
        srv, feed = self.feed()
        with self.assertRaises(FeedError) as cm:
            feed.tensors(label_column="target")
        self.assertIn("label column 'target' is not among the feed's columns i8, i16", str(cm.exception))

    def test_non_numeric_column(self):
        srv = support.serve(self, [support.fixture("variable.arrows")], ARROW_END)
        ep = Feed(srv.path, use_pyarrow=False).tensors()
        with self.assertRaises(FeedError) as cm:
            next(ep)
        self.assertIn("column 's' holds strings or other objects; tensors() needs", str(cm.exception))
        self.assertTrue(ep.closed)

    def test_columns_keeps_the_epoch(self):
        srv, feed = self.feed()
        self.assertEqual(feed.columns()[-1], "label")
        self.assertEqual(feed.feature_columns("label")[:2], ["i8", "i16"])
        self.assertEqual(srv.served, 1)
        ep = feed.batches()
        self.assertEqual(ep.epoch, 0)
        self.assertEqual(sum(1 for _ in ep), 3)
        self.assertEqual(feed.batches().epoch, 1)

    def test_abandoned_epoch(self):
        _, feed = self.feed()
        ep = feed.batches()
        next(ep)
        ep.close()
        self.assertEqual(list(ep), [])
        with feed.batches() as ep:
            self.assertEqual(ep.epoch, 1)

    def test_cut_stream(self):
        data = ARROW_EPOCHS[0]
        srv = support.serve(self, [data[:len(data) // 2], data[:-8] + b"\xff\xff\xff\xff"], ARROW_END)
        feed = Feed(srv.path, use_pyarrow=False)
        for k in range(2):
            with self.subTest(epoch=k):
                with self.assertRaises(FeedTruncatedError) as cm:
                    for _ in feed.batches():
                        pass
                self.assertIn(srv.path, str(cm.exception))
        self.assertEqual(feed.batches().epoch, -1)

    def test_mode_mismatch(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, streams, end)
        with self.assertRaises(FeedError) as cm:
            Feed(srv.path, mode="arrow").batches()
        self.assertIn("speaks the tensor format, but the mode is arrow (SPINDLE_FEED_MODE)", str(cm.exception))

    def test_not_a_spindle_stream(self):
        # The messages of an Arrow IPC file follow its 8-byte magic; its schema has no epoch.
        srv = support.serve(self, [support.fixture("primitives.arrow")[8:]])
        with self.assertRaises(FeedError) as cm:
            Feed(srv.path).batches()
        self.assertIn("schema metadata spindle.epoch is None, want an epoch number", str(cm.exception))


class TensorFeedTest(unittest.TestCase):
    def test_epoch_sequence(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, streams, end)
        feed = Feed(srv.path)  # the mode is detected from the stream
        for k in range(2):
            ep = feed.tensors()
            self.assertEqual((ep.epoch, ep.columns, ep.label_column), (k, ["a", "b", "y"], "y"))
            got = list(ep)
            self.assertEqual(len(got), k + 1)
            for b, (x, y) in enumerate(got):
                np.testing.assert_array_equal(x, np.arange(6).reshape(3, 2) + 100 * k + 10 * b)
                np.testing.assert_array_equal(y, [k, b, 1])
                self.assertEqual((x.dtype, y.dtype), (np.float32, np.float32))
        ep = feed.tensors()
        self.assertTrue(ep.end_of_feed)
        self.assertEqual(list(ep), [])

    def test_batches_are_column_dicts(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, streams, end)
        b = next(Feed(srv.path, mode="tensor").batches())
        self.assertEqual(list(b), ["a", "b", "y"])
        np.testing.assert_array_equal(b["a"], [0, 2, 4])
        np.testing.assert_array_equal(b["b"], [1, 3, 5])
        np.testing.assert_array_equal(b["y"], [0, 0, 1])

    def test_label_mismatch(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, streams, end)
        with self.assertRaises(FeedError) as cm:
            Feed(srv.path).tensors(label_column="target")
        self.assertIn("label column 'target' was asked for, but the tensor feed's label is 'y'", str(cm.exception))

    def test_float64_features(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, streams, end)
        x, _ = next(Feed(srv.path).tensors(dtype=np.float64))
        self.assertEqual(x.dtype, np.float64)

    def test_cut_inside_batch(self):
        streams, end = tensor_epochs()
        srv = support.serve(self, [streams[1][:-10]], end)
        ep = Feed(srv.path).tensors()
        next(ep)
        with self.assertRaises(FeedTruncatedError) as cm:
            next(ep)
        self.assertIn("stream ended inside a batch of 3 rows", str(cm.exception))


class ConnectTest(unittest.TestCase):
    def test_no_socket(self):
        path = os.path.join(support.short_tempdir(self), "missing.sock")
        with self.assertRaises(FeedError) as cm:
            Feed(path, mode="tensor").batches()
        self.assertIn(f"connect to feed {path}: no such socket", str(cm.exception))

    def test_nobody_listening(self):
        path = os.path.join(support.short_tempdir(self), "dead.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()
        with self.assertRaises(FeedError) as cm:
            Feed(path, mode="arrow").batches()
        self.assertIn("connection refused (the executor has stopped)", str(cm.exception))

    def test_closed_without_data(self):
        srv = support.serve(self, [b""])
        with self.assertRaises(FeedError) as cm:
            Feed(srv.path).batches()
        self.assertIn("closed the connection without sending anything", str(cm.exception))


class ModuleApiTest(unittest.TestCase):
    def test_module_functions_follow_the_environment(self):
        streams, end = tensor_epochs(3)
        srv = support.serve(self, streams, end)
        env = {"SPINDLE_FEED": srv.path, "SPINDLE_FEED_MODE": "tensor"}
        with mock.patch.dict(os.environ, env):
            self.assertIsNone(spindle.last_epoch())
            self.assertEqual(spindle.columns(), ["a", "b", "y"])
            self.assertEqual(len(list(spindle.tensors())), 1)
            self.assertEqual(spindle.last_epoch(), 0)
            self.assertEqual(len(list(spindle.batches())), 2)
            self.assertEqual(spindle.last_epoch(), 1)
            self.assertEqual([ep.epoch for ep in spindle.epochs("tensors")], [2])
            self.assertEqual(spindle.last_epoch(), -1)
            self.assertEqual(list(spindle.batches()), [])


if __name__ == "__main__":
    unittest.main()
