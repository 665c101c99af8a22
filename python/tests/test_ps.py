"""Tests of spindle.ps, the parameter server's Python client.

The tests of calls need a real proxy with real servers behind it: the Go
test ps/proxy TestPythonClient starts them and runs this file with
SPINDLE_TEST_PS_SOCKET (worker 0) and SPINDLE_TEST_PS_SOCKET_LEAVE (worker
1) set; run alone, those tests are skipped and only the ones without a
proxy run.
"""

import os
import unittest
from unittest import mock

import numpy as np

import support  # also puts the checkout's package first on sys.path

from spindle import ps
from spindle._errors import EnvError, SpindleError

try:
    import torch
except ImportError:
    torch = None

SOCKET = os.environ.get("SPINDLE_TEST_PS_SOCKET", "")
LEAVE_SOCKET = os.environ.get("SPINDLE_TEST_PS_SOCKET_LEAVE", "")
need_proxy = unittest.skipUnless(SOCKET, "needs a proxy: run by go test ./ps/proxy -run TestPythonClient")


class WithoutProxyTest(unittest.TestCase):
    def test_connect_without_parameter_server(self):
        env = {k: v for k, v in os.environ.items() if k != ps.SOCKET}
        with mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaises(EnvError) as cm:
                ps.connect()
        self.assertIn("SPINDLE_PS_SOCKET is not set", str(cm.exception))
        self.assertIn("--num-ps", str(cm.exception))

    def test_connect_to_nothing(self):
        d = support.short_tempdir(self)
        path = os.path.join(d, "ps.sock")
        with mock.patch.dict(os.environ, {ps.SOCKET: path}):
            with self.assertRaises(ps.PSError) as cm:
                ps.connect()
        self.assertIn(path, str(cm.exception))
        self.assertIsInstance(cm.exception, SpindleError)

    def test_keys_checked_before_sending(self):
        with self.assertRaisesRegex(ValueError, "table emb: key -3 is negative"):
            ps._as_keys(np.array([1, -3]), "emb")
        with self.assertRaisesRegex(TypeError, "float64"):
            ps._as_keys(np.array([1.5]), "emb")
        k = np.arange(6, dtype=np.uint64)
        self.assertTrue(np.shares_memory(ps._as_keys(k, "emb"), k), "uint64 keys were copied")
        np.testing.assert_array_equal(ps._as_keys([[1, 2], [3, 4]], "emb"), np.array([1, 2, 3, 4], dtype=np.uint64))


