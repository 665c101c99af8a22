"""Tests of spindle.checkpoint without an executor (local directories and errors).

Checkpoints on HDFS go through the executor's service; the end-to-end tests
(e2e TestPythonCheckpointsOnHDFS) run them against a test HDFS.
"""

import json
import os
import re
import unittest
from unittest import mock

import numpy as np
import support

import spindle
from spindle import _contract as C
from spindle import _feed, checkpoint
from spindle._errors import EnvError


def _batches(epoch, n, rows=2):
    x = np.zeros((rows, 1), np.float32)
    return support.tensor_stream(epoch, ["x"], "id", [(x, np.arange(i * rows, (i + 1) * rows, dtype=np.float32))
                                                      for i in range(n)])


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


class CheckpointerTest(unittest.TestCase):
    """Checkpointer: files, the feed position recorded beside them, resuming."""

    def env(self, feed, d, **extra):
        e = {C.RANK: "0", C.WORLD_SIZE: "1", C.FEED: feed, C.FEED_MODE: "tensor", C.CHECKPOINT_DIR: d}
        e.update(extra)
        return mock.patch.dict(os.environ, e)

    def record(self, d, name, rank=0):
        with open(os.path.join(d, checkpoint.RESUME_DIR, name, f"rank-{rank}.json")) as f:
            return json.load(f)

    def setUp(self):
        _feed._last = None
        self.addCleanup(setattr, _feed, "_last", None)

    def test_save_records_the_position(self):
        d = support.short_tempdir(self)
        srv = support.serve(self, [_batches(0, 3), _batches(1, 3)], support.tensor_stream(-1, ["x"], "id"))
        with self.env(srv.path, d):
            ck = spindle.Checkpointer(prefix="step", every_steps=2)
            self.assertIsNone(ck.resume())
            self.assertEqual(spindle.position(), (0, 0))
            feed = spindle.Feed()
            ep = feed.tensors()
            next(ep), next(ep)
            self.assertFalse(ck.due(1))
            self.assertTrue(ck.maybe_save(2, lambda: b"two"))
            rec = self.record(d, "step-2")
            self.assertEqual((rec["feed"], rec["files"], rec["step"]), ({"epoch": 0, "batches": 2}, ["step-2"], 2))
            self.assertEqual(checkpoint.load_bytes("step-2", d), b"two")
            list(ep)  # to its end: the position moves to the next epoch
            self.assertEqual(spindle.position(), (1, 0))

    def test_resume_and_start_inside_an_epoch(self):
        d = support.short_tempdir(self)
        # A generation resumed at epoch 1 batch 2: the executor leaves those out.
        srv = support.serve(self, [_batches(1, 1)], support.tensor_stream(-1, ["x"], "id"))
        checkpoint.save_bytes(b"state", "step-8", d)
        with self.env(srv.path, d, **{C.RESUME_CHECKPOINT: "step-8", C.RESUME_STEP: "8",
                                      C.FEED_START_EPOCH: "1", C.FEED_START_BATCH: "2"}):
            self.assertEqual(spindle.position(), (1, 2))
            self.assertEqual(spindle.Checkpointer(prefix="step").resume(), (8, b"state"))
            with self.assertRaises(checkpoint.CheckpointError) as cm:
                spindle.Checkpointer(prefix="model").resume()
            self.assertIn("step-8", str(cm.exception))
            ep = spindle.Feed().tensors()
            next(ep)
            self.assertEqual(spindle.position(), (1, 3))

    def test_other_ranks_record_only(self):
        d = support.short_tempdir(self)
        with self.env("", d, **{C.RANK: "1", C.WORLD_SIZE: "2"}):
            os.environ.pop(C.FEED)
            spindle.Checkpointer().save(5, b"x")
            self.assertIsNone(checkpoint.load_bytes("ckpt-5", d))
            rec = self.record(d, "ckpt-5", rank=1)
            self.assertNotIn("feed", rec)
            self.assertNotIn("files", rec)
            spindle.Checkpointer(per_rank=True).save(6, b"y")
            self.assertEqual(checkpoint.load_bytes("ckpt-6.rank-1", d), b"y")
        with self.assertRaises(checkpoint.CheckpointError):
            checkpoint.Checkpointer(prefix=".x", directory=d)


