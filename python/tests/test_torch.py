"""Tests of spindle.torch: the dataset over the feed, process-group setup, checkpoints."""

import os
import subprocess
import sys
import unittest
from unittest import mock

import support

import numpy as np

try:
    import torch
except ImportError:  # the whole module is skipped
    torch = None

import spindle
from spindle import EnvError, Feed, SpindleError

if torch is not None:
    import spindle.torch as st


free_port = support.free_port


def single_rank():
    """The rendezvous environment of a job of one rank."""
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1"}


def run_python(code, env, timeout=90):
    """Run code in a fresh interpreter with the package on PYTHONPATH, within timeout seconds (scaled)."""
    full = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=support.scaled(timeout), env=full)


@unittest.skipIf(torch is None, "torch is not installed")
class FeedDatasetTest(unittest.TestCase):
    def tensor_server(self, epochs=2):
        streams = []
        for k in range(epochs):
            x = np.arange(12, dtype=np.float32).reshape(4, 3) + k
            streams.append(support.tensor_stream(k, ["a", "b", "c"], "y", [(x, [0, 1, 0, 1]), (x[:2], [1, 1])]))
        return support.serve(self, streams, support.tensor_stream(-1, ["a", "b", "c"], "y"))

    def test_epochs(self):
        srv = self.tensor_server()
        ds = st.FeedDataset(feed=Feed(srv.path))
        self.assertEqual(ds.num_features, 3)
        self.assertEqual(ds.feature_columns, ["a", "b", "c"])
        for k in range(2):
            got = list(ds)
            self.assertEqual(ds.epoch, k)
            self.assertFalse(ds.end_of_feed)
            self.assertEqual([tuple(x.shape) for x, _ in got], [(4, 3), (2, 3)])
            x, y = got[0]
            self.assertEqual((x.dtype, y.dtype), (torch.float32, torch.float32))
            self.assertTrue(torch.equal(x, torch.arange(12, dtype=torch.float32).reshape(4, 3) + k))
            self.assertEqual(y.tolist(), [0, 1, 0, 1])
        self.assertEqual(list(ds), [])
        self.assertTrue(ds.end_of_feed)
        self.assertEqual(srv.served, 3)

    def test_data_loader(self):
        srv = self.tensor_server(1)
        loader = torch.utils.data.DataLoader(st.FeedDataset(feed=Feed(srv.path), label_dtype=torch.int64),
                                             batch_size=None)
        got = [(x.shape[0], y.dtype) for x, y in loader]
        self.assertEqual(got, [(4, torch.int64), (2, torch.int64)])

    def test_arrow_feed(self):
        srv = support.serve(self, [support.fixture("primitives.arrows")], support.fixture("end.arrows"))
        ds = st.FeedDataset(feed=Feed(srv.path, use_pyarrow=False), label_column="label")
        self.assertEqual(ds.num_features, 12)
        x, y = next(iter(ds))
        self.assertEqual((tuple(x.shape), x.dtype, y.dtype), ((5, 12), torch.float32, torch.int64))

    def test_environment_errors(self):
        base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "RANK": "0", "WORLD_SIZE": "1"}
        cases = [
            ("MASTER_ADDR", None, "MASTER_ADDR is not set: run this script with spindle submit"),
            ("MASTER_PORT", None, "MASTER_PORT is not set"),
            ("RANK", None, "RANK is not set"),
            ("WORLD_SIZE", "two", "WORLD_SIZE='two' is not an integer"),
            ("RANK", "1", "RANK=1 is not below WORLD_SIZE=1"),
        ]
        for var, value, want in cases:
            with self.subTest(var=var, value=value):
                env = dict(base)
                if value is None:
                    del env[var]
                else:
                    env[var] = value
                clean = {k: v for k, v in os.environ.items() if k not in base}
                with mock.patch.dict(os.environ, dict(clean, **env), clear=True):
                    with self.assertRaises(EnvError) as cm:
                        st.init_process_group()
                    self.assertIn(want, str(cm.exception))
        self.assertFalse(torch.distributed.is_initialized())

    def test_init_process_group(self):
        code = ("import torch, torch.distributed as dist, spindle.torch as st\n"
                "st.init_process_group()\n"
                "st.init_process_group()  # a second call does nothing\n"
                "t = torch.ones(3); dist.all_reduce(t); st.barrier()\n"
                "print(dist.get_backend(), dist.get_world_size(), t.tolist(), st.is_chief())\n")
        out = run_python(code, single_rank())
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "gloo 1 [1.0, 1.0, 1.0] True")

    def test_finish_destroys_the_group(self):
        code = ("import torch.distributed as dist, spindle.torch as st\n"
                "st.init_process_group(); st.barrier(); st.finish()\n"
                "print('initialized after finish:', dist.is_initialized())\n"
                "st.finish()  # nothing left to destroy\n")
        out = run_python(code, single_rank())
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "initialized after finish: False")

    def test_finish_does_not_wait_out_a_stuck_teardown(self):
        """A destroy_process_group that never returns: finish ends the process with status 0 after its timeout."""
        code = ("import threading, torch.distributed as dist, spindle.torch as st\n"
                "st.init_process_group()\n"
                "dist.destroy_process_group = lambda *a, **k: threading.Event().wait()  # hangs, as torch's may\n"
                "print('finishing', flush=True)\n"
                "st.finish(timeout=0.5)\n"
                "print('not reached')\n")
        out = run_python(code, single_rank(), timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "finishing")
        self.assertIn("did not return within 0.5s", out.stderr)

    def test_finish_with_exit_status_skips_a_stuck_teardown(self):
        """An object whose teardown hangs at interpreter exit, as a DDP module's group may: exit_status ends the process first."""
        code = ("import threading, spindle.torch as st\n"
                "class Stuck:\n"
                "    def __del__(self):\n"
                "        threading.Event().wait()\n"
                "held = Stuck()\n"
                "st.init_process_group()\n"
                "print('finishing', flush=True)\n"
                "st.finish(exit_status=3)\n"
                "print('not reached')\n")
        out = run_python(code, single_rank(), timeout=60)
        self.assertEqual(out.returncode, 3, out.stderr)
        self.assertEqual(out.stdout.strip(), "finishing")

    def test_late_rank_still_joins(self):
        """A rank that starts after the collective timeout (torch imported slowly on a busy host) still joins."""
        port = str(free_port())
        code = ("import sys, time, torch, torch.distributed as dist, spindle.torch as st\n"
                "if sys.argv[1] == '0': time.sleep(4)\n"
                "st.init_process_group()\n"
                "t = torch.ones(1); dist.all_reduce(t); print(t.item())\n")
        procs = []
        for rank in ("1", "0"):
            env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=rank,
                       WORLD_SIZE="2", SPINDLE_COLLECTIVE_TIMEOUT="1")
            procs.append(subprocess.Popen([sys.executable, "-c", code, rank], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, env=env))
        for p in procs:
            out, err = p.communicate(timeout=support.scaled(120))
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(out.strip(), "2.0")

    def test_missing_peer_times_out(self):
        """Rank 0 of 2 whose peer never comes gives up after its rendezvous timeout, not 30 minutes."""
        code = ("import spindle.torch as st\n"
                "try:\n"
                "    st.init_process_group(rendezvous_timeout=1.5)\n"
                "except RuntimeError as e:\n"
                "    print('gave up:', e)\n")
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "2",
               "SPINDLE_COLLECTIVE_TIMEOUT": "1.5"}
        out = run_python(code, env, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"(?i)gave up: .*time")


