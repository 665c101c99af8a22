"""spindle.spark against real pyspark in local mode and real Spindle jobs and sessions: local, standalone and on YARN.

Needs pyspark, pandas, pyarrow and cloudpickle (make deps installs them into
$SPINDLE_PY_VENV; `make test-python` runs this file there) and Java. The
Spark tasks import this checkout's spindle package (PYTHONPATH); the jobs'
ranks get the spindle binary's (from $SPINDLE_BINARY, else built from this
checkout).
"""

import os
import shutil
import sys
import tempfile
import unittest
from unittest import mock

import support
import test_session

import spindle

try:
    import cloudpickle  # noqa: F401
    import pyarrow  # noqa: F401
    import pyspark
    from pyspark.sql import SparkSession
    from pyspark.sql import types as T
    import spindle.spark as sspark
    REAL_PUSHER = sspark._partition_pusher
except ImportError:
    pyspark = None

ROWS = 20000


def read_everything():
    """On each rank: per epoch, the ids it was fed and the columns it saw."""
    import spindle
    out = []
    for ep in spindle.epochs("batches"):
        ids, cols = [], None
        for b in ep:
            cols = list(b)
            ids.extend(int(i) for i in b["id"])
        out.append({"ids": ids, "columns": cols})
    return out


def read_rows():
    """On each rank: every row it was fed, as plain Python values (dates as ISO strings, nulls as None)."""
    import numpy as np

    import spindle

    def plain(v):
        if v is np.ma.masked:
            return None
        if isinstance(v, np.datetime64):
            return str(v.astype("datetime64[D]"))
        return v.item() if isinstance(v, np.generic) else v

    rows = []
    for b in spindle.batches():
        cols = list(b)
        rows.extend(tuple(plain(b[c][i]) for c in cols) for i in range(len(b[cols[0]])))
    return rows


def read_one_batch():
    """On each rank: one batch of the first epoch, then return (a job that stops reading early)."""
    import spindle
    for b in spindle.batches():
        return len(b["id"])


def pusher_that(part, at, act):
    """spindle.spark's partition pusher, which calls act() in partition part's first attempt before its batch at.

    act runs in the Spark task that pushes, between two batches, with the
    partition's DoPut stream open; the real pusher runs around it.
    """

    def pusher(*args):
        real = REAL_PUSHER(*args)

        def push(batches):
            from pyspark import TaskContext
            ctx = TaskContext.get()

            def acting():
                for i, b in enumerate(batches):
                    if ctx.partitionId() == part and ctx.attemptNumber() == 0 and i == at:
                        act()
                    yield b

            return real(acting())

        return push

    return pusher


def _fail():
    raise RuntimeError("the first attempt of partition 1 fails mid-way")


def kill(victim, marker=None):
    """An act that SIGKILLs the process victim() names: no done_writing, no Python cleanup; Spark retries the task.

    marker, when given, is a file written just before the kill, so that
    the test knows it happened.
    """

    def act():
        import signal
        pid = victim()
        if marker:
            with open(marker, "w") as f:
                f.write(str(pid))
        os.kill(pid, signal.SIGKILL)

    return act


# Partition 1 fails after pushing three batches, raised from the batches
# the real pusher reads, as a failure computing the partition would be.
failing_pusher = pusher_that(1, 3, _fail)

# The task's Python worker is killed, as when it crashes; Spark sees it
# gone and retries the task.
killing_pusher = pusher_that(2, 2, kill(os.getpid))


def executor_killer(marker):
    """A pusher that kills the Spark executor's JVM itself, as when a node is lost: Spark runs its tasks again on a new executor."""
    return pusher_that(2, 2, kill(_executor_jvm, marker))


