#!/usr/bin/env python3
"""A Spark DataFrame fed to a 2-rank job: pushed from the Spark tasks vs Spark alone vs written to Parquet first.

The DataFrame (16 float32 features and a label) is computed by Spark, not
read from a file. On one warm Spark session (a first small job has
started the JVM's Python workers, as in a notebook), each round runs, in
turn:

- Spark alone, noop: the DataFrame written to Spark's noop sink, which
  computes every row and converts none (what Spark can make at most).
- Spark alone, mapInArrow: the DataFrame's Arrow batches handed to a
  function that only counts them (the fastest any consumer of Spark's
  Arrow batches gets them, so the bound for pushing).
- Pushed from the JVM: spindle.spark.train, its tasks pushing with the
  jar the package carries (via="jvm", the default where it loads). Rows
  per second reaching the training processes (rows over the span from the
  first batch on any rank to the last), when the first batch reached a
  rank after the push began (Spark's first task starts after that), and
  the whole run's time.
- Pushed from Python: the same through mapInArrow (via="python"), the
  first batch timed from the first Spark task's start.
- Parquet: df.write.parquet, then spindle.run reading the files.
- Petastorm, the baseline: make_spark_converter (Spark writes the
  DataFrame to Parquet) and 2 PyTorch processes reading a shard each
  through its make_torch_dataloader, whole run, against a push into 2
  ranks that import torch and make torch tensors of every batch.
  Petastorm does not import beside this pyspark's pyarrow, so it runs in
  the baseline venv ($SPINDLE_BASELINE_VENV, make bench-deps: pyspark 3.5,
  pyarrow 14) on a Spark session of its own (scripts/bench_petastorm.py),
  asked for one figure a round; Spark alone (noop) is timed in both.

--runs rounds (default 3); medians are compared.

Run with $SPINDLE_PY_VENV's python (pyspark, cloudpickle) and Java.
"""

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import bench_spark
import spindle
import spindle.spark


def read_feed():
    """On each rank: rows read, and when the first and the last batch arrived."""
    import time

    import spindle
    rows, first, last = 0, None, None
    for ep in spindle.epochs("tensors"):
        for x, _ in ep:
            now = time.time()
            first = first or now
            last = now
            rows += len(x)
    return rows, first, last


def count_rows(batches):
    """A mapInArrow function that only counts the rows and times the first and the last batch."""
    import time

    import pyarrow as pa
    n, first, last = 0, None, None
    for b in batches:
        last = time.time()
        first = first or last
        n += b.num_rows
    yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64()), pa.array([first or 0.0]), pa.array([last or 0.0])],
                                     names=["rows", "first", "last"])


REAL_PUSHER = spindle.spark._partition_pusher


def stamp_task_starts(path):
    """Have every pushing Spark task append when it started to path (the library's function, unchanged, runs inside); return what undoes it."""
    pusher = REAL_PUSHER

    def stamped(*args):
        push_partition = pusher(*args)

        def run(batches):
            import time
            with open(path, "a") as f:
                f.write(f"{time.time()}\n")
            yield from push_partition(batches)
        return run
    spindle.spark._partition_pusher = stamped
    return lambda: setattr(spindle.spark, "_partition_pusher", REAL_PUSHER)


REAL_RUN_SPARK = spindle.spark._run_spark


def stamp_push_start(path):
    """Have the push write when it began to path (the library's function, unchanged, runs inside); return what undoes it."""

    def stamped(*args):
        with open(path, "a") as f:
            f.write(f"{time.time()}\n")
        return REAL_RUN_SPARK(*args)
    spindle.spark._run_spark = stamped
    return lambda: setattr(spindle.spark, "_run_spark", REAL_RUN_SPARK)


def first_task(path):
    with open(path) as f:
        return min(float(line) for line in f)


def rate(ranks):
    rows = sum(r[0] for r in ranks)
    return rows / max(max(r[2] for r in ranks) - min(r[1] for r in ranks), 1e-9)


def read_feed_torch():
    """On each rank of the Petastorm comparison: read_feed's figures, the rank importing torch and making tensors as Petastorm's do."""
    import time

    import spindle
    import torch
    rows, first, last = 0, None, None
    for ep in spindle.epochs("tensors"):
        for x, y in ep:
            x, y = torch.from_numpy(x), torch.from_numpy(y)
            now = time.time()
            first = first or now
            last = now
            rows += len(x)
    return rows, first, last


