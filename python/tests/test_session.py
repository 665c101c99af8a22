"""spindle.Session against real local Spindle jobs: warm ranks fork a fresh process per job.

Needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV; `make
test-python` runs this file there).
"""

import json
import os
import socket
import sys
import unittest

import support

import spindle
from spindle import _zygote

try:
    import cloudpickle  # noqa: F401
except ImportError:
    cloudpickle = None


def probe(leave):
    """On a rank: what the process sees when the job's code starts, and a mark left in a preloaded module."""
    import os
    import sys
    seen = {"pid": os.getpid(), "ppid": os.getppid(), "rank": int(os.environ["SPINDLE_RANK"]),
            "preloaded": "wave" in sys.modules, "master_port": os.environ.get("MASTER_PORT")}
    wave = sys.modules.get("wave")
    seen["mark"] = getattr(wave, "spindle_test_mark", None)
    if leave:
        wave.spindle_test_mark = leave
    return seen


def fail_on_one():
    import os
    if os.environ["SPINDLE_RANK"] == "1":
        raise ValueError("rank one is broken in this job")
    return "ok"


@unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
class SessionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(cls)
        # wave: a standard module nothing imports on its own, as torch is
        # for the jobs that matter.
        cls.session = spindle.Session(num_executors=2, preload=["wave"], stream=False)

    @classmethod
    def tearDownClass(cls):
        cls.session.close()

    def test_each_job_forks_from_the_warm_rank(self):
        s = self.session
        first = s.run(probe, "job one was here", all_ranks=True)
        second = s.run(probe, None, all_ranks=True)
        for job in (first, second):
            self.assertEqual([r["rank"] for r in job], [0, 1])
            for r, seen in enumerate(job):
                # A child of the rank's zygote, which imported the
                # preloaded module before any job ran.
                self.assertEqual(seen["ppid"], s.zygotes[r], f"rank {r} did not run in a child of its warm process")
                self.assertTrue(seen["preloaded"], f"rank {r}: the preloaded module was not imported")
        for r in range(2):
            self.assertNotEqual(first[r]["pid"], second[r]["pid"], "the second job reused the first's process")
            self.assertIsNone(second[r]["mark"], "state the first job left in its process reached the second")
        self.assertNotEqual(first[0]["master_port"], second[0]["master_port"])
        self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")

    def test_failure_names_the_rank(self):
        with self.assertRaises(spindle.SpindleError) as cm:
            self.session.run(fail_on_one)
        self.assertIn("rank 1 failed", str(cm.exception))
        self.assertIn("ValueError: rank one is broken", str(cm.exception))
        self.assertEqual(self.session.run(probe, None)["rank"], 0, "the session runs the next job after a failed one")

    def test_request_without_token_is_refused(self):
        path = _zygote.socket_path(self.session._dir, 0)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(path)
            c.sendall(json.dumps({"op": "run", "work": "/nonexistent", "token": "guess"}).encode() + b"\n")
            answer = json.loads(c.makefile("rb").readline())
        self.assertIn("refused", answer.get("error", ""))
        self.assertEqual(os.stat(self.session._dir).st_mode & 0o777, 0o700)


class SessionArgsTest(unittest.TestCase):
    def test_cluster_master_is_refused(self):
        with self.assertRaisesRegex(spindle.SpindleError, "local master"):
            spindle.Session(master="yarn", num_executors=2)


if __name__ == "__main__":
    unittest.main()