def _executor_jvm():
    """The pid of the Spark executor JVM above this Python worker."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no Spark executor JVM above this Python worker")


def faulty_frame(spark, at, act):
    """frame's rows with its label passed through a Python UDF that calls act() at id at in its task's first attempt.

    A fault for the JVM pusher, which runs no Python of spindle's: the UDF
    fails or kills where the row is computed, mid-partition, with earlier
    batches already pushed.
    """
    from pyspark.sql import functions as F

    def label(i, y):
        from pyspark import TaskContext
        if i == at and TaskContext.get().attemptNumber() == 0:
            act()
        return y

    return frame(spark).select("id", "x", F.udf(label, T.FloatType())("id", "label").alias("label"))


def frame(spark, first=0):
    """The DataFrame the tests push: ROWS rows of id (from first), x and a label, in 4 partitions."""
    return spark.range(first, first + ROWS, numPartitions=4).selectExpr(
        "id", "cast(id * 0.5 as float) as x", "cast(id % 2 as float) as label")


def check_fed_once_per_epoch(test, ranks, epochs, first=0):
    """Check that the ranks (read_everything's results) were fed every row (ids from first) once per epoch, and no other, with df.schema's columns."""
    for r in ranks:
        test.assertEqual(len(r), epochs, "a rank saw another number of epochs")
    for epoch in range(epochs):
        ids = sorted(i for r in ranks for i in r[epoch]["ids"])
        test.assertEqual(ids, list(range(first, first + ROWS)), f"epoch {epoch}: rows fed not exactly once")
    for r in ranks:
        test.assertEqual(r[0]["columns"], ["id", "x", "label"])  # df.schema's, label last


def spark_env():
    """Have Spark's Python workers run this interpreter and import this checkout's spindle package and this module."""
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join([support.PYTHON_DIR, here, os.environ.get("PYTHONPATH", "")])
    os.environ["PYSPARK_PYTHON"] = sys.executable


# The JVM of a test's Spark session: short-lived and small, so C1's code
# and the serial collector (a local session and its work: 22-27 CPU-s with
# the defaults, 15 with these).
SPARK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@unittest.skipIf(pyspark is None, "needs pyspark, pyarrow and cloudpickle (make deps installs them into $SPINDLE_PY_VENV)")
@unittest.skipIf(shutil.which("java") is None, "needs Java for Spark (make deps)")
class SparkCase(unittest.TestCase):
    """A Spark session with master MASTER (and extra_conf()) for the class's tests; every job's binary from support."""

    MASTER = None

    @classmethod
    def extra_conf(cls):
        return {}

    @classmethod
    def setUpClass(cls):
        spark_env()
        b = (SparkSession.builder.master(cls.MASTER).appName("spindle-test")
             .config("spark.ui.enabled", "false").config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
             .config("spark.driver.extraJavaOptions", SPARK_JAVA_OPTIONS))
        for k, v in cls.extra_conf().items():
            b = b.config(k, v)
        cls.spark = b.getOrCreate()

    @classmethod
    def tearDownClass(cls):
        cls.spark.stop()

    def setUp(self):
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(self)


class SparkTest(SparkCase):
    # Two task slots, and a failed task is tried up to 4 times.
    MASTER = "local[2,4]"

    def frame(self):
        return frame(self.spark)

    def check_fed_once_per_epoch(self, ranks, epochs):
        check_fed_once_per_epoch(self, ranks, epochs)

    def test_train_feeds_every_row_once_per_epoch(self):
        ranks = sspark.train(self.frame(), read_everything, num_workers=2, label="label", epochs=2,
                             all_ranks=True, stream=False, via="jvm")
        self.assertEqual(len(ranks), 2)
        self.assertTrue(all(len(r) == 2 for r in ranks), "each rank sees two epochs")
        self.assertTrue(all(r[0]["ids"] for r in ranks), "a rank got no rows")
        self.check_fed_once_per_epoch(ranks, 2)

    def test_retried_task_does_not_feed_twice(self):
        sspark._partition_pusher = failing_pusher
        try:
            ranks = sspark.train(self.frame(), read_everything, num_workers=2, label="label", epochs=1,
                                 all_ranks=True, stream=False, via="python")
        finally:
            sspark._partition_pusher = REAL_PUSHER
        self.check_fed_once_per_epoch(ranks, 1)

    def test_retried_task_does_not_feed_twice_from_the_jvm(self):
        # Partition 1 holds ids 5000-9999, pushed in batches of 1,000.
        ranks = sspark.train(faulty_frame(self.spark, 8500, _fail), read_everything, num_workers=2, label="label",
                             epochs=1, all_ranks=True, stream=False, via="jvm")
        self.check_fed_once_per_epoch(ranks, 1)

    def test_killed_worker_does_not_feed_twice(self):
        sspark._partition_pusher = killing_pusher
        try:
            ranks = sspark.train(self.frame(), read_everything, num_workers=2, label="label", epochs=2,
                                 all_ranks=True, stream=False, via="python")
        finally:
            sspark._partition_pusher = REAL_PUSHER
        self.check_fed_once_per_epoch(ranks, 2)

    def test_push_into_a_submitted_job(self):
        df = self.frame()
        reader = "import spindle\nfor ep in spindle.epochs():\n    rows = sum(len(b['id']) for b in ep)\n"
        for via in ("jvm", "python"):
            with self.subTest(via=via):
                job = spindle.submit([sys.executable, "-c", reader], master="local[2]", input="flight-put:",
                                     label_column="label", conf={"spindle.flight.put.schema": sspark.push_schema(df.schema)},
                                     stream=False)
                with job:
                    self.assertEqual(sspark.push(df, job, via=via), ROWS)
                    self.assertEqual(job.wait(timeout=support.scaled(120)), 0)

    def test_every_type_arrives_as_spark_computed_it(self):
        df = self.spark.range(0, 1000, numPartitions=2).selectExpr(
            "id", "id % 2 = 0 as b", "cast(id % 100 as byte) as i8", "cast(id as short) as i16",
            "cast(id as int) as i32", "cast(id * 0.5 as float) as f32", "cast(id as double) * 0.25 as f64",
            "if(id % 7 = 0, null, concat('row-é', id)) as s", "cast(concat('b', id) as binary) as bin",
            "date_add(date'2026-01-01', cast(id as int)) as d", "cast(id % 2 as float) as label")
        self.assertEqual(sspark.push_schema(df.schema), "id:int64,b:bool,i8:int8,i16:int16,i32:int32,f32:float32,"
                         "f64:float64,s:string,bin:binary,d:date32,label:float32")
        want = {r.id: (r.id, r.b, r.i8, r.i16, r.i32, r.f32, r.f64, r.s, bytes(r.bin), r.d.isoformat(), r.label)
                for r in df.collect()}
        for via in ("jvm", "python"):
            with self.subTest(via=via):
                ranks = sspark.train(df, read_rows, num_workers=2, label="label", all_ranks=True, stream=False, via=via)
                got = {row[0]: row for rank in ranks for row in rank}
                self.assertEqual(sum(len(r) for r in ranks), len(want), "rows fed not exactly once")
                self.assertEqual(got, want)

    def test_push_path_refused_naming_it(self):
        df = self.frame()
        job = spindle.submit(["sh", "-c", "sleep 60"], master="local[1]", input="flight-put:",
                             conf={"spindle.flight.put.schema": sspark.push_schema(df.schema)}, stream=False)
        with job:
            with self.assertRaisesRegex(spindle.SpindleError, r"via='fast': want 'auto', 'jvm' or 'python'"):
                sspark.push(df, job, via="fast")
            # A Spark session that cannot load the pusher (no jar in this install, Spark before 4).
            with mock.patch.object(sspark, "_jvm_pusher", return_value=None), \
                    self.assertRaisesRegex(spindle.SpindleError, r"cannot load Spindle's JVM pusher .*use via='python'"):
                sspark.push(df, job, via="jvm")
            job.kill()

    def test_job_ending_first_cancels_the_push(self):
        df = self.frame()
        job = spindle.submit(["sh", "-c", "exit 0"], master="local[2]", input="flight-put:",
                             conf={"spindle.flight.put.schema": sspark.push_schema(df.schema)}, stream=False)
        with job, self.assertRaisesRegex(spindle.SpindleError, "ended before Spark pushed"):
            sspark.push(df, job)

    def test_schema_refuses_what_push_cannot_carry(self):
        schema = T.StructType([T.StructField("x", T.FloatType()), T.StructField("when", T.TimestampType())])
        with self.assertRaisesRegex(spindle.SpindleError, "column 'when' is timestamp"):
            sspark.push_schema(schema)
        self.assertEqual(sspark.push_schema(T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.DoubleType()),
                                                          T.StructField("s", T.StringType())])),
                         "a:int64,b:float64,s:string")


class SparkSessionTest(SparkCase):
    """spindle.spark.train into a warm session with pushed input: each job its own DataFrame's rows."""

    MASTER = "local[2,4]"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        os.environ["SPINDLE_BINARY"] = support.spindle_binary(None)
        schema = sspark.push_schema(frame(cls.spark).schema)
        cls.session = spindle.Session(num_executors=2, input="flight-put:", label_column="label", epochs=2,
                                      conf={"spindle.flight.put.schema": schema}, stream=False)

    @classmethod
    def tearDownClass(cls):
        cls.session.close()
        super().tearDownClass()

    def test_two_jobs_each_get_their_own_rows_once_per_epoch(self):
        for first in (0, 10 * ROWS):
            ranks = sspark.train(frame(self.spark, first), read_everything, session=self.session, all_ranks=True)
            self.assertTrue(all(r[0]["ids"] for r in ranks), "a rank got no rows")
            check_fed_once_per_epoch(self, ranks, 2, first)

    def test_a_job_without_a_push_reads_nothing_and_the_next_is_fed(self):
        self.assertEqual(self.session.run(read_everything), [{"ids": [], "columns": None}] * 2)
        ranks = sspark.train(frame(self.spark, 3 * ROWS), read_everything, session=self.session, all_ranks=True)
        check_fed_once_per_epoch(self, ranks, 2, 3 * ROWS)

    def check_pushed_with(self, pusher, first):
        """A session job fed rows from first with pusher in place of spindle.spark's gets every row once per epoch."""
        sspark._partition_pusher = pusher
        try:
            ranks = sspark.train(frame(self.spark, first), read_everything, session=self.session, all_ranks=True,
                                 via="python")
        finally:
            sspark._partition_pusher = REAL_PUSHER
        check_fed_once_per_epoch(self, ranks, 2, first)

    def test_retried_task_does_not_feed_twice(self):
        self.check_pushed_with(failing_pusher, 5 * ROWS)

    def test_killed_worker_does_not_feed_twice(self):
        self.check_pushed_with(killing_pusher, 7 * ROWS)

    def test_push_into_a_started_session_job(self):
        run = self.session.start(read_everything, pushed=True)
        self.assertEqual(sspark.push(frame(self.spark, 9 * ROWS), run), ROWS)
        check_fed_once_per_epoch(self, run.results(all_ranks=True), 2, 9 * ROWS)

    def test_a_job_that_stops_reading_early_leaves_the_next_its_own_rows(self):
        with self.assertRaisesRegex(spindle.SpindleError, "ended before Spark pushed"):
            sspark.train(frame(self.spark, 11 * ROWS), read_one_batch, session=self.session)
        ranks = sspark.train(frame(self.spark, 13 * ROWS), read_everything, session=self.session, all_ranks=True)
        check_fed_once_per_epoch(self, ranks, 2, 13 * ROWS)

    def test_what_the_session_set_is_refused_naming_it(self):
        df = frame(self.spark)
        for kw, what in (({"epochs": 3}, "epochs=3"), ({"label": "x"}, "label='x'"), ({"master": "local[2]"}, "master"),
                         ({"num_workers": 4}, "num_workers=4")):
            with self.subTest(kw=kw), self.assertRaisesRegex(spindle.SpindleError, what):
                sspark.train(df, read_everything, session=self.session, **kw)
        with self.assertRaisesRegex(spindle.SpindleError, "is not the session's spindle.flight.put.schema"):
            sspark.train(df.selectExpr("id", "x"), read_everything, session=self.session)
        with self.assertRaisesRegex(spindle.SpindleError, "spindle.flight.put.schema"):
            spindle.Session(num_executors=2, input="flight-put:", epochs=1)


class SparkStandaloneSessionTest(SparkCase):
    """spindle.spark.train into a new job and a warm session on a standalone cluster (a master and a worker on this host)."""

    MASTER = "local[2,4]"

    def test_two_jobs_each_get_their_own_rows_once_per_epoch(self):
        master, _, _ = test_session.standalone_cluster(self, {"w1": ((), 4)})
        # A new job first: it also waits for the worker to register.
        ranks = test_session.until_placed(lambda: sspark.train(frame(self.spark), read_everything, num_workers=2,
                                                               label="label", epochs=2, all_ranks=True, master=master,
                                                               python=sys.executable, stream=False))
        check_fed_once_per_epoch(self, ranks, 2)
        s = test_session.start_session(master, num_executors=2, input="flight-put:", label_column="label", epochs=2,
                                       conf={"spindle.flight.put.schema": sspark.push_schema(frame(self.spark).schema)})
        self.addCleanup(s.close)
        for first in (0, 10 * ROWS):
            ranks = sspark.train(frame(self.spark, first), read_everything, session=s, all_ranks=True)
            check_fed_once_per_epoch(self, ranks, 2, first)


class SparkYARNTest(SparkCase):
    """Spark local, Spindle on YARN in client mode (spindle minicluster's, in containers that do not see this host's files)."""

    MASTER = "local[2,4]"

    @unittest.skipUnless(test_session.can_hide_directories(), "needs root and unshare -m, to hide the session's directory from YARN's containers")
    def test_one_program_feeds_yarn_and_local_jobs_and_a_yarn_session(self):
        hidden = test_session.yarn_minicluster(self)
        # The ranks in YARN's containers cannot import this module: its
        # functions travel by value.
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.addCleanup(cloudpickle.unregister_pickle_by_value, sys.modules[__name__])
        job = dict(executor_memory="512m", python=sys.executable, stream=False)
        for master in ("yarn", "local[2]"):
            with self.subTest(master=master):
                ranks = sspark.train(frame(self.spark), read_everything, num_workers=2, label="label", epochs=2,
                                     all_ranks=True, master=master, conf=test_session.LOOPBACK, **job)
                check_fed_once_per_epoch(self, ranks, 2)
        schema = sspark.push_schema(frame(self.spark).schema)
        with mock.patch.object(tempfile, "tempdir", hidden):
            s = spindle.Session(master="yarn", num_executors=2, input="flight-put:", label_column="label", epochs=2,
                                conf=dict(test_session.LOOPBACK, **{"spindle.flight.put.schema": schema}), timeout=support.scaled(180),
                                **job)
        self.addCleanup(s.close)
        self.assertEqual(sorted(s.addrs), [0, 1], "both ranks serve over TCP")
        for first in (0, 10 * ROWS):
            ranks = sspark.train(frame(self.spark, first), read_everything, session=s, all_ranks=True)
            check_fed_once_per_epoch(self, ranks, 2, first)
        self.assertEqual(s.job.status, "RUNNING", "the session's executors stay between jobs")


class SparkClusterTest(SparkCase):
    """Spark in local-cluster mode: executors are JVM processes of their own, which a test can kill."""

    # Two workers of one core each.
    MASTER = "local-cluster[2,1,1024]"

    @classmethod
    def extra_conf(cls):
        # A task is tried up to 4 times; the executors import from here too.
        return {"spark.task.maxFailures": "4", "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"]}

    def test_killed_executor_does_not_feed_twice(self):
        marker = os.path.join(self.enterContext(tempfile.TemporaryDirectory()), "killed")
        sspark._partition_pusher = executor_killer(marker)
        try:
            ranks = sspark.train(frame(self.spark), read_everything, num_workers=2, label="label", epochs=2,
                                 all_ranks=True, stream=False, via="python")
        finally:
            sspark._partition_pusher = REAL_PUSHER
        self.assertTrue(os.path.exists(marker), "no Spark executor was killed")
        check_fed_once_per_epoch(self, ranks, 2)

    def test_killed_executor_does_not_feed_twice_from_the_jvm(self):
        marker = os.path.join(self.enterContext(tempfile.TemporaryDirectory()), "killed")
        # Partition 2 holds ids 10000-14999, pushed in batches of 1,000.
        df = faulty_frame(self.spark, 13500, kill(_executor_jvm, marker))
        ranks = sspark.train(df, read_everything, num_workers=2, label="label", epochs=2, all_ranks=True,
                             stream=False, via="jvm")
        self.assertTrue(os.path.exists(marker), "no Spark executor was killed")
        check_fed_once_per_epoch(self, ranks, 2)


if __name__ == "__main__":
    unittest.main()
