import json
import os
import socket
import tempfile
import threading
import unittest

import support  # noqa: F401  (puts the package on sys.path)

from spindle import _contract, _timeline


class TimelineTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "report.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.old = {k: os.environ.get(k) for k in (_contract.REPORT_SOCKET, _contract.TIMELINE)}
        os.environ[_contract.REPORT_SOCKET] = self.path
        os.environ[_contract.TIMELINE] = "1"
        self._reset()

    def tearDown(self):
        if _timeline._state["sock"] is not None:
            _timeline._state["sock"].close()
        self._reset()
        self.sock.close()
        self.dir.cleanup()
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def _reset(self):
        _timeline._state.update({"enabled": None, "path": None, "sock": None, "pending": [], "last": 0.0})

    def _receive_all(self, out, stop):
        # Reads until stopped and then the queue is empty.
        self.sock.settimeout(0.2)
        while True:
            try:
                out.extend(json.loads(self.sock.recv(1 << 20))["spans"])
            except socket.timeout:
                if stop.is_set():
                    return

    def test_full_queue_keeps_spans_for_the_last_send(self):
        # Nobody reads while the process records: the socket's queue fills,
        # and what does not fit must wait for later sends, not be dropped.
        n = 5000
        for i in range(n):
            _timeline.record("feed", "wait %d" % i, 1.0 + i, 1.5 + i)
        self.assertTrue(_timeline._state["pending"], "the queue never filled: the test shows nothing")
        got, stop = [], threading.Event()
        reader = threading.Thread(target=self._receive_all, args=(got, stop))
        reader.start()
        _timeline._flush_at_exit()
        stop.set()
        reader.join()
        self.assertEqual([s["name"] for s in got], ["wait %d" % i for i in range(n)])
        self.assertEqual(_timeline._state["pending"], [])

    def test_gone_executor_drops_spans(self):
        _timeline.record("feed", "wait", 1.0, 2.0)
        self.sock.close()
        os.unlink(self.path)
        _timeline._flush_at_exit()
        self.assertEqual(_timeline._state["pending"], [])


if __name__ == "__main__":
    unittest.main()
