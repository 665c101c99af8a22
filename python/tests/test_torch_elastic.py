"""Tests of spindle.torch's going on in place: reform and catch_up with real gloo processes.

The test plays the executors' part: it starts four training processes
(e2e/torchshrink/train.py) with the environment and membership file an
executor gives them, SIGKILLs one, and writes the smaller membership the
driver would send, as the executors do; or, as under
spindle.failure.replaceWorkers, a membership of the same size naming a
replacement, which it starts; or, as under spindle.failure.growInPlace,
a bigger membership naming a newcomer, which it starts.
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import unittest

import support

try:
    import torch
except ImportError:  # the whole module is skipped
    torch = None

if torch is not None:
    import spindle.torch as st

from test_torch import free_port, run_python

TRAINER = os.path.join(support.REPO_DIR, "e2e", "torchshrink", "train.py")
FINAL = re.compile(r"torchshrink final pid=(\d+) rank=(\d+) world=(\d+) steps=(\d+) params_sha256=(\w+)")
WENT = re.compile(r"torchshrink went on pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+)")
REPLACED = re.compile(r"torchshrink replaced pid=(\d+) rank=(\d+) world=(\d+) step=(\d+)")
GREW = re.compile(r"torchshrink grew pid=(\d+) rank=(\d+) world=(\d+) was=(\d+)/(\d+)")


def write_membership(path, version, peers, services, left=None, joined=0):
    m = {"version": version, "peers": peers, "services": services, "incarnations": [0] * len(peers),
         "joined": -1 if left else joined}
    if left:
        m["left"] = left
        m["incarnations"][0] = version
    elif version:
        m["incarnations"][joined] = version
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(m, f)
    os.replace(tmp, path)


def said(test, out, line, want):
    """Check that out has line's (WENT's or GREW's) with rank, world, was rank and was world as in want."""
    m = line.search(out)
    test.assertIsNotNone(m, out)
    test.assertEqual(tuple(int(g) for g in m.groups()[1:5]), want, out)


def collective_timeout():
    """The ranks' SPINDLE_COLLECTIVE_TIMEOUT: a newcomer's torch import and gloo's connect take
    seconds on a loaded machine (at 20 s, gloo's init of a grown world timed out beside the other
    tiers of make test), scaled as every test timing is."""
    return str(int(60 * support.timescale()))


