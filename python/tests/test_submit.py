"""spindle.submit, Job and spindle.run against real local jobs of a real spindle binary.

Each test starts ``spindle submit --master local[2]`` through the Python
API (the binary from $SPINDLE_BINARY, else built from this checkout), so
the events file, the failed rank's stderr tail, streaming output, kill and
interrupts are the real ones. The cloudpickle tests run where cloudpickle
is installed (make deps puts it into $SPINDLE_PY_VENV).
"""

import _thread
import gc
import os
import signal
import sys
import threading
import unittest

import support

import spindle
from spindle import _run

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

try:
    import cloudpickle
except ImportError:
    cloudpickle = None

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError:
    EventAccumulator = None


class SubmitTest(unittest.TestCase):
    def setUp(self):
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(self)

    def test_failure_names_rank_and_stderr_tail(self):
        job = spindle.submit(["sh", "-c", 'if [ "$SPINDLE_RANK" = 1 ]; then echo "boom on one" >&2; exit 3; fi'],
                             master="local[2]", stream=False)
        with job, self.assertRaises(spindle.JobFailed) as cm:
            job.wait(timeout=support.scaled(120))
        e = cm.exception
        self.assertEqual((e.rank, e.exit_code, e.state), (1, 1, "FAILED"), str(e))
        self.assertIn("boom on one", e.stderr_tail)
        self.assertEqual(e.host, "127.0.0.1")
        self.assertEqual(e.job_id, job.job_id)
        self.assertEqual((job.status, job.exit_code), ("FAILED", 1))

    def test_bad_input_is_exit_2_with_the_message(self):
        job = spindle.submit("true", master="local[2]", input="/nonexistent/spindle-test/*.parquet", stream=False)
        with job, self.assertRaises(spindle.JobFailed) as cm:
            job.wait(timeout=support.scaled(120))
        self.assertEqual(cm.exception.exit_code, 2)
        self.assertIn("/nonexistent/spindle-test", str(cm.exception))
        self.assertIsNone(cm.exception.rank)

    def test_handle_left_without_with_removes_its_directory(self):
        job = spindle.submit("true", master="local[1]", stream=False)
        job.wait(timeout=support.scaled(120))
        work = job._dir
        self.assertTrue(os.path.isdir(work))
        for t in job._threads:
            t.join(timeout=60)
        del job
        gc.collect()
        self.assertFalse(os.path.exists(work), "a finished job's handle, dropped, left its directory behind")

    def test_logs_stream_and_kill(self):
        job = spindle.submit(["sh", "-c", 'echo "ready $SPINDLE_RANK"; exec sleep 120'], master="local[2]", stream=False)
        with job:
            seen = set()
            for line in job.logs():
                if line.startswith("[rank ") and "ready" in line:
                    seen.add(line)
                if len(seen) == 2:
                    break
            self.assertEqual(seen, {"[rank 0] ready 0", "[rank 1] ready 1"})
            self.assertEqual(job.status, "RUNNING")
            self.assertTrue(job.web_url.startswith("http://"), job.web_url)
            job.kill()
            self.assertEqual((job.status, job.exit_code), ("KILLED", 130))

    def test_interrupt_while_waiting_kills_the_job(self):
        # A notebook's stop button raises KeyboardInterrupt in the cell.
        # interrupt_main does nothing where SIGINT is ignored, as it is in
        # a test run started in the background by a shell: handle it here.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, previous)
        job = spindle.submit(["sh", "-c", 'echo "ready $SPINDLE_RANK"; exec sleep 120'], master="local[2]", stream=False)
        main = threading.main_thread().ident

        def main_in_wait():
            frame = sys._current_frames().get(main)
            while frame is not None:
                if frame.f_code is type(job).wait.__code__:
                    return True
                frame = frame.f_back
            return False

        def interrupt_when_running():
            # Only once the main thread is in wait: on a loaded machine
            # the job can be up before t.start() has returned, and an
            # interrupt there would escape the test.
            for line in job.logs():
                if "ready" in line:
                    break
            support.wait_for("the main thread in Job.wait", main_in_wait, 60)
            _thread.interrupt_main()

        t = threading.Thread(target=interrupt_when_running)
        t.start()
        with job:
            with self.assertRaises(KeyboardInterrupt):
                job.wait(timeout=support.scaled(120))
            t.join()
            self.assertEqual((job.status, job.exit_code), ("KILLED", 130))

    def test_run_module_function(self):
        got = spindle.run("runtarget:scaled", 5, num_workers=2, all_ranks=True, kwargs={"by": 10},
                          cwd=TESTS_DIR, stream=False)
        self.assertEqual(got, [50, 51])

    def test_run_function_without_cloudpickle_says_what_to_do(self):
        real = _run._pickler
        _run._pickler = lambda: None
        try:
            with self.assertRaisesRegex(spindle.SpindleError, "pip install cloudpickle.*'module:function'"):
                spindle.run(lambda: 1, num_workers=2)
        finally:
            _run._pickler = real

    @unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
    def test_run_closure_returns_rank_zeros_result(self):
        base = 7

        def work(x):
            import spindle
            print("working", flush=True)
            return {"rank": spindle.rank(), "world": spindle.world_size(), "value": base + x}

        self.assertEqual(spindle.run(work, 1, num_workers=2, stream=False), {"rank": 0, "world": 2, "value": 8})

    @unittest.skipIf(cloudpickle is None, "needs cloudpickle (make deps installs it into $SPINDLE_PY_VENV)")
    def test_run_raising_rank_raises_job_failed(self):
        def work():
            import spindle
            if spindle.rank() == 1:
                raise ValueError("rank one is broken")
            return "fine"

        with self.assertRaises(spindle.JobFailed) as cm:
            spindle.run(work, num_workers=2, stream=False)
        self.assertEqual(cm.exception.rank, 1)
        self.assertIn("ValueError: rank one is broken", cm.exception.stderr_tail)


    @unittest.skipIf(EventAccumulator is None, "needs tensorboard (make deps installs it into $SPINDLE_PY_VENV)")
    def test_reported_values_become_tensorboard_events(self):
        tb = support.short_tempdir(self)
        script = ("import spindle, sys\n"
                  "r = spindle.rank()\n"
                  "for step in range(3):\n"
                  "    spindle.report(step=step, loss=10 * r + step)\n")
        job = spindle.submit([sys.executable, "-c", script], master="local[2]", stream=False,
                             conf={"spindle.tensorboard.dir": tb, "spindle.executor.heartbeatInterval": "100ms"})
        with job:
            job.wait(timeout=support.scaled(120))
        runs = os.listdir(tb)
        self.assertEqual(runs, [job.job_id], "one run per job, named after it")
        acc = EventAccumulator(os.path.join(tb, runs[0]))
        acc.Reload()
        tags = acc.Tags()["scalars"]
        self.assertTrue(tags, "tensorboard read no scalars")
        for tag in tags:
            name, rank = tag.split("/rank ")
            self.assertEqual(name, "loss")
            for e in acc.Scalars(tag):
                self.assertEqual(e.value, 10 * int(rank) + e.step, tag)


# The longest output line a remote executor passes on whole
# (executor/process.go's maxOutputLine); it cuts longer ones.
EXECUTOR_MAX_LINE = 16 * 1024


class MarkedResultTest(unittest.TestCase):
    """A rank's result from a remote master comes back as marked output lines."""

    def test_large_result_survives_a_remote_executors_line_limit(self):
        import contextlib
        import io
        import tempfile

        from spindle import _worker
        value = list(range(20000))  # pickled and base64'd: several marked lines
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            _worker.write_result(_run.dumps_result(value), 0, None)
        job = _run.RunJob.__new__(_run.RunJob)  # its result collection alone, no job
        job._marked, job._results_dir = {}, tempfile.mkdtemp()
        for line in out.getvalue().splitlines():
            # What the submitting process sees: the executor's cut, then its rank prefix.
            self.assertTrue(job._take_mark("stdout", "[rank 0] " + line[:EXECUTOR_MAX_LINE]))
        self.assertEqual(job._result_of(0), value)


if __name__ == "__main__":
    unittest.main()
