"""spindle.Session and spindle session/submit --session against real local Spindle jobs: warm ranks fork a fresh process per job.

Needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV; `make
test-python` runs this file there).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

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

    def test_rank_zero_answers_a_port_free_on_its_host(self):
        # A job's MASTER_PORT comes from rank 0, where PyTorch's store binds it.
        answer = self.session._ask(0, {"op": "port"}, timeout=support.scaled(60))
        self.assertEqual(len(answer), 1)
        port = answer[0]["port"]
        self.assertTrue(0 < port < 65536, answer)
        with socket.socket() as s:
            s.bind(("", port))  # rank 0 is on this host here: still free

    def test_request_without_token_is_refused(self):
        path = _zygote.socket_path(self.session._dir, 0)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(path)
            c.sendall(json.dumps({"op": "run", "work": "/nonexistent", "token": "guess"}).encode() + b"\n")
            answer = json.loads(c.makefile("rb").readline())
        self.assertIn("refused", answer.get("error", ""))
        self.assertEqual(os.stat(self.session._dir).st_mode & 0o777, 0o700)

    def test_client_gone_before_the_answer_ends_the_run(self):
        # A client interrupted before it read the child's pid (under load
        # the child can start, and the client be interrupted, before its
        # zygote answers): the zygote's answer then fails (EPIPE, or
        # ECONNRESET for one left unread), and the run's process must
        # still end. A zygote serves one request at a time, so its answer
        # to the next (a ping) says the first has been dealt with.
        s = self.session
        out_r, out_w = os.pipe()
        self.addCleanup(os.close, out_r)
        req = {"op": "exec", "argv": ["-c", "import time; time.sleep(600)"], "cwd": "/", "token": s._token}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(_zygote.socket_path(s._dir, 0))
            socket.send_fds(c, [json.dumps(req).encode() + b"\n"], [out_w, out_w])
            os.close(out_w)
        s._ask(0, {"op": "ping"})
        support.wait_for(lambda: f"the run's processes {children(s.zygotes[0])} to end with its client",
                         lambda: not children(s.zygotes[0]), 60)
        self.assertEqual(s.run(probe, None)["rank"], 0, "the session runs the next job")


SCRIPT = """import os, sys
print("seen", os.environ["SPINDLE_RANK"], os.getpid(), os.getppid(), "wave" in sys.modules, " ".join(sys.argv[1:]))
if "fail" in sys.argv and os.environ["SPINDLE_RANK"] == "1":
    sys.exit(4)
"""


FED_SCRIPT = """import itertools, spindle
for ep in itertools.islice(spindle.epochs("batches"), 4):
    print("epoch", ep.epoch, " ".join(str(int(i)) for b in ep for i in b["id"]))
