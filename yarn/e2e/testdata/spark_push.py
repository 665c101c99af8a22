"""A notebook-like driver program: Spark on YARN computes a DataFrame and spindle.spark.train feeds it to jobs.

    python spark_push.py SPARK_JARS_DIR ROWS SPINDLE_MASTER...

Spark runs with master yarn (HADOOP_CONF_DIR names the cluster), its
executors in YARN containers. From that one Spark session, a 2-rank
Spindle job runs on each SPINDLE_MASTER in turn (yarn, a standalone
spindle:// URL), each rank returning the ids it was fed. Prints SPARK_APP
with Spark's application id and, per master, FED with how many ids came
back, how many distinct, and whether they are exactly 0..ROWS-1; exits 1
when they are not.
"""
import json
import os
import sys

from pyspark.sql import SparkSession

import spindle.spark


def read_ids():
    """On each rank: the ids it was fed, in one epoch."""
    import spindle
    ids = []
    for batch in spindle.batches():
        ids.extend(int(i) for i in batch["id"])
    return ids


def session(jars):
    # Spark's Python workers, in the YARN containers, run this interpreter.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master("yarn").appName("spindle-spark-on-yarn")
            .config("spark.submit.deployMode", "client")
            .config("spark.executor.instances", "2").config("spark.executor.cores", "1")
            # The smallest executors Spark starts: 450 MiB is its floor.
            .config("spark.executor.memory", "450m").config("spark.executor.memoryOverhead", "128m")
            .config("spark.yarn.am.memory", "450m").config("spark.yarn.am.memoryOverhead", "128m")
            .config("spark.dynamicAllocation.enabled", "false")
            # Spark's jars are already on every node (this machine): no upload.
            .config("spark.yarn.jars", "local:" + os.path.join(jars, "*"))
            .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
            # The mini cluster's rack mapping is a class of Hadoop's tests,
            # which Spark's Hadoop client does not have.
            .config("spark.hadoop.net.topology.node.switch.mapping.impl", "org.apache.hadoop.net.ScriptBasedMapping")
            .getOrCreate())


def main():
    jars, rows, masters = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    spark = session(jars)
    ok = True
    try:
        print("SPARK_APP", spark.sparkContext.applicationId, flush=True)
        df = spark.range(rows, numPartitions=4).selectExpr(
            "id", "cast(id * 0.5 as float) as x", "cast(id % 2 as float) as label")
        for master in masters:
            ranks = spindle.spark.train(df, read_ids, num_workers=2, label="label", master=master, all_ranks=True,
                                        python=sys.executable, executor_memory="256m",
                                        # The test counts the YARN applications of this name.
                                        name="spark-into-spindle",
                                        # Correctness, not failure detection, on a loaded machine.
                                        conf={"spindle.network.interface": "lo",
                                              "spindle.executor.heartbeatTimeout": "60s"})
            ids = sorted(i for r in ranks for i in r)
            once = ids == list(range(rows)) and all(ranks)
            ok = ok and once
            print("FED", json.dumps({"master": master, "ranks": [len(r) for r in ranks], "ids": len(ids),
                                     "distinct": len(set(ids)), "exactly_once": once}), flush=True)
    finally:
        spark.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
