"""A notebook-like driver program: Spark on YARN computes DataFrames and spindle.spark.train feeds them to jobs.

    python spark_push.py SPARK_JARS_DIR ROWS SPINDLE_MASTER...

Spark runs with master yarn (HADOOP_CONF_DIR names the cluster), its
executors in YARN containers, its driver on SPARK_DRIVER_HOST (127.0.0.1
by default). From that one Spark session, in turn: for each
SPINDLE_MASTER (yarn, local[N], a standalone spindle:// URL) a new 2-rank
Spindle job fed one epoch of a DataFrame; for each session:MASTER a warm
2-rank session on MASTER whose two jobs are each fed 2 epochs of a
DataFrame of their own (spindle.spark.train(df, fn, session=s)). Each
rank returns the ids it was fed per epoch. Prints SPARK_APP with Spark's
application id and, per job, FED with the master, the session job's
number (0 for a new job), the rows each rank got, how many ids came back
per epoch, whether each epoch had exactly that job's ids once, the
push endpoint the Spark tasks dialed and whether they pushed from the JVM
or from Python; exits 1 when a job's rows were not
fed exactly once.
"""
import json
import os
import sys

from pyspark.sql import SparkSession

import spindle
import spindle.spark

# How long a session waits for its ranks: the test's 300 s, stretched
# as its timings are (testutil.Scale), in SPINDLE_TEST_WAIT_SECONDS.
SESSION_WAIT = float(os.environ.get("SPINDLE_TEST_WAIT_SECONDS", "300"))

# Correctness, not failure detection, on a loaded machine; the test counts
# the YARN applications of this name.
JOB = dict(python=sys.executable, executor_memory="256m", name="spark-into-spindle",
           conf={"spindle.network.interface": "lo", "spindle.executor.heartbeatTimeout": "60s"})

# The endpoint each push's Spark tasks dialed (from the JVM, the default
# where the session loads the pusher's jar, or from Python), recorded as
# the push reads it (on this host), last one last.
endpoints = []
_real_producer_files = spindle.spark._producer_files


def _recording_producer_files(*args):
    endpoint, token, ca = _real_producer_files(*args)
    endpoints.append(endpoint)
    return endpoint, token, ca


spindle.spark._producer_files = _recording_producer_files

# Which way each push went: "jvm" when the Spark session loaded the
# pusher's jar (and shipped it to its YARN executors), else "python".
pushers = []
_real_jvm_pusher = spindle.spark._jvm_pusher


def _recording_jvm_pusher(spark):
    cls = _real_jvm_pusher(spark)
    pushers.append("python" if cls is None else "jvm")
    return cls


spindle.spark._jvm_pusher = _recording_jvm_pusher


def read_epochs():
    """On each rank: per epoch, the ids it was fed."""
    import spindle
    return [[int(i) for b in ep for i in b["id"]] for ep in spindle.epochs("batches")]


JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def session(jars):
    # Spark's Python workers, in the YARN containers, run this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master("yarn").appName("spindle-spark-on-yarn")
            .config("spark.submit.deployMode", "client")
            .config("spark.executor.instances", "2").config("spark.executor.cores", "1")
            # About the smallest executors Spark starts: their JVM's heap must
            # be 450 MiB, which the serial collector (JAVA_OPTIONS) reports
            # as 435 of -Xmx450m. 480 + 128 rounds up to the same 640 MiB
            # container as 450 + 128.
            .config("spark.executor.memory", "480m").config("spark.executor.memoryOverhead", "128m")
            .config("spark.yarn.am.memory", "450m").config("spark.yarn.am.memoryOverhead", "128m")
            .config("spark.dynamicAllocation.enabled", "false")
            # Short-lived, small JVMs on a busy machine: C1's code and the
            # serial collector cost a third less CPU than the defaults.
            .config("spark.driver.extraJavaOptions", JAVA_OPTIONS)
            .config("spark.executor.extraJavaOptions", JAVA_OPTIONS)
            .config("spark.yarn.am.extraJavaOptions", JAVA_OPTIONS)
            # Spark's jars are already on every node (this machine): no upload.
            .config("spark.yarn.jars", "local:" + os.path.join(jars, "*"))
            .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", os.environ.get("SPARK_DRIVER_HOST", "127.0.0.1"))
            # The mini cluster's rack mapping is a class of Hadoop's tests,
            # which Spark's Hadoop client does not have.
            .config("spark.hadoop.net.topology.node.switch.mapping.impl", "org.apache.hadoop.net.ScriptBasedMapping")
            .getOrCreate())


def frame(spark, first, rows):
    return spark.range(first, first + rows, numPartitions=4).selectExpr(
        "id", "cast(id * 0.5 as float) as x", "cast(id % 2 as float) as label")


def report(master, job, ranks, epochs, first, rows):
    """Print the FED line of one job's ranks (read_epochs's results); return whether every epoch had its ids once."""
    per_epoch = [sorted(i for r in ranks for i in r[e]) for e in range(epochs)] if all(len(r) == epochs for r in ranks) else []
    once = len(per_epoch) == epochs and all(ids == list(range(first, first + rows)) for ids in per_epoch) and all(
        r[0] for r in ranks)
    print("FED", json.dumps({"master": master, "job": job, "ranks": [len(r[0]) if r else 0 for r in ranks],
                             "ids": [len(ids) for ids in per_epoch], "exactly_once": once,
                             "endpoint": endpoints[-1], "pusher": pushers[-1]}), flush=True)
    return once


def feed_session(spark, master, rows):
    """Two jobs of a warm session on master, each fed 2 epochs of a DataFrame of its own; return whether both were fed once."""
    df = frame(spark, 0, rows)
    ok = True
    with spindle.Session(master=master, num_executors=2, input="flight-put:", label_column="label", epochs=2,
                         stream=False, timeout=SESSION_WAIT, **dict(JOB, conf=dict(JOB["conf"], **{
                             "spindle.flight.put.schema": spindle.spark.push_schema(df.schema)}))) as s:
        for job in (1, 2):
            first = (job - 1) * rows
            ranks = spindle.spark.train(frame(spark, first, rows), read_epochs, session=s, all_ranks=True)
            ok = report("session:" + master, job, ranks, 2, first, rows) and ok
    return ok


def main():
    jars, rows, masters = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    spark = session(jars)
    ok = True
    try:
        print("SPARK_APP", spark.sparkContext.applicationId, flush=True)
        for master in masters:
            if master.startswith("session:"):
                ok = feed_session(spark, master.removeprefix("session:"), rows) and ok
                continue
            ranks = spindle.spark.train(frame(spark, 0, rows), read_epochs, num_workers=2, label="label",
                                        master=master, all_ranks=True, **JOB)
            ok = report(master, 0, ranks, 1, 0, rows) and ok
    finally:
        spark.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