"""


class SessionCLITest(unittest.TestCase):
    """spindle session start|stop and spindle submit --session, through the binary."""

    def setUp(self):
        self.binary = support.spindle_binary(self)
        self.env = dict(os.environ, SPINDLE_SESSIONS_DIR=os.path.join(support.short_tempdir(self), "reg"))
        self.env.pop("PYTHONPATH", None)  # the binary's own package

    def spindle(self, *args, check=True):
        p = subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True, timeout=support.scaled(300))
        if check and p.returncode != 0:
            self.fail(f"spindle {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        return p

    def test_submit_runs_in_forks_of_the_warm_ranks(self):
        py = ["--python", sys.executable]
        sid = self.spindle("session", "start", *py, "--num-executors", "2", "--preload", "wave").stdout.strip()
        self.addCleanup(self.spindle, "session", "stop", *py, sid, check=False)
        self.assertIn(sid, self.spindle("session", "list", *py).stdout)
        work = support.short_tempdir(self)
        with open(os.path.join(work, "s.py"), "w") as f:
            f.write(SCRIPT)
        runs = []
        for _ in range(2):
            p = subprocess.run([self.binary, "submit", "--session", sid, "--", "python3", "s.py", "a", "b"],
                               env=self.env, cwd=work, capture_output=True, text=True, timeout=support.scaled(300))
            self.assertEqual(p.returncode, 0, p.stderr)
            seen = {}
            for line in p.stdout.splitlines():
                prefix, _, rest = line.partition("] ")
                word, rank, pid, ppid, preloaded, args = rest.split(" ", 5)
                self.assertEqual((prefix, word), (f"[rank {rank}", "seen"), line)
                seen[int(rank)] = (int(pid), int(ppid), preloaded, args)
            self.assertEqual(sorted(seen), [0, 1], p.stdout)
            runs.append(seen)
        for r in (0, 1):
            self.assertEqual(runs[0][r][2:], ("True", "a b"), "the preloaded module or the arguments are missing")
            self.assertEqual(runs[0][r][1], runs[1][r][1], "the two runs did not fork from the same warm rank")
            self.assertNotEqual(runs[0][r][0], runs[1][r][0], "the second run reused the first's process")
        p = subprocess.run([self.binary, "submit", "--session", sid, "--", "python3", "s.py", "fail"],
                           env=self.env, cwd=work, capture_output=True, text=True, timeout=support.scaled(300))
        self.assertEqual(p.returncode, 1)
        self.assertIn("rank 1 exited 4", p.stderr)
        p = subprocess.run([self.binary, "submit", "--session", sid, "--", "ls"],
                           env=self.env, cwd=work, capture_output=True, text=True, timeout=support.scaled(300))
        self.assertEqual(p.returncode, 2)
        self.assertIn('"ls" is not python', p.stderr)
        interrupted_run_ends(self, self.binary, self.env, sid, work)
        self.spindle("session", "stop", *py, sid)
        self.assertNotIn(sid, self.spindle("session", "list", *py).stdout)

    def test_submit_runs_read_the_session_input(self):
        py = ["--python", sys.executable]
        sid = self.spindle("session", "start", *py, "--num-executors", "2", "--input", fed_input(self),
                           "--label-column", "label", "--epochs", "2", "--batch-rows", "100",
                           "--conf", "spindle.feed.evenBatches=off").stdout.strip()
        self.addCleanup(self.spindle, "session", "stop", *py, sid, check=False)
        work = support.short_tempdir(self)
        with open(os.path.join(work, "read.py"), "w") as f:
            f.write(FED_SCRIPT)
        for run in range(2):
            p = subprocess.run([self.binary, "submit", "--session", sid, "--", "python3", "read.py"],
                               env=self.env, cwd=work, capture_output=True, text=True, timeout=support.scaled(300))
            self.assertEqual(p.returncode, 0, p.stderr)
            epochs = {}
            for line in p.stdout.splitlines():
                _, _, rest = line.partition("] ")
                word, epoch, *ids = rest.split(" ")
                self.assertEqual(word, "epoch", line)
                epochs.setdefault(int(epoch), []).extend(int(i) for i in ids)
            self.assertEqual(sorted(epochs), [0, 1], f"run {run}: the run's epochs")
            for epoch, ids in epochs.items():
                self.assertEqual(sorted(ids), list(range(FED_ROWS)), f"run {run} epoch {epoch}: rows fed not exactly once")

    def test_start_refuses_a_bad_conf(self):
        p = self.spindle("session", "start", "--python", sys.executable, "--conf", "spindle.feed.evenBatches", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--conf 'spindle.feed.evenBatches': want KEY=VALUE", p.stderr)

    def test_start_refuses_pushed_input(self):
        p = self.spindle("session", "start", "--python", sys.executable, "--input", "flight-put:", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--input flight-put:: a session's pushed input is fed from Python", p.stderr)


def interrupted_run_ends(test, binary, env, sid, work, pid_dir=None):
    """A run whose spindle submit (binary, env) is interrupted (Ctrl-C) has its processes ended, and the session runs the next.

    The run's script, in work, writes its pid into pid_dir (work, by default).
    """
    pid_dir = pid_dir or work
    with open(os.path.join(work, "wait.py"), "w") as f:
        f.write("import os, sys, time\n"
                "open(os.path.join(sys.argv[1], f'pid-{os.environ[\"SPINDLE_RANK\"]}'), 'w').write(str(os.getpid()))\n"
                "time.sleep(600)\n")
    p = subprocess.Popen([binary, "submit", "--session", sid, "--", "python3", "wait.py", pid_dir], env=env, cwd=work,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_files = [os.path.join(pid_dir, f"pid-{r}") for r in (0, 1)]
    support.wait_for("the run's processes to start", lambda: all(os.path.exists(f) and os.path.getsize(f) for f in pid_files))
    pids = []
    for name in pid_files:
        with open(name) as f:
            pids.append(int(f.read()))
    p.send_signal(signal.SIGINT)
    p.wait(timeout=support.scaled(60))
    support.wait_for(f"the interrupted run's processes {pids} to end", lambda: not any(alive(pid) for pid in pids), 60)
    p = subprocess.run([binary, "submit", "--session", sid, "--", "python3", "s.py", "after"],
                       env=env, cwd=work, capture_output=True, text=True, timeout=support.scaled(300))
    test.assertEqual(p.returncode, 0, p.stderr)


def children(pid):
    """The pids of pid's live children."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(ppid) == pid and state != "Z":
                out.append(int(name))
    return out