@need_proxy
class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ps = ps.Client(SOCKET, timeout=support.scaled(20))
        cls.ps.declare("t", 3, optimizer="sgd", lr=1.0)

    @classmethod
    def tearDownClass(cls):
        cls.ps._sock.close()  # not close(): worker 0 stays in the job for the other tests

    def test_pull_push_round_trip(self):
        keys = np.array([0, 7, 2**63 + 5, 2**64 - 1, 123456789], dtype=np.uint64)
        rows = self.ps.pull("t", keys)
        self.assertEqual(rows.dtype, np.float32)
        self.assertEqual(rows.shape, (5, 3))
        self.assertTrue(rows.flags.writeable)
        grads = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
        self.ps.push("t", keys, grads)
        np.testing.assert_array_equal(self.ps.pull("t", keys), rows - grads)

    def test_keys_of_any_shape_and_integer_dtype(self):
        ids = np.array([[11, 12], [13, 11]], dtype=np.int32)
        before = self.ps.pull("t", ids)
        self.assertEqual(before.shape, (2, 2, 3))
        self.ps.push("t", ids, np.ones((2, 2, 3), dtype=np.float64))
        after = self.ps.pull("t", ids)
        np.testing.assert_array_equal(after[0, 0], before[0, 0] - 2)  # key 11 was pushed twice
        np.testing.assert_array_equal(after[0, 1], before[0, 1] - 1)
        self.assertEqual(self.ps.pull("t", np.array([], dtype=np.uint64)).shape, (0, 3))

    def test_bad_pushes_apply_nothing(self):
        keys = np.array([101, 102], dtype=np.uint64)
        before = self.ps.pull("t", keys)
        with self.assertRaisesRegex(ValueError, r"push 2 keys of table t \(dim 3\).*nothing applied"):
            self.ps.push("t", keys, np.ones((2, 2), dtype=np.float32))
        bad = np.ones((2, 3), dtype=np.float32)
        bad[1, 2] = np.nan
        with self.assertRaisesRegex(ValueError, "gradient of key 102 holds nan; nothing applied"):
            self.ps.push("t", keys, bad)
        with self.assertRaisesRegex(TypeError, "gradients of dtype"):
            self.ps.push("t", keys, np.array(["a", "b"]))
        with self.assertRaisesRegex(ps.PSError, 'table "nope": declare it first'):
            self.ps.push("nope", keys, np.ones((2, 3), dtype=np.float32))
        np.testing.assert_array_equal(self.ps.pull("t", keys), before)

    def test_server_errors_name_the_table(self):
        with self.assertRaisesRegex(ps.PSError, 'table "nope": declare it first'):
            self.ps.pull("nope", [1])
        with self.assertRaisesRegex(ps.PSError, "table t is declared already with another spec"):
            self.ps.declare("t", 4, optimizer="sgd", lr=1.0)
        with self.assertRaisesRegex(ps.PSError, r'table "x".*optimizer "rmsprop"'):
            self.ps.declare("x", 2, optimizer="rmsprop")
        with self.assertRaisesRegex(ps.PSError, r'table "x".*dim 0'):
            self.ps.declare("x", 0)
        with self.assertRaisesRegex(TypeError, "unknown optimizer parameter 'momentum'"):
            self.ps.declare("x", 2, momentum=0.9)
        # The connection goes on after errors.
        self.assertEqual(self.ps.pull("t", [5]).shape, (1, 3))

    def test_dense_table(self):
        self.ps.declare("dense", 2, optimizer="sgd", lr=0.5, rows=10, initializer="uniform", scale=0.1, seed=3)
        rows = self.ps.pull("dense", np.arange(10))
        self.assertTrue(np.all(np.abs(rows) <= 0.1) and np.any(rows != 0))
        with self.assertRaisesRegex(ps.PSError, "row 10 outside its 10 rows"):
            self.ps.pull("dense", [10])

    def test_clock_and_stats(self):
        steps = self.ps.clock()
        self.assertEqual(self.ps.clock(), steps + 1)
        st = self.ps.stats()
        self.assertEqual(st["worker"], 0)
        self.assertEqual(st["clock"], steps + 1)
        self.assertEqual(len(st["servers"]), 2)
        names = {t["name"] for s in st["servers"] for t in s["tables"]}
        self.assertIn("t", names)
        self.assertGreater(sum(t["keys"] for s in st["servers"] for t in s["tables"] if t["name"] == "t"), 0)

    def test_export(self):
        import tempfile
        self.ps.declare("ex", 2, optimizer="sgd", lr=1.0)
        self.ps.push("ex", np.arange(50, dtype=np.uint64), np.ones((50, 2), dtype=np.float32))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ex.parquet")
            self.assertEqual(self.ps.export("ex", path), 50)
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual(data[:4], b"PAR1")
            self.assertEqual(data[-4:], b"PAR1")
        with self.assertRaisesRegex(ps.PSError, "declare it first"):
            self.ps.export("never-declared", "/tmp/x.parquet")

    def test_forked_child_must_connect_anew(self):
        pid = os.fork()
        if pid == 0:
            try:
                self.ps.pull("t", [1])
                os._exit(1)
            except ps.PSError as e:
                os._exit(0 if "call spindle.ps.connect() in each process" in str(e) else 2)
            except BaseException:  # noqa: BLE001 - the child must not return into unittest
                os._exit(3)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the child's call was not refused as it should be")
        self.assertEqual(self.ps.pull("t", [1]).shape, (1, 3))  # the parent's connection is intact

    def test_threads_take_turns(self):
        import threading
        keys = np.arange(1000, 1100, dtype=np.uint64)
        errors = []

        def pull():
            try:
                for _ in range(20):
                    self.assertEqual(self.ps.pull("t", keys).shape, (100, 3))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=pull) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