class Gang:
    """Four trainer processes on loopback, with the files an executor writes them."""

    def __init__(self, test, n=4, steps=150, extra=()):
        self.dir = tempfile.mkdtemp(prefix="spel")
        self.membership = os.path.join(self.dir, "membership.json")
        self.peers = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        self.services = [f"127.0.0.1:{free_port()}" for _ in range(n)]
        write_membership(self.membership, 0, self.peers, self.services)
        self.steps, self.extra = steps, extra
        self.procs, self.logs = [], []
        for r in range(n):
            self.start(r)
        test.addCleanup(self.close)

    def start(self, r, replacement=0):
        """Start rank r's training process (the kth replacement of its rank when replacement is k); its index in procs."""
        n = len(self.peers)
        env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=self.services[0].rpartition(":")[2], RANK=str(r), WORLD_SIZE=str(n),
                   SPINDLE_RANK=str(r), SPINDLE_WORLD_SIZE=str(n), SPINDLE_MEMBERSHIP=self.membership,
                   SPINDLE_COLLECTIVE_TIMEOUT=collective_timeout(), SPINDLE_REPLACEMENT=str(replacement))
        log = open(os.path.join(self.dir, f"rank{r}.{replacement}.log"), "w+", encoding="utf-8")
        self.logs.append(log)
        self.procs.append(subprocess.Popen([sys.executable, TRAINER, "--steps", str(self.steps), *self.extra],
                                           stdout=log, stderr=subprocess.STDOUT, env=env))
        return len(self.procs) - 1

    def out(self, r):
        with open(self.logs[r].name, encoding="utf-8") as f:
            return f.read()

    def ended(self, test, i, rank, world):
        """Wait for procs[i], check it exited 0 as rank of world after every step; its output and model's hash."""
        p = self.procs[i]
        test.assertEqual(p.wait(timeout=support.scaled(120)), 0, self.out(i))
        out = self.out(i)
        m = FINAL.search(out)
        test.assertIsNotNone(m, out)
        test.assertEqual((int(m[1]), int(m[2]), int(m[3]), int(m[4])), (p.pid, rank, world, self.steps), out)
        return out, m[5]

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()

    def shrink(self, lost):
        """Kill rank lost's process and publish the survivors' membership, as the driver and executors do."""
        self.procs[lost].send_signal(signal.SIGKILL)
        self.procs[lost].wait()
        keep = [r for r in range(len(self.peers)) if r != lost]
        write_membership(self.membership, 1, [self.peers[r] for r in keep], [self.services[r] for r in keep],
                         left=[lost])
        return keep

    def replace(self, lost):
        """Kill rank lost's process, publish a membership naming its replacement and start it, as the driver and
        executors do under replaceWorkers; the replacement's index in procs."""
        self.procs[lost].send_signal(signal.SIGKILL)
        self.procs[lost].wait()
        # The replacement's executor has new ports: its peer address, and its rendezvous address, where a
        # replaced rank 0 hosts the group's next store.
        self.peers[lost], self.services[lost] = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        write_membership(self.membership, 1, self.peers, self.services, joined=lost)
        return self.start(lost, replacement=1)

    def grow(self):
        """Publish a membership with a newcomer's rank after the others' and start it, as the driver and executors
        do under growInPlace; the newcomer's index in procs."""
        self.peers.append(f"127.0.0.1:{free_port()}")
        self.services.append(f"127.0.0.1:{free_port()}")
        write_membership(self.membership, 1, self.peers, self.services, joined=len(self.peers) - 1)
        return self.start(len(self.peers) - 1, replacement=1)


@unittest.skipIf(torch is None, "torch is not installed")
class ReformTest(unittest.TestCase):
    def go_on_without(self, lost, extra=()):
        gang = Gang(self, extra=extra)
        support.wait_for("the four ranks to train 50 steps", lambda: all("step=50" in gang.out(r) for r in range(4)))
        keep = gang.shrink(lost)
        finals = {}
        for new, old in enumerate(keep):
            out, finals[old] = gang.ended(self, old, new, 3)
            said(self, out, WENT, (new, 3, old, 4))
        self.assertEqual(len(set(finals.values())), 1, f"the survivors' models differ: {finals}")

    def test_survivors_go_on_without_rank_1(self):
        self.go_on_without(1)

    def test_survivors_go_on_without_rank_0(self):
        """Rank 0 hosted the group's store: the new rank 0 hosts the next one on its own port."""
        self.go_on_without(0)

    def test_ddp_module_goes_on(self):
        self.go_on_without(2, extra=("--ddp",))

    def go_on_with_replacement(self, lost, extra=()):
        gang = Gang(self, extra=extra)
        support.wait_for("the four ranks to train 50 steps", lambda: all("step=50" in gang.out(r) for r in range(4)))
        new = gang.replace(lost)
        finals = {}
        for i in [r for r in range(4) if r != lost] + [new]:
            out, finals[i] = gang.ended(self, i, i if i != new else lost, 4)
            if i == new:
                went = REPLACED.search(out)
                self.assertIsNotNone(went, out)
                self.assertGreaterEqual(int(went[4]), 50, f"the replacement did not start from a survivor's step:\n{out}")
            else:
                said(self, out, WENT, (i, 4, i, 4))
        self.assertEqual(len(set(finals.values())), 1, f"the ranks' models differ: {finals}")

    def test_survivors_go_on_with_rank_1_replaced(self):
        """Under replaceWorkers: the three survivors keep their processes and ranks, the replacement catches up."""
        self.go_on_with_replacement(1, extra=("--ddp",))

    def test_survivors_go_on_with_rank_0_replaced(self):
        """The lost rank 0 hosted the group's store: its replacement hosts the next one on its new port."""
        self.go_on_with_replacement(0)


