"""Tests of spindle.checkpoint without an executor (local directories and errors).

Checkpoints on HDFS go through the executor's service; the end-to-end tests
(internal/e2e TestPythonCheckpointsOnHDFS) run them against a test HDFS.
"""

import os
import unittest
from unittest import mock

import support

from spindle import checkpoint
from spindle._errors import EnvError


class CheckpointTest(unittest.TestCase):
    def test_local_round_trip(self):
        d = support.short_tempdir(self)
        for directory in (d, "file://" + d):
            with self.subTest(directory=directory):
                self.assertEqual(checkpoint.save_bytes(b"abc", "m.bin", directory), os.path.join(d, "m.bin"))
                self.assertEqual(checkpoint.load_bytes("m.bin", directory), b"abc")
                self.assertIsNone(checkpoint.load_bytes("other.bin", directory))
        self.assertEqual(os.listdir(d), ["m.bin"])  # no temporary file left

    def test_remote_without_the_executor(self):
        env = {k: v for k, v in os.environ.items() if k != checkpoint.SERVICE}
        with mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaises(checkpoint.CheckpointError) as cm:
                checkpoint.save_bytes(b"x", "m.bin", "hdfs://nn:8020/ckpt")
        self.assertIn("hdfs://nn:8020/ckpt", str(cm.exception))
        self.assertIn(checkpoint.SERVICE, str(cm.exception))

    def test_service_gone(self):
        d = support.short_tempdir(self)
        with mock.patch.dict(os.environ, {checkpoint.SERVICE: os.path.join(d, "nothing.sock")}):
            with self.assertRaises(checkpoint.CheckpointError) as cm:
                checkpoint.load_bytes("m.bin", "hdfs:///ckpt")
        self.assertIn("checkpoint service", str(cm.exception))

    def test_bad_names_and_no_directory(self):
        for bad in ("", ".hidden", "a/b"):
            with self.assertRaises(checkpoint.CheckpointError):
                checkpoint.save_bytes(b"x", bad, "/tmp")
        with mock.patch.dict(os.environ, {"SPINDLE_CHECKPOINT_DIR": ""}):
            with self.assertRaises(EnvError):
                checkpoint.load_bytes("m.bin")


if __name__ == "__main__":
    unittest.main()
