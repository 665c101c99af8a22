import json
import os
import socket
import tempfile
import unittest

import support  # noqa: F401  (puts the package on sys.path)

import spindle
from spindle import _contract


class ReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "report.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(5)
        self.old = os.environ.get(_contract.REPORT_SOCKET)

    def tearDown(self):
        from spindle import _report
        if _report._sock is not None:
            _report._sock.close()
            _report._sock = None
        self.sock.close()
        self.dir.cleanup()
        if self.old is None:
            os.environ.pop(_contract.REPORT_SOCKET, None)
        else:
            os.environ[_contract.REPORT_SOCKET] = self.old

    def test_world_batches_carry_the_membership_version(self):
        os.environ[_contract.REPORT_SOCKET] = self.path
        members = os.path.join(self.dir.name, "membership.json")
        with open(members, "w") as f:
            json.dump({"version": 2, "peers": ["a:1", "b:1", "c:1"], "incarnations": [2, 0, 0], "joined": -1, "left": [1]}, f)
        old = os.environ.get(_contract.MEMBERSHIP)
        os.environ[_contract.MEMBERSHIP] = members
        try:
            self.assertTrue(spindle.report_world_batches(1, 21))
        finally:
            if old is None:
                os.environ.pop(_contract.MEMBERSHIP, None)
            else:
                os.environ[_contract.MEMBERSHIP] = old
        msg = json.loads(self.sock.recv(4096))
        self.assertEqual(msg, {"world_batches": {"version": 2, "epoch": 1, "batches": 21}})
        with self.assertRaises(ValueError):
            os.environ[_contract.MEMBERSHIP] = members
            try:
                spindle.report_world_batches(-1, 0)
            finally:
                os.environ.pop(_contract.MEMBERSHIP, None)

    def test_world_batches_need_a_membership(self):
        os.environ[_contract.REPORT_SOCKET] = self.path
        os.environ.pop(_contract.MEMBERSHIP, None)
        self.assertFalse(spindle.report_world_batches(0, 3))

    def test_outside_spindle_does_nothing(self):
        os.environ.pop(_contract.REPORT_SOCKET, None)
        self.assertFalse(spindle.report(step=1, loss=0.5))

    def test_sends_one_datagram(self):
        os.environ[_contract.REPORT_SOCKET] = self.path
        self.assertTrue(spindle.report(step=3, loss=0.5, acc=1, skipped=float("nan")))
        msg = json.loads(self.sock.recv(4096))
        self.assertEqual(msg["step"], 3)
        self.assertEqual(msg["values"], {"loss": 0.5, "acc": 1.0})
        self.assertGreater(msg["time"], 0)

    def test_numpy_scalars(self):
        import numpy as np
        os.environ[_contract.REPORT_SOCKET] = self.path
        self.assertTrue(spindle.report(loss=np.float32(0.25)))
        msg = json.loads(self.sock.recv(4096))
        self.assertEqual(msg["values"], {"loss": 0.25})
        self.assertNotIn("step", msg)

    def test_not_a_number(self):
        os.environ[_contract.REPORT_SOCKET] = self.path
        with self.assertRaises(TypeError):
            spindle.report(loss="low")

    def test_full_queue_drops(self):
        os.environ[_contract.REPORT_SOCKET] = self.path
        results = [spindle.report(step=i, loss=1.0) for i in range(100000)]
        self.assertIn(False, results)


if __name__ == "__main__":
    unittest.main()