@unittest.skipIf(torch is None, "torch is not installed")
class GrowTest(unittest.TestCase):
    def test_a_world_of_3_grows_to_4(self):
        """Under growInPlace: the three keep their processes and ranks, the newcomer joins as rank 3 and catches up."""
        gang = Gang(self, n=3, extra=("--grow", "--ddp"))
        support.wait_for("the three ranks to train 50 steps", lambda: all("step=50" in gang.out(r) for r in range(3)))
        new = gang.grow()
        finals = {}
        for i in range(4):
            out, finals[i] = gang.ended(self, i, i, 4)
            if i == new:
                joined = REPLACED.search(out)
                self.assertIsNotNone(joined, out)
                self.assertGreaterEqual(int(joined[4]), 50, f"the newcomer did not start from the others' step:\n{out}")
            else:
                said(self, out, GREW, (i, 4, i, 3))
        self.assertEqual(len(set(finals.values())), 1, f"the ranks' models differ: {finals}")

    def test_a_rank_whose_membership_lags_waits_for_it(self):
        """Rank 0's executor hears of the newcomer first: rank 1 waits for its own file, then all three grow."""
        # The real wait_membership, announced, so the test writes rank 1's file only once rank 1 waits for it.
        code = ("import spindle, torch, spindle.torch as st, spindle._env as env\n"
                "wait = env.wait_membership\n"
                "def announced(after, timeout=None):\n"
                "    print('waiting for version', after + 1, flush=True)\n"
                "    return wait(after, timeout=timeout)\n"
                "env.wait_membership = announced\n"
                "st.init_process_group()\n"
                "rank = torch.distributed.get_rank()\n"
                "print('formed', rank, flush=True)\n"
                "net = torch.nn.Linear(2, 1)\n"
                "torch.nn.init.constant_(net.weight, 1.0 + rank)\n"
                "step, grew = (st.catch_up(0, net), True) if spindle.replacement() else (7, False)\n"
                "while not grew:\n"
                "    step, grew = st.grow(step, net)\n"
                "print('grew', rank, torch.distributed.get_world_size(), step, net.weight.flatten().tolist(), flush=True)\n"
                "st.finish(exit_status=0)\n")
        d = support.short_tempdir(self)
        peers = [f"127.0.0.1:{free_port()}" for _ in range(3)]
        services = [f"127.0.0.1:{free_port()}" for _ in range(3)]
        files = [os.path.join(d, f"membership{r}.json") for r in range(3)]
        for f in files[:2]:
            write_membership(f, 0, peers[:2], services[:2])
        procs = []

        def start(r, world, replacement=0):
            log = open(os.path.join(d, f"rank{r}.log"), "w+", encoding="utf-8")
            self.addCleanup(log.close)
            env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=services[0].rpartition(":")[2], RANK=str(r), WORLD_SIZE=str(world),
                       SPINDLE_MEMBERSHIP=files[r], SPINDLE_COLLECTIVE_TIMEOUT=collective_timeout(), SPINDLE_REPLACEMENT=str(replacement))
            p = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT, env=env)
            self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
            procs.append((p, log.name))

        def out(r):
            with open(procs[r][1], encoding="utf-8") as f:
                return f.read()

        start(0, 2)
        start(1, 2)
        support.wait_for("the two ranks to form their group", lambda: all("formed" in out(r) for r in range(2)))
        for f in (files[0], files[2]):
            write_membership(f, 1, peers, services, joined=2)
        start(2, 3, replacement=1)
        support.wait_for("rank 1 to wait for the bigger membership", lambda: "waiting for version 1" in out(1))
        self.assertNotIn("grew", out(1))
        write_membership(files[1], 1, peers, services, joined=2)
        for r, (p, _) in enumerate(procs):
            self.assertEqual(p.wait(timeout=support.scaled(120)), 0, out(r))
            self.assertIn(f"grew {r} 3 7 [1.0, 1.0]", out(r))