class Petastorm:
    """scripts/bench_petastorm.py in the baseline venv, asked for one figure at a time so its rounds interleave."""

    def __init__(self, python, rows, partitions):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_petastorm.py")
        self.proc = subprocess.Popen([python, script, "--rows", str(rows), "--partitions", str(partitions)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for line in self.proc.stdout:
            if line.strip() == "ready":
                return
        raise RuntimeError(f"{script} under {python} exited {self.proc.wait()} before it was ready")

    def ask(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("BENCH "):
                return json.loads(line[len("BENCH "):])
        raise RuntimeError(f"bench_petastorm.py exited {self.proc.wait()} during {cmd}")

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait()


def start_petastorm(rows, partitions):
    """The Petastorm baseline's process, or None (saying why) when the baseline venv is missing or fails."""
    venv = os.environ.get("SPINDLE_BASELINE_VENV", os.path.expanduser("~/.cache/spindle-baseline-venv"))
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        print(f"  Petastorm's make_spark_converter: skipped, no {python} (make bench-deps)")
        return None
    try:
        return Petastorm(python, rows, partitions)
    except (OSError, RuntimeError) as e:
        print(f"  Petastorm's make_spark_converter: skipped, {e}")
        return None


class Rounds:
    """The bench's runs on one DataFrame, each kind's figures kept for the medians."""

    def __init__(self, spark, df, rows, tmp, petastorm):
        self.spark, self.df, self.rows, self.tmp, self.petastorm = spark, df, rows, tmp, petastorm
        self.got = {}
        self.opts = dict(num_workers=2, label="label", feed="tensor", batch_rows=8192, stream=False, all_ranks=True)

    def keep(self, **figures):
        for k, v in figures.items():
            self.got.setdefault(k, []).append(v)

    def spark_alone(self):
        start = time.time()
        self.df.write.format("noop").mode("overwrite").save()
        self.keep(noop=self.rows / (time.time() - start))
        got = self.df.mapInArrow(count_rows, "rows long, first double, last double").collect()
        self.keep(arrow=self.rows / (max(r["last"] for r in got) - min(r["first"] for r in got)))

    def pushed(self, i, via):
        """A push from via's side ("jvm" or "python"), figures under key (push, push_py)."""
        key, stamp = ("push", stamp_push_start) if via == "jvm" else ("push_py", stamp_task_starts)
        stamps = os.path.join(self.tmp, f"{via}-starts-{i}")
        restore = stamp(stamps)
        start = time.time()
        try:
            ranks = spindle.spark.train(self.df, read_feed, via=via, **self.opts)
        finally:
            restore()
        end = time.time()
        assert sum(r[0] for r in ranks) == self.rows, "rows lost"
        self.keep(**{key: rate(ranks), key + "_first": min(r[1] for r in ranks) - first_task(stamps),
                     key + "_total": end - start})

    def versus_petastorm(self):
        start = time.time()
        ranks = spindle.spark.train(self.df, read_feed_torch, **self.opts)
        self.keep(push_torch_total=time.time() - start)
        assert sum(r[0] for r in ranks) == self.rows, "rows lost"
        if not self.petastorm:
            return
        self.keep(noop35=self.rows / self.petastorm.ask("noop")["noop"])
        got = self.petastorm.ask("petastorm")
        if sum(got["rows_by_rank"]) != self.rows:
            print(f"  warning: Petastorm's ranks read {got['rows_by_rank']} rows, {self.rows} in all expected", flush=True)
        self.keep(pt_write=got["write"], pt_read=got["read"], pt_total=got["total"])

    def parquet(self, i):
        out = os.path.join(self.tmp, f"df-{i}")
        start = time.time()
        self.df.write.parquet(out)
        written = time.time()
        ranks = spindle.run(read_feed, input=os.path.join(out, "*.parquet"), label_column="label",
                            **{k: v for k, v in self.opts.items() if k != "label"})
        self.keep(pq=rate(ranks), pq_write=written - start, pq_total=time.time() - start)
        shutil.rmtree(out, ignore_errors=True)

    def round(self, i):
        self.spark_alone()
        # The two paths in turn, the first alternating round by round.
        paths = ["jvm", "python"]
        for via in paths if i % 2 == 0 else paths[::-1]:
            self.pushed(i, via)
        self.versus_petastorm()
        self.parquet(i)
        m = {k: v[-1] for k, v in self.got.items()}
        print(f"  round {i + 1}: Spark noop {m['noop'] / 1e6:.2f}M rows/s, Spark mapInArrow {m['arrow'] / 1e6:.2f}M, "
              f"pushed from the JVM {m['push'] / 1e6:.2f}M (whole run {m['push_total']:.1f} s; into torch ranks "
              f"{m['push_torch_total']:.1f} s), from Python {m['push_py'] / 1e6:.2f}M (whole run "
              f"{m['push_py_total']:.1f} s), Parquet read {m['pq'] / 1e6:.2f}M (write {m['pq_write']:.1f} s, "
              f"whole run {m['pq_total']:.1f} s)", flush=True)
        if self.petastorm:
            print(f"  round {i + 1}: Petastorm: Spark 3.5 noop {m['noop35'] / 1e6:.2f}M rows/s, make_spark_converter "
                  f"{m['pt_write']:.1f} s, 2 torch ranks reading {m['pt_read']:.1f} s, whole run {m['pt_total']:.1f} s",
                  flush=True)

    def report(self, runs):
        m = {k: statistics.median(v) for k, v in self.got.items()}
        print(f"  medians of {runs} (load average {os.getloadavg()[0]:.0f}):")
        print(f"    Spark alone: noop {m['noop'] / 1e6:.2f}M rows/s, mapInArrow into a counting function "
              f"{m['arrow'] / 1e6:.2f}M rows/s")
        print(f"    pushed from the JVM: {m['push'] / 1e6:.2f}M rows/s reaching the ranks, first batch "
              f"{m['push_first']:.2f} s after the push began, whole run {m['push_total']:.1f} s")
        print(f"    pushed from Python: {m['push_py'] / 1e6:.2f}M rows/s reaching the ranks, first batch "
              f"{m['push_py_first']:.2f} s after the first Spark task started, whole run {m['push_py_total']:.1f} s")
        print(f"    Parquet: write {m['pq_write']:.1f} s, read by Spindle {m['pq'] / 1e6:.2f}M rows/s, whole run "
              f"{m['pq_total']:.1f} s")
        print(f"    push from the JVM rows/s = {m['push'] / m['push_py']:.2f}x the push from Python's, "
              f"whole run {m['push_py_total'] / m['push_total']:.2f}x faster")
        print(f"    push rows/s = {m['push'] / m['pq']:.2f}x a Parquet read's, {m['push'] / m['arrow']:.2f}x Spark "
              f"mapInArrow's, {m['push'] / m['noop']:.2f}x Spark noop's; whole run {m['pq_total'] / m['push_total']:.1f}x "
              f"faster than write-then-read, {m['pq_write'] / m['push_total']:.1f}x faster than the Parquet write alone "
              "(Petastorm's make_spark_converter's first step)")
        print(f"    pushed into 2 ranks that import torch and make torch tensors: whole run {m['push_torch_total']:.1f} s")
        if self.petastorm:
            print(f"    Petastorm (Spark 3.5 in the baseline venv, noop {m['noop35'] / 1e6:.2f}M rows/s against this "
                  f"Spark's {m['noop'] / 1e6:.2f}M): make_spark_converter {m['pt_write']:.1f} s, 2 torch ranks "
                  f"reading through make_torch_dataloader {m['pt_read']:.1f} s, whole run {m['pt_total']:.1f} s; "
                  f"the push's whole run is {m['pt_total'] / m['push_torch_total']:.1f}x faster")


def main():
    a = bench_spark.parse_args(__doc__)
    bench_spark.worker_env()
    petastorm = start_petastorm(a.rows, a.partitions)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("spindle-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = bench_spark.frame(spark, a.rows, a.partitions)
    # A notebook's session is warm: its JVM has run a stage and its
    # Python workers have imported pyarrow.
    start = time.time()
    bench_spark.frame(spark, 1000, 2).mapInArrow(count_rows, "rows long, first double, last double").collect()
    print(f"  Spark's first job in a new session (not timed below): {time.time() - start:.2f} s")
    tmp = tempfile.mkdtemp(prefix="spindle-bench-")
    try:
        r = Rounds(spark, df, a.rows, tmp, petastorm)
        for i in range(a.runs):
            r.round(i)
        r.report(a.runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if petastorm:
            petastorm.close()
    spark.stop()


if __name__ == "__main__":
    main()
