"""Benchmark of the Python feed reader's Arrow path against a plain pyarrow reader.

The same rows (16 float32 features and an int64 label) are read three
ways, each trial in a fresh interpreter so that import costs count as they
do in a training process:

  spindle-default  spindle.Feed over an Arrow IPC stream on a Unix socket,
                   as a training process reads it (use_pyarrow=None)
  spindle-pyarrow  the same stream, batches decoded by pyarrow
  spindle-builtin  the same stream, decoded by the built-in numpy reader
  pyarrow-dataset  pyarrow.dataset over the same rows in Parquet

Each yields (features, labels) numpy batches of 16384 rows. The clock
starts before the reader's modules are imported (numpy is loaded first)
and reports the time to the first batch and the rows per second of the
whole pass. The stream is served from memory by another process, so this
measures the consumer side only. Runs interleaved, medians over the
rounds, each as a ratio to pyarrow-dataset.

The trials run without SPINDLE_PYARROW. Run it with an interpreter that has pyarrow: python3 bench_pyarrow_feed.py [rows] [rounds]
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
BATCH = 16384
MODES = ("pyarrow-dataset", "spindle-default", "spindle-pyarrow", "spindle-builtin")

TRIAL = r"""
import json, sys, time
import numpy as np
mode, path, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
rows, first = 0, None
if mode == "pyarrow-dataset":
    import pyarrow.dataset as ds
    for b in ds.dataset(path).to_batches(batch_size=batch):
        x = np.empty((b.num_rows, b.num_columns - 1), np.float32)
        for j in range(b.num_columns - 1):
            x[:, j] = b.column(j).to_numpy()
        y = b.column(b.num_columns - 1).to_numpy()
        rows += len(y)
        if first is None:
            first = time.perf_counter() - t0
else:
    import spindle
    use = {"spindle-default": None, "spindle-pyarrow": True, "spindle-builtin": False}[mode]
    feed = spindle.Feed(path, mode="arrow", use_pyarrow=use, label_column="label")
    for x, y in feed.tensors():
        rows += len(y)
        if first is None:
            first = time.perf_counter() - t0
print(json.dumps({"rows": rows, "first": first, "seconds": time.perf_counter() - t0}))
"""


def write_data(d, rows):
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    cols = {f"f{i}": rng.random(rows, dtype=np.float32) for i in range(16)}
    cols["label"] = rng.integers(0, 2, rows).astype(np.int64)
    t = pa.table(cols)
    pq.write_table(t, os.path.join(d, "data.parquet"), row_group_size=1 << 18)
    t = t.replace_schema_metadata({"spindle.epoch": "0", "spindle.label": "label"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        for b in t.to_batches(max_chunksize=BATCH):
            w.write_batch(b)
    return sink.getvalue().to_pybytes()


def serve(stream, path):
    """Fork a process that sends stream to every connection on the Unix socket path."""
    lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lis.bind(path)
    lis.listen(8)
    pid = os.fork()
    if pid:
        lis.close()
        return pid
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # let whoever reads our output see its end
            os.dup2(null, fd)
        while True:
            c, _ = lis.accept()
            try:
                c.sendall(stream)
            except OSError:
                pass
            c.close()
    finally:
        os._exit(0)


def trial(mode, d):
    path = os.path.join(d, "data.parquet") if mode == "pyarrow-dataset" else os.path.join(d, "feed.sock")
    env = {k: v for k, v in os.environ.items() if k != "SPINDLE_PYARROW"}
    env["PYTHONPATH"] = PYTHON_DIR
    out = subprocess.run([sys.executable, "-c", TRIAL, mode, path, str(BATCH)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_pyarrow_feed: {mode} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 21
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory(prefix="spb", dir="/tmp") as d:
        pid = serve(write_data(d, rows), os.path.join(d, "feed.sock"))
        try:
            runs = {m: [] for m in MODES}
            for _ in range(rounds):
                for m in MODES:
                    runs[m].append(trial(m, d))
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    base_first = statistics.median(r["first"] for r in runs[MODES[0]])
    base_rate = statistics.median(r["rows"] / r["seconds"] for r in runs[MODES[0]])
    print(f"{rows} rows, batch {BATCH}, median of {rounds} interleaved rounds, each a fresh interpreter")
    for m in MODES:
        if any(r["rows"] != rows for r in runs[m]):
            sys.exit(f"bench_pyarrow_feed: {m} read {[r['rows'] for r in runs[m]]} rows, want {rows}")
        first = statistics.median(r["first"] for r in runs[m])
        rate = statistics.median(r["rows"] / r["seconds"] for r in runs[m])
        print(f"  {m:16s} first batch {first * 1e3:6.1f} ms ({first / base_first:4.2f}x)  "
              f"{rate / 1e6:5.1f}M rows/s ({rate / base_rate:4.2f}x pyarrow-dataset)")


if __name__ == "__main__":
    main()