class RetentionTest(unittest.TestCase):
    """Checkpointer keep: old complete checkpoints go once a new one is complete."""

    def env(self, d, rank, **extra):
        e = {C.RANK: str(rank), C.WORLD_SIZE: "2", C.FEED: "", C.FEED_MODE: "", C.CHECKPOINT_DIR: d}
        e.update(extra)
        return mock.patch.dict(os.environ, e)

    def files(self, d):
        return sorted((n for n in os.listdir(d) if not n.startswith(".")), key=lambda n: [int(p) if p.isdigit() else p
                                                                                        for p in re.split(r"(\d+)", n)])

    def run_steps(self, d, steps=5, half=6, **kw):
        """Both ranks save steps 1..steps (either may be last), then rank 0 saves half."""
        for step in range(1, steps + 1):
            for rank in ((0, 1) if step % 2 else (1, 0)):
                with self.env(d, rank):
                    spindle.Checkpointer(**kw).save(step, f"model {step}".encode())
        if half:
            with self.env(d, 0):
                spindle.Checkpointer(**kw).save(half, b"half")

    def test_keeps_the_newest(self):
        for kw, want in [
            ({"keep": 2}, ["ckpt-4", "ckpt-5", "ckpt-6"]),
            ({}, ["ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"]),  # the job's default, 3
            ({"keep": 1, "per_rank": True}, ["ckpt-5.rank-0", "ckpt-5.rank-1", "ckpt-6.rank-0"]),
            ({"keep": 0}, ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4", "ckpt-5", "ckpt-6"]),
        ]:
            with self.subTest(**kw):
                d = support.short_tempdir(self)
                self.run_steps(d, **kw)
                self.assertEqual(self.files(d), want)
                records = sorted(os.listdir(os.path.join(d, checkpoint.RESUME_DIR)))
                self.assertEqual(records, sorted({w.split(".")[0] for w in want}))
                # The newest complete one is whole.
                name = "ckpt-5.rank-1" if kw.get("per_rank") else "ckpt-5"
                self.assertEqual(checkpoint.load_bytes(name, d), b"model 5")

    def test_the_jobs_keep(self):
        d = support.short_tempdir(self)
        with self.env(d, 0, **{C.CHECKPOINT_KEEP: "1"}):
            self.assertEqual(spindle.checkpoint_keep(), 1)
            self.assertEqual(spindle.Checkpointer().keep, 1)
        with self.env(d, 0, **{C.CHECKPOINT_KEEP: "0"}):
            self.assertEqual(spindle.Checkpointer().keep, 0)
        with self.env(d, 0, **{C.CHECKPOINT_KEEP: "-1"}):
            with self.assertRaises(EnvError):
                spindle.Checkpointer()
        with self.env(d, 0):
            with self.assertRaises(checkpoint.CheckpointError):
                spindle.Checkpointer(keep=-2)

    def test_completion_order_and_go_times(self):
        """Recency is by completion: an older job's higher steps go first; Go's nanosecond times parse."""
        d = support.short_tempdir(self)
        for name, when in [("ckpt-900", "2026-01-01T00:00:01.123456789Z"), ("ckpt-910", "2026-01-01T00:00:02Z"),
                           ("ckpt-10", "2026-01-01T00:00:03.5+00:00"), ("ckpt-20", None)]:
            checkpoint.save_bytes(name.encode(), name, d)
            rd = os.path.join(d, checkpoint.RESUME_DIR, name)
            os.makedirs(rd)
            for rank in (0, 1):
                rec = {"checkpoint": name, "step": int(name[5:]), "rank": rank, "world_size": 2, "generation": 0,
                       "time": when or "2026-01-01T00:00:04Z"}
                if rank == 0:
                    rec["files"] = [name]
                if name == "ckpt-20" and rank == 1:
                    continue  # not complete: never deleted nor counted
                with open(os.path.join(rd, f"rank-{rank}.json"), "w") as f:
                    json.dump(rec, f)
        self.assertEqual(checkpoint.prune(d, "ckpt", 1, after="ckpt-20"), [])  # ckpt-20 is not complete yet
        self.assertEqual(checkpoint.prune(d, "ckpt", 1), ["ckpt-900", "ckpt-910"])
        self.assertEqual(self.files(d), ["ckpt-10", "ckpt-20"])
        self.assertEqual(checkpoint.prune(d, "ckpt", 1), [])

    def test_a_pin_holds_a_checkpoint_for_a_replacement(self):
        """A checkpoint the driver pinned for a replacement stays until that replacement records a newer one."""
        def record(d, name, at, replacement=0):
            checkpoint.save_bytes(name.encode(), name, d)
            rd = os.path.join(d, checkpoint.RESUME_DIR, name)
            os.makedirs(rd, exist_ok=True)
            for rank in (0, 1):
                rec = {"checkpoint": name, "step": int(name[5:]), "rank": rank, "world_size": 2, "generation": 0,
                       "time": f"2026-01-01T00:00:0{at}Z"}
                if rank == 0:
                    rec["files"] = [name]
                if rank == 1 and replacement:
                    rec["replacement"] = replacement
                with open(os.path.join(rd, f"rank-{rank}.json"), "w") as f:
                    json.dump(rec, f)

        def pin(d, name, body):
            with open(os.path.join(d, checkpoint.RESUME_DIR, name, "pin-rank-1.json"), "w") as f:
                f.write(body)

        d = support.short_tempdir(self)
        for i, name in enumerate(["ckpt-10", "ckpt-20", "ckpt-30"]):
            record(d, name, i + 1)
        pin(d, "ckpt-10", '{"rank":1,"generation":0,"replacement":1,"time":"2026-01-01T00:00:01Z"}')
        # The lost process's records completed ckpt-20 and ckpt-30: they do not spend the pin.
        self.assertEqual(checkpoint.prune(d, "ckpt", 1), ["ckpt-20"])
        self.assertEqual(self.files(d), ["ckpt-10", "ckpt-30"])
        record(d, "ckpt-40", 4, replacement=1)  # the replacement's own record spends it
        self.assertEqual(checkpoint.prune(d, "ckpt", 1), ["ckpt-10", "ckpt-30"])
        self.assertEqual(self.files(d), ["ckpt-40"])
        self.assertEqual(os.listdir(os.path.join(d, checkpoint.RESUME_DIR)), ["ckpt-40"])

        # An unreadable pin is spent by any newer record of its rank.
        d = support.short_tempdir(self)
        record(d, "ckpt-10", 1)
        record(d, "ckpt-20", 2)
        pin(d, "ckpt-10", "{")
        self.assertEqual(checkpoint.prune(d, "ckpt", 1), ["ckpt-10"])

    def test_a_replacement_says_so_in_its_records(self):
        d = support.short_tempdir(self)
        with self.env(d, 0, **{C.REPLACEMENT: "2"}):
            spindle.Checkpointer(keep=0).save(5, b"model")
        with open(os.path.join(d, checkpoint.RESUME_DIR, "ckpt-5", "rank-0.json")) as f:
            self.assertEqual(json.load(f).get("replacement"), 2)

    def test_remote_goes_through_the_executor(self):
        env = {k: v for k, v in os.environ.items() if k != checkpoint.SERVICE}
        with mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaises(checkpoint.CheckpointError) as cm:
                checkpoint.prune("hdfs://nn:8020/ckpt", "ckpt", 2, after="ckpt-4")
        self.assertIn(checkpoint.SERVICE, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