@unittest.skipIf(torch is None, "torch is not installed")
class CheckpointTest(unittest.TestCase):
    def test_save_and_load(self):
        d = support.short_tempdir(self)
        for directory in (d, "file://" + d):
            with self.subTest(directory=directory):
                with mock.patch.dict(os.environ, {"SPINDLE_CHECKPOINT_DIR": directory}):
                    path = st.save_checkpoint({"w": torch.arange(4)}, "m.pt")
                    self.assertEqual(path, os.path.join(d, "m.pt"))
                    self.assertEqual(st.load_checkpoint("m.pt")["w"].tolist(), [0, 1, 2, 3])
                    self.assertIsNone(st.load_checkpoint("other.pt"))
        self.assertEqual(sorted(os.listdir(d)), ["m.pt"])

    def test_failed_save_keeps_the_old_checkpoint(self):
        d = support.short_tempdir(self)
        st.save_checkpoint({"v": 1}, directory=d)
        with self.assertRaises(Exception):
            st.save_checkpoint({"v": lambda: 2}, directory=d)  # lambdas do not pickle
        self.assertEqual(st.load_checkpoint(directory=d), {"v": 1})
        self.assertEqual(os.listdir(d), ["checkpoint.pt"])

    def test_bad_directory(self):
        with mock.patch.dict(os.environ, {"SPINDLE_CHECKPOINT_DIR": ""}):
            with self.assertRaises(EnvError) as cm:
                st.save_checkpoint({})
            self.assertIn("SPINDLE_CHECKPOINT_DIR is not set", str(cm.exception))
        with self.assertRaises(SpindleError) as cm:
            st.save_checkpoint({}, directory="hdfs://nn:8020/ckpt")
        self.assertIn("hdfs://nn:8020/ckpt", str(cm.exception))


class LazyImportTest(unittest.TestCase):
    def test_spindle_alone_does_not_import_torch(self):
        out = run_python("import sys, spindle; print('torch' in sys.modules)", {})
        self.assertEqual(out.stdout.strip(), "False", out.stderr)
        self.assertTrue(hasattr(spindle, "tensors"))


if __name__ == "__main__":
    unittest.main()
