#!/usr/bin/env python3
"""A Spark DataFrame fed to 2 training processes: spindle.spark.train vs TensorFlowOnSpark's InputMode.SPARK.

Both feed the same DataFrame (16 float32 features and a label, computed by
Spark) from one warm Spark session (local-cluster[2,1,1024]: two executor
JVMs, as TensorFlowOnSpark wants one node per executor) to two processes
that only count the rows, and each run is timed whole: from the call to
every row having reached a process and the processes having ended
(TFCluster.run, train for one epoch and shutdown; Spindle's train, which
starts its job, pushes and waits). Runs alternate, RUNS of each, and the
medians are compared.

Run with $SPINDLE_TEST_VENV's python (TensorFlow, pyspark, pandas,
tensorflowonspark and cloudpickle: make deps) and Java. Without
tensorflowonspark it says why and stops.
"""

import glob
import json
import os
import statistics
import tempfile
import time

import bench_spark
import spindle.spark


def tfos_main(args, ctx):
    """TensorFlowOnSpark's node function: count the rows its feed gives, then record them."""
    import json
    import os
    rows = 0
    feed = ctx.get_data_feed(train_mode=True)
    while not feed.should_stop():
        rows += len(feed.next_batch(8192))
    with open(os.path.join(args["out"], f"node-{ctx.executor_id}.json"), "w") as f:
        json.dump({"rows": rows}, f)


def spindle_main():
    """Spindle's rank function: count the rows its feed gives."""
    import spindle
    return sum(len(x) for x, _ in spindle.tensors())


def run_tfos(sc, df, out):
    from tensorflowonspark import TFCluster
    for f in glob.glob(os.path.join(out, "node-*.json")):
        os.remove(f)
    start = time.time()
    cluster = TFCluster.run(sc, tfos_main, {"out": out}, 2, 0, False, TFCluster.InputMode.SPARK)
    cluster.train(df.rdd.map(lambda r: (list(r[:16]), r[16])), num_epochs=1)
    cluster.shutdown()
    took = time.time() - start
    rows = 0
    for f in glob.glob(os.path.join(out, "node-*.json")):
        with open(f) as fh:
            rows += json.load(fh)["rows"]
    return took, rows


def run_spindle(df):
    start = time.time()
    ranks = spindle.spark.train(df, spindle_main, num_workers=2, label="label", feed="tensor", batch_rows=8192,
                                stream=False, all_ranks=True)
    return time.time() - start, sum(ranks)


def main():
    a = bench_spark.parse_args(__doc__)
    try:
        import tensorflowonspark  # noqa: F401
    except ImportError as e:
        print(f"  TensorFlowOnSpark: skipped, it does not import here: {e}")
        return
    bench_spark.worker_env()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("spindle-bench-tfos")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.task.maxFailures", "1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = bench_spark.frame(spark, a.rows, a.partitions)
    bench_spark.frame(spark, 1000, 2).count()  # a warm session
    out = tempfile.mkdtemp(prefix="spindle-bench-tfos-")
    times = {"spindle": [], "tfos": []}
    for i in range(a.runs):
        for name in ("spindle", "tfos"):
            took, rows = run_spindle(df) if name == "spindle" else run_tfos(spark.sparkContext, df, out)
            if rows != a.rows:
                print(f"  {name} run {i + 1}: {rows} rows reached the processes, not {a.rows}")
                return
            times[name].append(took)
            print(f"  {name} run {i + 1}: {took:.1f} s ({a.rows / took / 1e6:.3f}M rows/s whole run)", flush=True)
    s, t = statistics.median(times["spindle"]), statistics.median(times["tfos"])
    print(f"  medians of {a.runs}: spindle.spark.train {s:.1f} s, TensorFlowOnSpark InputMode.SPARK {t:.1f} s: "
          f"Spindle {t / s:.1f}x faster (load average {os.getloadavg()[0]:.0f})")
    spark.stop()


if __name__ == "__main__":
    main()