@unittest.skipIf(torch is None, "torch is not installed")
class CatchUpTest(unittest.TestCase):
    def test_a_survivors_state_wins_over_a_replacements(self):
        """A replacement that loaded a checkpoint claiming more steps still takes the survivor's state."""
        code = ("import torch, spindle.torch as st, spindle._torch_elastic as el, sys\n"
                "st.init_process_group()\n"
                "rank = torch.distributed.get_rank()\n"
                "el._fresh = rank == 1  # as join_replacement leaves a replacement\n"
                "net = torch.nn.Linear(2, 1)\n"
                "torch.nn.init.constant_(net.weight, 1.0 + rank)\n"
                "step = st.catch_up(5 if rank == 0 else 9, net)\n"
                "print('caught up', rank, step, net.weight.flatten().tolist(), flush=True)\n"
                "st.finish(exit_status=0)\n")
        port = str(free_port())
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=dict(os.environ, PYTHONPATH=support.PYTHON_DIR, MASTER_ADDR="127.0.0.1",
                                           MASTER_PORT=port, RANK=str(r), WORLD_SIZE="2"))
                 for r in range(2)]
        for r, p in enumerate(procs):
            out, _ = p.communicate(timeout=support.scaled(120))
            self.assertEqual(p.returncode, 0, out)
            self.assertIn(f"caught up {r} 5 [1.0, 1.0]", out)


@unittest.skipIf(torch is None, "torch is not installed")
class PassThroughTest(unittest.TestCase):
    def test_other_failures_are_raised_unchanged(self):
        for err in (RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x1)"), ValueError("bad"),
                    KeyError("w")):
            with self.subTest(err=err):
                with self.assertRaises(type(err)) as cm:
                    st.reform(err)
                self.assertIs(cm.exception, err)
                self.assertFalse(getattr(err, "__notes__", None))

    def test_peer_lost(self):
        self.assertTrue(st.peer_lost(RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
                                                  "Connection closed by peer [127.0.0.1]:4242")))
        self.assertFalse(st.peer_lost(RuntimeError("CUDA out of memory")))
        self.assertFalse(st.peer_lost(OSError("Connection reset by peer")))

    def test_no_smaller_membership_raises_the_error(self):
        """A job that does not go on in place: the collective's own error, with a note saying what reform waited for."""
        d = support.short_tempdir(self)
        path = os.path.join(d, "membership.json")
        write_membership(path, 0, ["127.0.0.1:1"], ["127.0.0.1:2"])
        code = ("import spindle.torch as st\n"
                "st.init_process_group()\n"
                "err = RuntimeError('Connection closed by peer [127.0.0.1]:4242')\n"
                "try:\n"
                "    st.reform(err, timeout=0.3)\n"
                "except RuntimeError as e:\n"
                "    print(e is err, e.__notes__)\n")
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1",
               "SPINDLE_MEMBERSHIP": path}
        out = run_python(code, env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("True", out.stdout)
        self.assertIn("no newer membership than version 0 came within 0.3s", out.stdout)

    def test_without_membership(self):
        code = ("import spindle.torch as st\n"
                "st.init_process_group()\n"
                "err = RuntimeError('Connection reset by peer')\n"
                "try:\n"
                "    st.reform(err)\n"
                "except RuntimeError as e:\n"
                "    print(e is err, e.__notes__)\n")
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1",
               "SPINDLE_MEMBERSHIP": ""}
        out = run_python(code, env)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("True", out.stdout)
        self.assertIn("SPINDLE_MEMBERSHIP", out.stdout)


if __name__ == "__main__":
    unittest.main()
