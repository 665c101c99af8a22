"""Runs examples/pytorch/train.py for real: two ranks, DDP over gloo, each fed its shard over a socket.

The feed servers here stand in for the executors (the Go executor's own
end-to-end tests run the example under ``spindle submit``); the training
processes, torch.distributed and gloo are all real.
"""

import hashlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import unittest

import support

from spindle import _tensor

try:
    import torch
except ImportError:
    torch = None

TRAIN = os.path.join(support.REPO_DIR, "examples", "pytorch", "train.py")
FEATURES = [f"f{i}" for i in range(8)]
FINAL = re.compile(r"^final rank=(\d+) loss=([\d.]+) accuracy=([\d.]+) params_sha256=([0-9a-f]{64})$", re.M)
EPOCH = re.compile(r"^rank=(\d+) epoch=(\d+) loss=([\d.]+) accuracy=([\d.]+) rows=(\d+)", re.M)


free_port = support.free_port


class Rank:
    """One training process, its output collected line by line."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.stdout, self.stderr = [], []
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, True)),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr, False))]
        for t in self._threads:
            t.start()

    def _pump(self, f, out, notify):
        for line in f:
            out.append(line)
            if notify:
                self.lines.put(line)
        f.close()

    def wait_for_line(self, pattern, timeout):
        budget = support.Budget(timeout)
        while not budget.spent():
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} within {budget}; stderr:\n{''.join(self.stderr)}")

    def wait(self, timeout):
        code = self.proc.wait(timeout=support.scaled(timeout))
        for t in self._threads:
            t.join(timeout=10)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait(30)

    @property
    def output(self):
        return "".join(self.stdout)


@unittest.skipIf(torch is None, "torch is not installed")
class PyTorchExampleTest(unittest.TestCase):
    def start(self, world, epochs, rows_per_rank, batch_rows, timeout="10"):
        """Start world ranks of the example, rank r fed rows r, r+world, ... in batches of batch_rows."""
        x, y, bayes = support.logistic_data(world * rows_per_rank, len(FEATURES), seed=11)
        tmp = support.short_tempdir(self)
        ckpt = os.path.join(tmp, "ckpt")
        port = str(free_port())
        ranks = []
        for r in range(world):
            xs, ys = x[r::world], y[r::world]
            batches = [(xs[i:i + batch_rows], ys[i:i + batch_rows]) for i in range(0, len(xs), batch_rows)]
            body = support.tensor_frames(batches)

            def stream(k, body=body):
                if k >= epochs:
                    return support.tensor_stream(-1, FEATURES, "label")
                return _tensor.encode_header(k, FEATURES, "label") + body + _tensor.END_OF_EPOCH

            srv = support.FeedServer(os.path.join(tmp, f"r{r}.sock"), stream)
            self.addCleanup(srv.close)
            env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, PYTHONUNBUFFERED="1",
                       SPINDLE_RANK=str(r), SPINDLE_WORLD_SIZE=str(world), SPINDLE_LOCAL_RANK=str(r),
                       SPINDLE_LOCAL_WORLD_SIZE=str(world), SPINDLE_JOB_ID="test-job", SPINDLE_FEED=srv.path,
                       SPINDLE_FEED_MODE="tensor", SPINDLE_CHECKPOINT_DIR=ckpt, SPINDLE_COLLECTIVE_TIMEOUT=timeout,
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r), WORLD_SIZE=str(world),
                       LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(world))
            rank = Rank([sys.executable, TRAIN, "--threads", "1"], env)
            self.addCleanup(rank.kill)
            ranks.append(rank)
        return ranks, bayes, ckpt

    def test_two_ranks_converge_to_equal_parameters(self):
        epochs = 3
        ranks, bayes, ckpt = self.start(world=2, epochs=epochs, rows_per_rank=3000, batch_rows=100)
        for r, rank in enumerate(ranks):
            self.assertEqual(rank.wait(240), 0, f"rank {r} failed:\n{''.join(rank.stderr)}")
        finals = [FINAL.search(rank.output) for rank in ranks]
        for r, m in enumerate(finals):
            self.assertIsNotNone(m, f"rank {r} printed no final line:\n{ranks[r].output}")
            self.assertEqual(int(m.group(1)), r)
        self.assertEqual(finals[0].group(4), finals[1].group(4), "ranks ended with different parameters")
        loss, accuracy = float(finals[0].group(2)), float(finals[0].group(3))
        self.assertGreater(accuracy, bayes - 0.04, f"accuracy {accuracy} is far below the Bayes rate {bayes}")
        self.assertLess(loss, 0.45)
        per_rank = [[m.groups()[1:] for m in EPOCH.finditer(rank.output)] for rank in ranks]
        self.assertEqual([int(e[0]) for e in per_rank[0]], list(range(epochs)))
        self.assertEqual(per_rank[0], per_rank[1], "epoch figures are averaged over every rank")
        self.assertEqual(per_rank[0][-1][3], "6000")

        # Rank 0 saved the final model.
        state = torch.load(os.path.join(ckpt, "model.pt"))
        self.assertEqual(state["epochs"], epochs)
        flat = torch.cat([t.reshape(-1).to(torch.float32) for t in state["model"].values()])
        self.assertEqual(hashlib.sha256(flat.numpy().tobytes()).hexdigest(), finals[0].group(4))
        self.assertEqual(os.listdir(ckpt), ["model.pt"])

    def test_lost_peer_stops_the_survivor(self):
        """Rank 1 killed or frozen mid-training: rank 0 fails within the collective timeout."""
        for sig in (signal.SIGKILL, signal.SIGSTOP):
            with self.subTest(signal=sig.name):
                ranks, _, _ = self.start(world=2, epochs=100000, rows_per_rank=256, batch_rows=32, timeout="3")
                ranks[1].wait_for_line(r"^rank=1 epoch=1 ", timeout=120)
                ranks[1].proc.send_signal(sig)
                code = ranks[0].wait(90)  # far above the 3-second timeout, far below torch's 30 minutes
                self.assertNotEqual(code, 0)
                self.assertIn("rank=0 training failed:", "".join(ranks[0].stderr))
                ranks[1].kill()


if __name__ == "__main__":
    unittest.main()