def alive(pid):
    """Whether pid runs (a zombie not yet reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


FED_ROWS = 3000


def fed_input(test):
    """Write FED_ROWS rows (id, x, label) as two CSV files; return their glob."""
    data = support.short_tempdir(test)
    for part in range(2):
        with open(os.path.join(data, f"part-{part}.csv"), "w") as f:
            f.write("id,x,label\n")
            for i in range(part * FED_ROWS // 2, (part + 1) * FED_ROWS // 2):
                f.write(f"{i},{i * 0.5},{i % 2}\n")
    return os.path.join(data, "*.csv")


def read_epochs():
    """On a rank: per epoch of this job, its number and the ids it was fed (at most 4 epochs: a job that gets more is wrong already)."""
    import itertools
    import spindle
    return [(ep.epoch, [int(i) for b in ep for i in b["id"]]) for ep in itertools.islice(spindle.epochs("batches"), 4)]


def check_epochs(test, ranks, epochs):
    """Check that every rank's job (read_epochs's results) read epochs 0 to epochs-1, every row once per epoch."""
    for r, got in enumerate(ranks):
        test.assertEqual([n for n, _ in got], list(range(epochs)), f"rank {r}: the job's epochs")
        test.assertTrue(got[0][1], f"rank {r} got no rows")
    for epoch in range(epochs):
        ids = sorted(i for got in ranks for i in got[epoch][1])
        test.assertEqual(ids, list(range(FED_ROWS)), f"epoch {epoch}: rows fed not exactly once")


def read_one_batch():
    """On a rank: one batch of the job's first epoch, the rest left unread."""
    import spindle
    with spindle.batches() as ep:
        return len(next(iter(ep))["id"])


@unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
class FedSessionTest(unittest.TestCase):
    """A session with input: each of its jobs reads its own epochs of the session's feed."""

    def setUp(self):
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(self)
        self.input = fed_input(self)

    def start(self, feed):
        s = spindle.Session(num_executors=2, input=self.input, label_column="label", epochs=2, batch_rows=100,
                            feed=feed, conf={"spindle.feed.evenBatches": "off"}, stream=False)
        self.addCleanup(s.close)
        return s

    def test_a_push_into_a_session_of_files_is_refused(self):
        import spindle.spark
        s = self.start("arrow")
        with self.assertRaisesRegex(spindle.SpindleError, r"session=...\): the session's input is not pushed: start it with "
                                                          r"spindle.Session\(input='flight-put:'"):
            spindle.spark.train(None, read_epochs, session=s)

    def test_every_job_reads_every_row_once_per_epoch(self):
        for feed in ("arrow", "direct"):
            with self.subTest(feed=feed):
                s = self.start(feed)
                check_epochs(self, s.run(read_epochs, all_ranks=True), 2)
                # A job that stops in the middle of its first epoch leaves
                # the rest of its turn unread; the next job starts on its own.
                self.assertEqual(s.run(read_one_batch, all_ranks=True), [100, 100])
                check_epochs(self, s.run(read_epochs, all_ranks=True), 2)
                self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")


def free_addr():
    return f"127.0.0.1:{support.free_port()}"


def ancestors(pid):
    """The pids above pid, nearest first."""
    out = []
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        out.append(pid)
    return out


CLUSTER_SECRET = "session-cluster-secret-0123456789abcdef"