@need_proxy
@unittest.skipIf(torch is None, "needs torch")
class EmbeddingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ps = ps.Client(SOCKET, timeout=support.scaled(20))

    @classmethod
    def tearDownClass(cls):
        cls.ps._sock.close()

    def test_forward_pulls_backward_pushes_summed_gradients(self):
        emb = ps.Embedding(self.ps, "emb", 4, optimizer="sgd", lr=1.0, initializer="normal", scale=0.5, seed=1)
        ids = torch.tensor([[1, 2], [2, 3]])
        out = emb(ids)
        self.assertEqual(tuple(out.shape), (2, 2, 4))
        self.assertTrue(out.requires_grad)
        before = self.ps.pull("emb", [1, 2, 3])
        np.testing.assert_array_equal(out.detach().numpy()[0, 1], before[1])
        (out * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
        after = self.ps.pull("emb", [1, 2, 3])
        step = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
        # Key 2 appears twice: its pushed gradient is the sum.
        np.testing.assert_allclose(after, before - np.stack([step, 2 * step, step]), rtol=1e-6)

    def test_no_grad_pushes_nothing(self):
        emb = ps.Embedding(self.ps, "emb2", 2, optimizer="sgd", lr=1.0)
        with torch.no_grad():
            out = emb(torch.tensor([5, 6]))
        self.assertFalse(out.requires_grad)
        pushes = sum(t["pushes"] for s in self.ps.stats()["servers"] for t in s["tables"] if t["name"] == "emb2")
        self.assertEqual(pushes, 0)

    def test_trains_with_a_torch_optimizer(self):
        # Fit one row per id to a target vector: the table's rows move
        # through the servers' optimizer, the head's through torch's.
        torch.manual_seed(0)
        emb = ps.Embedding(self.ps, "fit", 3, optimizer="adagrad", lr=0.3)
        head = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(head.parameters(), lr=0.1)
        ids = torch.arange(20)
        target = (ids % 2).float() * 2 - 1
        first = None
        for _ in range(60):
            loss = ((head(emb(ids)).squeeze(-1) - target) ** 2).mean()
            first = first if first is not None else loss.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
            self.ps.clock()
        self.assertLess(loss.item(), first / 10)

    def test_bad_ids(self):
        emb = ps.Embedding(self.ps, "emb_bad", 4)
        with self.assertRaisesRegex(TypeError, "ids of dtype torch.float32"):
            emb(torch.tensor([1.0]))
        with self.assertRaisesRegex(ValueError, "key -1 is negative"):
            emb(torch.tensor([-1, 2]))
        with self.assertRaisesRegex(ValueError, "declared with dim 4, not 5"):
            ps.Embedding(self.ps, "emb_bad", 5)
        with self.assertRaisesRegex(ps.PSError, "table emb_bad is declared already with another spec"):
            ps.Embedding(self.ps, "emb_bad", 4, optimizer="adam")


@unittest.skipUnless(LEAVE_SOCKET, "needs a proxy: run by go test ./ps/proxy -run TestPythonClient")
class LeaveTest(unittest.TestCase):
    def test_close_leaves(self):
        with mock.patch.dict(os.environ, {ps.SOCKET: LEAVE_SOCKET}):
            c = ps.connect(timeout=support.scaled(20))
        c.declare("t", 3, optimizer="sgd", lr=1.0)
        c.clock()
        c.close()
        c.close()  # twice is fine
        with self.assertRaisesRegex(ps.PSError, "closed"):
            c.pull("t", [1])
        # Another connection of the same worker is refused: it has left.
        again = ps.Client(LEAVE_SOCKET, timeout=support.scaled(20))
        with self.assertRaisesRegex(ps.PSError, "has left the parameter servers"):
            again.clock()
        again._sock.close()


if __name__ == "__main__":
    unittest.main()
