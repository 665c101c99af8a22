"""Tests of the environment accessors: values, and errors that name the variable."""

import json
import os
import tempfile
import unittest
from unittest import mock

import support  # also puts the package on sys.path

import spindle

GOOD = {
    "SPINDLE_RANK": "1",
    "SPINDLE_WORLD_SIZE": "3",
    "SPINDLE_LOCAL_RANK": "0",
    "SPINDLE_LOCAL_WORLD_SIZE": "2",
    "SPINDLE_JOB_ID": "job-42",
    "SPINDLE_CHECKPOINT_DIR": "file:///tmp/ckpt",
    "SPINDLE_PEERS": "10.0.0.1:7000,[::1]:7001,host-c:7002",
    "SPINDLE_FEED": "/tmp/feed.sock",
    "SPINDLE_FEED_MODE": "Tensor",
    "SPINDLE_COLLECTIVE_TIMEOUT": "2.5",
}


def clean_env(**extra):
    """Patch os.environ to hold no SPINDLE_ variable but extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPINDLE_")}
    env.update(extra)
    return mock.patch.dict(os.environ, env, clear=True)


class EnvTest(unittest.TestCase):
    def test_values(self):
        with clean_env(**GOOD):
            self.assertEqual(spindle.rank(), 1)
            self.assertEqual(spindle.world_size(), 3)
            self.assertEqual(spindle.local_rank(), 0)
            self.assertEqual(spindle.local_world_size(), 2)
            self.assertEqual(spindle.job_id(), "job-42")
            self.assertEqual(spindle.checkpoint_dir(), "file:///tmp/ckpt")
            self.assertEqual(spindle.peers(), [("10.0.0.1", 7000), ("::1", 7001), ("host-c", 7002)])
            self.assertEqual(spindle.feed_path(), "/tmp/feed.sock")
            self.assertEqual(spindle.feed_mode(), "tensor")
            self.assertEqual(spindle.collective_timeout(), 2.5)
            self.assertTrue(spindle.in_spindle())

    def test_optional_values(self):
        with clean_env():
            self.assertIsNone(spindle.checkpoint_dir())
            self.assertIsNone(spindle.files_dir())
            self.assertIsNone(spindle.label_column())
            self.assertEqual(spindle.collective_timeout(), 30.0)
            self.assertEqual(spindle.replacement(), 0)
            self.assertFalse(spindle.in_spindle())
        with clean_env(SPINDLE_REPLACEMENT="2"):
            self.assertEqual(spindle.replacement(), 2)
        with clean_env(SPINDLE_REPLACEMENT="-1"):
            with self.assertRaisesRegex(spindle.EnvError, "SPINDLE_REPLACEMENT"):
                spindle.replacement()

    def test_membership(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "membership.json")
            with clean_env(SPINDLE_MEMBERSHIP=path):
                self.assertIsNone(spindle.membership())
                self.assertIsNone(spindle.wait_membership(0, timeout=0))
                with open(path, "w") as f:
                    json.dump({"version": 1, "peers": ["h:1", "h:2"], "incarnations": [0, 1], "joined": 1}, f)
                self.assertEqual(spindle.membership()["incarnations"], [0, 1])
                self.assertEqual(spindle.wait_membership(0, timeout=0)["joined"], 1)
                self.assertIsNone(spindle.wait_membership(1, timeout=0))
                with open(path, "w") as f:
                    f.write("{")
                with self.assertRaisesRegex(spindle.EnvError, "SPINDLE_MEMBERSHIP"):
                    spindle.membership()
        with clean_env():
            self.assertIsNone(spindle.membership())
            self.assertIsNone(spindle.wait_membership(0))

    def test_missing(self):
        cases = [
            ("SPINDLE_RANK", spindle.rank),
            ("SPINDLE_WORLD_SIZE", spindle.world_size),
            ("SPINDLE_LOCAL_RANK", spindle.local_rank),
            ("SPINDLE_LOCAL_WORLD_SIZE", spindle.local_world_size),
            ("SPINDLE_JOB_ID", spindle.job_id),
            ("SPINDLE_PEERS", spindle.peers),
            ("SPINDLE_FEED", spindle.feed_path),
            ("SPINDLE_FEED_MODE", spindle.feed_mode),
            ("SPINDLE_FEED", spindle.Feed),
        ]
        for var, fn in cases:
            with self.subTest(var=var, fn=fn.__name__):
                env = {k: v for k, v in GOOD.items() if k != var}
                with clean_env(**env):
                    with self.assertRaises(spindle.EnvError) as cm:
                        fn()
                    self.assertEqual(str(cm.exception), f"{var} is not set: run this script with spindle submit")

    def test_peers_file(self):
        # Past Linux's limit for one variable the executor hands the list
        # over in a file: 5,000 ranks of 38-character host names.
        hosts = [f"worker-{r:04d}.rack{r // 40:03d}.cluster.example.com" for r in range(5000)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "peers")
            with open(path, "w", encoding="utf-8") as f:
                f.write(",".join(f"{h}:{40000 + r % 3}" for r, h in enumerate(hosts)))
            env = {k: v for k, v in GOOD.items() if k != "SPINDLE_PEERS"}
            with clean_env(**env, SPINDLE_PEERS_FILE=path):
                got = spindle.peers()
            self.assertEqual(len(got), 5000)
            self.assertEqual(got[4999], (hosts[4999], 40000 + 4999 % 3))
            for extra, want in (({"SPINDLE_PEERS_FILE": os.path.join(d, "gone")}, "SPINDLE_PEERS_FILE"),
                                ({}, "SPINDLE_PEERS is not set")):
                with self.subTest(want=want), clean_env(**env, **extra), self.assertRaises(spindle.EnvError) as cm:
                    spindle.peers()
                self.assertIn(want, str(cm.exception))

    def test_malformed(self):
        cases = [
            ("SPINDLE_RANK", "one", spindle.rank, "is not an integer"),
            ("SPINDLE_RANK", "-1", spindle.rank, "is below 0"),
            ("SPINDLE_RANK", "3", spindle.rank, "is not below SPINDLE_WORLD_SIZE=3"),
            ("SPINDLE_WORLD_SIZE", "0", spindle.world_size, "is below 1"),
            ("SPINDLE_LOCAL_RANK", "1.5", spindle.local_rank, "is not an integer"),
            ("SPINDLE_FEED_MODE", "pipes", spindle.feed_mode, "is not one of arrow, tensor, direct"),
            ("SPINDLE_PEERS", "a:1,b", spindle.peers, "entry 1 ('b') is not host:port"),
            ("SPINDLE_PEERS", "a:1,:2", spindle.peers, "entry 1 (':2') is not host:port"),
            ("SPINDLE_PEERS", "a:99999", spindle.peers, "entry 0 ('a:99999') is not host:port"),
            ("SPINDLE_COLLECTIVE_TIMEOUT", "soon", spindle.collective_timeout, "is not a number of seconds"),
            ("SPINDLE_COLLECTIVE_TIMEOUT", "0", spindle.collective_timeout, "must be a positive number"),
            ("SPINDLE_COLLECTIVE_TIMEOUT", "-3", spindle.collective_timeout, "must be a positive number"),
            ("SPINDLE_COLLECTIVE_TIMEOUT", "nan", spindle.collective_timeout, "must be a positive number"),
        ]
        for var, value, fn, want in cases:
            with self.subTest(var=var, value=value):
                with clean_env(**dict(GOOD, **{var: value})):
                    with self.assertRaises(spindle.EnvError) as cm:
                        fn()
                    self.assertIn(var, str(cm.exception))
                    self.assertIn(want, str(cm.exception))

    def test_roles(self):
        roles = dict(SPINDLE_ROLE="ps", SPINDLE_ROLE_RANK="0", SPINDLE_ROLE_WORLD_SIZE="1",
                     SPINDLE_ROLES="chief:1,worker:2,ps:1", SPINDLE_FEED_MODE="none")
        env = {k: v for k, v in GOOD.items() if k not in ("SPINDLE_FEED", "SPINDLE_FEED_MODE")}
        with clean_env(**env, **roles):
            self.assertEqual(spindle.role(), "ps")
            self.assertEqual(spindle.role_rank(), 0)
            self.assertEqual(spindle.role_world_size(), 1)
            self.assertEqual(spindle.roles(), [("chief", 1), ("worker", 2), ("ps", 1)])
            self.assertTrue(spindle.in_spindle())
            self.assertEqual(spindle.feed_mode(), "none")
            with self.assertRaises(spindle.EnvError) as cm:
                spindle.feed_path()
            self.assertIn("the job's ps gets no feed (only workers are fed", str(cm.exception))
        with clean_env(**dict(GOOD, SPINDLE_ROLES="worker:2,ps")):
            with self.assertRaises(spindle.EnvError) as cm:
                spindle.roles()
            self.assertIn("SPINDLE_ROLES entry 1 ('ps') is not role:count", str(cm.exception))
        with clean_env(**GOOD):
            with self.assertRaises(spindle.EnvError) as cm:
                spindle.role()
            self.assertEqual(str(cm.exception), "SPINDLE_ROLE is not set: run this script with spindle submit")

    def test_feed_mode_from_environment_is_checked(self):
        with clean_env(SPINDLE_FEED="/tmp/x.sock", SPINDLE_FEED_MODE="grpc"):
            with self.assertRaises(spindle.EnvError) as cm:
                spindle.Feed()
            self.assertIn("SPINDLE_FEED_MODE='grpc'", str(cm.exception))

    def test_import_does_not_need_torch(self):
        import subprocess
        import sys

        code = ("import sys; sys.modules['torch'] = None; import spindle; "
                "print('torch' in sys.modules and sys.modules['torch'] is not None)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=support.scaled(60),
                             env=dict(os.environ, PYTHONPATH=support.PYTHON_DIR))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "False")


if __name__ == "__main__":
    unittest.main()