def standalone_cluster(test, workers):
    """Start a standalone master and workers as processes on this host; return the master's URI, the workers' pids and the environment.

    workers maps each worker's ID to (the command line its spindle worker
    runs under, its cores). The cluster's secret is set in os.environ
    too, for the test's sessions, until the test ends.
    """
    binary = support.spindle_binary(test)
    os.environ["SPINDLE_BINARY"] = binary
    work = support.short_tempdir(test)
    # The workers' executors run the ranks, which unpickle this module's
    # functions by name: they import it from here.
    env = dict(os.environ, SPINDLE_CLUSTER_SECRET=CLUSTER_SECRET, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    os.environ["SPINDLE_CLUSTER_SECRET"] = CLUSTER_SECRET
    test.addCleanup(os.environ.pop, "SPINDLE_CLUSTER_SECRET", None)
    master, raft = free_addr(), free_addr()
    procs = [("master", (), ["master", "--id", "m1", "--addr", master, "--raft-addr", raft, "--peers", f"m1={raft}@{master}",
                             "--data-dir", os.path.join(work, "m1")])]
    for wid, (wrap, cores) in workers.items():
        procs.append((wid, wrap, ["worker", "--masters", master, "--id", wid, "--addr", free_addr(), "--cores", str(cores),
                                  "--memory", "4g", "--work-dir", os.path.join(work, wid),
                                  "--conf", "spindle.worker.heartbeatInterval=200ms"]))
    pids = {}
    for name, wrap, args in procs:
        log = open(os.path.join(work, name + ".log"), "wb")
        test.addCleanup(log.close)
        p = subprocess.Popen([*wrap, binary, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
        test.addCleanup(p.wait, 60)
        test.addCleanup(p.kill)
        pids[name] = p.pid
    return "spindle://" + master, pids, env


def start_session(master, **options):
    """Start a session on a standalone master once its workers have registered (until then its job cannot be placed)."""
    return until_placed(lambda: spindle.Session(master=master, stream=False, timeout=support.scaled(120), **options))


def until_placed(start):
    """Return start(), which starts a job on a standalone master, called again while it fails until the master's workers have registered."""
    budget = support.Budget(120)
    while True:
        try:
            return start()
        except spindle.JobFailed:
            if budget.spent():
                raise
            time.sleep(0.5)  # waiting for the cluster to come up, not synchronising


def can_hide_directories():
    """Whether this process may run a command in a mount namespace of its own (unshare -m), to hide a directory from it."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
class StandaloneSessionTest(unittest.TestCase):
    """A session on a standalone cluster (a master and a worker on this host, as processes)."""

    def setUp(self):
        self.master, workers, self.env = standalone_cluster(self, {"w1": ((), 4)})
        self.worker = workers["w1"]
        self.input = fed_input(self)

    def start(self):
        s = start_session(self.master, num_executors=2, preload=["wave"], input=self.input, label_column="label",
                          epochs=2, batch_rows=100, conf={"spindle.feed.evenBatches": "off"})
        self.addCleanup(s.close)
        return s

    def test_runs_on_the_workers_executors_between_jobs(self):
        s = self.start()
        for r, pid in enumerate(s.zygotes):
            self.assertIn(self.worker, ancestors(pid), f"rank {r} does not run under the standalone worker")
        executors = [ancestors(pid)[0] for pid in s.zygotes]
        for _ in range(2):
            seen = s.run(probe, None, all_ranks=True)
            self.assertEqual([r["ppid"] for r in seen], s.zygotes, "a job did not fork from the warm ranks")
            check_epochs(self, s.run(read_epochs, all_ranks=True), 2)
        self.assertEqual([ancestors(pid)[0] for pid in s.zygotes], executors, "the executors changed between jobs")
        self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")


# The session's driver, and its ranks' addresses, on loopback.
LOOPBACK = {"spindle.driver.bindHost": "127.0.0.1", "spindle.network.interface": "lo"}


@unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
@unittest.skipUnless(can_hide_directories(), "needs root and unshare -m, to hide the session's directory from a worker")
class RemoteSessionTest(unittest.TestCase):
    """A session spanning two standalone workers, one of which does not see the session's host's files (as on another host)."""

    def setUp(self):
        # Sessions keep their directories in `hidden`, which worker w2
        # sees as an empty file system of its own: its ranks are as far
        # from the session's directory as another host's.
        self.hidden = support.short_tempdir(self)
        away = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs spindle-away "$0" && exec "$@"', self.hidden]
        self.master, self.workers, self.env = standalone_cluster(self, {"w1": ((), 1), "w2": (away, 1)})

    def test_ranks_away_from_the_session_serve_over_tcp(self):
        with mock.patch.object(tempfile, "tempdir", self.hidden):
            s = start_session(self.master, num_executors=2, preload=["wave"], conf=LOOPBACK)
        self.addCleanup(s.close)
        under = {r: [w for w, pid in self.workers.items() if pid in ancestors(z)] for r, z in enumerate(s.zygotes)}
        self.assertEqual(sorted(w for ws in under.values() for w in ws), ["w1", "w2"], f"the ranks' workers: {under}")
        away = next(r for r, ws in under.items() if ws == ["w2"])
        self.assertEqual(list(s.addrs), [away], "only the rank away from the session's directory serves over TCP")
        self.assertTrue(s.addrs[away].startswith("127.0.0.1:"), s.addrs)
        for _ in range(2):
            seen = s.run(probe, None, all_ranks=True)
            self.assertEqual([r["ppid"] for r in seen], s.zygotes, "a job did not fork from the warm ranks")
            self.assertTrue(all(r["preloaded"] for r in seen), "a rank's job ran without the preloaded module")
        with self.assertRaises(spindle.SpindleError) as cm:
            s.run(fail_on_one)
        self.assertIn("rank 1 failed", str(cm.exception))
        self.assertIn("ValueError: rank one is broken", str(cm.exception))
        with socket.create_connection(s.addrs[away].rsplit(":", 1)) as c:
            c.sendall(json.dumps({"op": "ping", "token": "guess"}).encode() + b"\n")
            self.assertIn("refused", json.loads(c.makefile("rb").readline()).get("error", ""))
        self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")

    def test_submit_runs_in_ranks_away(self):
        binary = support.spindle_binary(self)
        env = dict(self.env, TMPDIR=self.hidden, SPINDLE_SESSIONS_DIR=os.path.join(support.short_tempdir(self), "reg"))
        env.pop("PYTHONPATH", None)  # the binary's own package
        py = ["--python", sys.executable]

        def spindle_cli(*args, cwd=None):
            return subprocess.run([binary, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=support.scaled(300))

        budget = support.Budget(120)
        while True:
            p = spindle_cli("session", "start", *py, "--master", self.master, "--num-executors", "2", "--preload", "wave",
                            *(f"--conf={k}={v}" for k, v in LOOPBACK.items()))
            if p.returncode == 0 or budget.spent():
                break
            time.sleep(0.5)  # waiting for the cluster to come up, not synchronising
        self.assertEqual(p.returncode, 0, p.stderr)
        sid = p.stdout.strip()
        self.addCleanup(spindle_cli, "session", "stop", *py, sid)
        with open(os.path.join(env["SPINDLE_SESSIONS_DIR"], sid + ".json")) as f:
            rec = json.load(f)
        self.assertEqual(sum(1 for a in rec["addrs"] if a), 1, f"one rank serves over TCP: {rec['addrs']}")
        # The script and the directory it is run from are where the rank
        # away cannot see them: the script travels in the request.
        work = tempfile.mkdtemp(dir=self.hidden)
        with open(os.path.join(work, "s.py"), "w") as f:
            f.write(SCRIPT)
        runs = []
        for _ in range(2):
            p = spindle_cli("submit", "--session", sid, "--", "python3", "s.py", "a", "b", cwd=work)
            self.assertEqual(p.returncode, 0, p.stderr)
            seen = {}
            for line in p.stdout.splitlines():
                prefix, _, rest = line.partition("] ")
                word, rank, pid, ppid, preloaded, args = rest.split(" ", 5)
                self.assertEqual((prefix, word, preloaded, args), (f"[rank {rank}", "seen", "True", "a b"), line)
                seen[int(rank)] = (int(pid), int(ppid))
            self.assertEqual(sorted(seen), [0, 1], p.stdout)
            runs.append(seen)
        for r in (0, 1):
            self.assertEqual(runs[0][r][1], runs[1][r][1], f"rank {r}: the two runs did not fork from the same warm rank")
            self.assertNotEqual(runs[0][r][0], runs[1][r][0], f"rank {r}: the second run reused the first's process")
        p = spindle_cli("submit", "--session", sid, "--", "python3", "s.py", "fail", cwd=work)
        self.assertEqual(p.returncode, 1)
        self.assertIn("rank 1 exited 4", p.stderr)
        interrupted_run_ends(self, binary, env, sid, work, pid_dir=support.short_tempdir(self))
        p = spindle_cli("session", "stop", *py, sid)
        self.assertEqual(p.returncode, 0, p.stderr)
        support.wait_for("the stopped session's process to end", lambda: not alive(rec["pid"]), 60)


def yarn_minicluster(test):
    """Start spindle minicluster's YARN (2 NodeManagers) for test, in a mount namespace where a directory is hidden; return that directory.

    HADOOP_CONF_DIR names the cluster until the test ends. The YARN
    containers see the returned directory as an empty file system of
    their own: a session whose directory is there is as far from its
    ranks as another host's.
    """
    binary = support.spindle_binary(test)
    os.environ["SPINDLE_BINARY"] = binary
    work = support.short_tempdir(test)
    hidden = support.short_tempdir(test)
    log = open(os.path.join(work, "minicluster.log"), "wb")
    test.addCleanup(log.close)
    p = subprocess.Popen(["unshare", "-m", "sh", "-c", 'mount -t tmpfs spindle-away "$0" && exec "$@"', hidden,
                          binary, "minicluster", "--dir", os.path.join(work, "mc"), "--datanodes", "1",
                          "--nodemanagers", "2", "--nm-memory", "4GiB"], stdout=log, stderr=subprocess.STDOUT)
    test.addCleanup(p.wait, 60)
    test.addCleanup(p.send_signal, signal.SIGINT)
    conf = os.path.join(work, "mc", "hadoop-conf", "yarn-site.xml")

    def written():
        test.assertIsNone(p.poll(), "spindle minicluster ended")
        return os.path.exists(conf)

    support.wait_for("spindle minicluster to write its configuration", written)
    env = mock.patch.dict(os.environ, HADOOP_CONF_DIR=os.path.dirname(conf), HADOOP_USER_NAME="root")
    env.start()
    test.addCleanup(env.stop)
    return hidden


@unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
@unittest.skipUnless(can_hide_directories(), "needs root and unshare -m, to hide the session's directory from YARN's containers")
class YARNSessionTest(unittest.TestCase):
    """A session on YARN in client mode: spindle minicluster's NodeManagers, which do not see the session's host's files."""

    def setUp(self):
        self.hidden = yarn_minicluster(self)

    def test_ranks_in_yarn_containers_serve_over_tcp(self):
        def seen():
            import os
            import sys
            return os.getpid(), os.getppid(), "wave" in sys.modules

        with mock.patch.object(tempfile, "tempdir", self.hidden):
            s = spindle.Session(master="yarn", num_executors=2, preload=["wave"], executor_memory="512m", conf=LOOPBACK,
                                stream=False, timeout=support.scaled(180))
        self.addCleanup(s.close)
        self.assertEqual(sorted(s.addrs), [0, 1], "both ranks serve over TCP")
        for _ in range(2):
            ranks = s.run(seen, all_ranks=True)
            self.assertEqual([r[1] for r in ranks], s.zygotes, "a job did not fork from the warm ranks")
            self.assertTrue(all(r[2] for r in ranks), "a rank's job ran without the preloaded module")
        self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")


class SessionArgsTest(unittest.TestCase):
    def test_cluster_master_is_refused(self):
        with self.assertRaisesRegex(spindle.SpindleError, "local master"):
            spindle.Session(master="k8s://api", num_executors=2)
        with self.assertRaisesRegex(spindle.SpindleError, "in client mode"):
            spindle.Session(master="yarn", deploy_mode="cluster", num_executors=2)

    def test_pushed_input_needs_its_schema(self):
        with self.assertRaisesRegex(spindle.SpindleError, r"input='flight-put:' needs conf=\{'spindle.flight.put.schema'"):
            spindle.Session(num_executors=2, input="flight-put:", epochs=1)

    def test_input_needs_an_epoch_per_job(self):
        with self.assertRaisesRegex(spindle.SpindleError, "epochs=0: each job needs at least 1"):
            spindle.Session(num_executors=2, input="data/*.csv", epochs=0)

    def test_ranks_away_from_the_session_host_are_refused(self):
        env = dict(os.environ, SPINDLE_SESSION_DIR="/nonexistent/session", SPINDLE_RANK="1", PYTHONPATH=support.PYTHON_DIR)
        p = subprocess.run([sys.executable, "-m", "spindle._zygote"], env=env, capture_output=True, text=True, timeout=support.scaled(60))
        self.assertEqual(p.returncode, 1)
        self.assertIn("rank 1 runs on host", p.stderr)
        self.assertIn("must run on the host that started it", p.stderr)

    def test_zygote_runs_as_main_without_a_second_copy(self):
        # python -m spindle._zygote imports the package first; were the
        # package to import the zygote, runpy would warn and run a copy.
        env = {k: v for k, v in os.environ.items() if k != "SPINDLE_SESSION_DIR"}
        env["PYTHONPATH"] = support.PYTHON_DIR
        p = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "spindle._zygote"], env=env,
                           capture_output=True, text=True, timeout=support.scaled(60))
        self.assertNotIn("RuntimeWarning", p.stderr)
        self.assertIn("SPINDLE_SESSION_DIR is not set", p.stderr)


if __name__ == "__main__":
    unittest.main()
