#!/usr/bin/env bash
# Runs Spindle's benchmarks, each beside the baseline it is compared with,
# measured in the same run on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

section() { printf '\n==== %s ====\n' "$1"; }

section "feed pipeline: Parquet decode through the pipeline vs plain pqarrow"
go test -run '^$' -bench 'Decode' -benchtime 8x ./feed

section "feed: flat fixed-width columns read by Spindle's own reader vs pqarrow (plain, dictionary overflowing, dictionary)"
go test -run '^$' -bench 'FlatColumns' -benchtime 5x ./feed

section "feed pipeline: 24 one-split files on HDFS (test cluster, loopback), the next split opened ahead vs one after the other"
go test -run '^$' -bench 'HDFSSplits' -benchtime 5x ./feed

section "feed pipeline vs DuckDB: DuckDB-written files (4M rows, 16 float32 + int64; snappy, zstd, gzip, uncompressed, nulls, dictionary strings, small row groups, one row group) decoded by the pipeline vs scanned by DuckDB, 1 and 2 threads"
# DuckDB comes from the npm registry (@duckdb/node-api) into a cache of its own, once.
bench_node=${SPINDLE_BENCH_NODE:-$HOME/.cache/spindle-bench-node}
if [ ! -f "$bench_node/node_modules/@duckdb/node-api/package.json" ]; then
  if command -v npm >/dev/null; then
    echo "installing @duckdb/node-api@1.5.6-r.1 into $bench_node (npm, once)..."
    mkdir -p "$bench_node" && npm install --prefix "$bench_node" --no-audit --no-fund -s @duckdb/node-api@1.5.6-r.1 ||
      echo "warning: no @duckdb/node-api; the DuckDB comparison skips" >&2
  else
    echo "warning: no npm; the DuckDB comparison skips" >&2
  fi
fi
SPINDLE_BENCH_NODE=$bench_node go test -run '^$' -bench 'VsDuckDB' -benchtime 1x -timeout 30m ./feed

section "feed: Parquet -> executor -> Unix socket (or shared memory: arrow-shm) -> consumer process, vs raw Unix socket and vs decoding alone"
go test -run '^$' -bench 'Feed' -benchtime 5x ./feed/wire

section "Python feed reader: the Arrow stream read as a training process does (built-in reader, pyarrow where needed), all by pyarrow and all by the built-in reader vs a plain pyarrow.dataset reader of the same rows (fresh interpreters); then whole jobs, 1 rank vs 2, built-in reader vs pyarrow"
venv=${SPINDLE_TEST_VENV:-$HOME/.cache/spindle-test-venv}
if "$venv/bin/python" -c 'import pyarrow' >/dev/null 2>&1; then
  "$venv/bin/python" scripts/bench_pyarrow_feed.py 2097152 5
  SPINDLE_BINARY=bin/spindle "$venv/bin/python" scripts/bench_feed_ranks.py 2097152 3
else
  echo "warning: no pyarrow in $venv (make deps); the pyarrow reader comparison skips" >&2
fi

section "Arrow Flight: a flight pulled through the feed vs a raw DoGet (the ceiling), rows pushed through the feed vs a raw DoPut (the ceiling), each vs the same rows from Parquet; planning a 1,000-endpoint flight, counted vs dealt"
go test -run '^$' -bench 'Flight' -benchtime 5x ./feed

section "allreduce: Spindle ring (the default link: shared memory between ranks on one host; and kept on TCP sockets) vs PyTorch gloo, 2, 4 and 8 ranks"
go run ./collective/bench -ranks 2,4,8 -sizes 1,4,16,64 -links tcp,tcp-sockets -timeout 60m

section "allreduce for many ranks: the default choice (binomial tree for small vectors, ring for large) vs the ring (shared memory, and TCP alone), 8 to 64 in-process ranks, 8 B to 64 MiB, three interleaved rounds, medians (docs/benchmarks.md)"
COLLECTIVE_BENCH_ALGOS=ring,ring-sockets,auto go test -run '^$' -bench 'AllReduceSelect' -benchtime 1s -timeout 120m ./collective | awk -f scripts/allreduce_select.awk

section "allreduce over the data links: the default link (shared memory between ranks on one host), the TCP link on sockets, the UCX link as a job selects it, and forced onto UCX (UCX_TLS=tcp, sm) vs ucx_perftest on the same transport"
# UCX_LOG_LEVEL=fatal: on shared memory UCX logs an error for the endpoint
# the link first asks for with peer-failure reports, before it falls back.
UCX_LOG_LEVEL=fatal go run ./collective/bench -links tcp,tcp-sockets,ucx,ucx-tcp,ucx-sm -perftest -gloo=false -sizes 4k,1m,64m -rounds 3
go test -run '^$' -bench 'AllReduce($|Algos|Hier)' -benchtime 5x ./collective
UCX_LOG_LEVEL=fatal UCX_TLS=tcp go test -run '^$' -bench 'AllReduceUCX' -benchtime 5x ./rdma/ucx
UCX_LOG_LEVEL=fatal UCX_TLS=sm go test -run '^$' -bench 'AllReduceUCX' -benchtime 5x ./rdma/ucx

section "parameter server: pull/push keys/s through 1, 2 and 4 servers over gRPC, UCX (UCX_TLS=tcp) and UCX (sm), each vs the raw round trip of the same bytes on the same link"
UCX_LOG_LEVEL=fatal go test -run '^$' -bench 'PullPush' -benchtime 20x ./ps/client
echo "  a server's own work (no link): CPU per key of a pull and a push in a quarter-million-row table"
go test -run '^$' -bench 'Table' -benchtime 30x ./ps/server

section "parameter server: push throughput with 0, 1 and 2 backups; time from a server's loss to the first push after failover"
go test -run '^$' -bench 'Replication|Recovery' -benchtime 5x ./ps/client

section "parameter server: staleness vs convergence (examples/sparse-lr, 2 workers, 2 servers)"
go build -o bin/sparse-lr ./examples/sparse-lr
for s in 0 1 4 asp; do
  echo "staleness $s:"
  bin/spindle submit --master 'local[2]' --num-ps 2 --conf spindle.log.level=warn --conf spindle.ps.staleness=$s \
    -- bin/sparse-lr 2>&1 | grep -E 'sparse-lr: auc|msg=trained' | sed 's/^/  /'
done

section "parameter server: a pull + push of 4096 keys (dim 16) directly from Go vs through the executor's proxy from Go and from Python"
go test -run '^$' -bench 'PullPush' -benchtime 2s ./ps/proxy

section "HDFS: Parquet over the test HDFS vs local disk"
go test -run '^$' -bench 'HDFS' -benchtime 3x ./fsys

section "standalone: submit to running, leader failover"
go test -run '^$' -bench 'Standalone' -benchtime 1x ./standalone/...

section "YARN: submit to every executor running (4 and 16), Spindle on the real mini cluster and on its standalone cluster vs spark-submit on the same mini cluster"
# pyspark comes from PyPI into a venv of its own, once (about 320 MB).
bench_venv=${SPINDLE_BENCH_VENV:-$HOME/.cache/spindle-bench-venv}
if ! "$bench_venv/bin/python" -c 'import pyspark' >/dev/null 2>&1; then
  echo "installing pyspark==3.5.3 into $bench_venv (PyPI, once)..."
  /usr/bin/python3 -m venv "$bench_venv" && "$bench_venv/bin/python" -m pip install -q --disable-pip-version-check pyspark==3.5.3 ||
    echo "warning: no pyspark; Spark's side of the YARN benchmark skips" >&2
fi
SPINDLE_BENCH_VENV=$bench_venv go test -run '^$' -bench 'SubmitToRunning' -benchtime 3x -timeout 60m ./yarn/e2e

section "control plane: driver cost per heartbeat, 10 to 5000 executors (in process)"
go test -run '^$' -bench 'Heartbeat' -benchtime 2000x ./driver

section "observability: a fed job with its web UI, metrics and event log vs without; driver heap with 1,000 executors"
go test -run '^$' -bench 'UIOverhead' -benchtime 9x ./e2e
go test -run '^$' -bench 'ObserverMemory' -benchtime 2000x ./driver

section "Python API: spindle.run vs spindle submit of the same code as a script vs TorchDistributor.run (2 local ranks); a session's jobs vs new jobs; a Spark DataFrame pushed vs through Parquet vs Petastorm's make_spark_converter"
py_venv=${SPINDLE_PY_VENV:-$HOME/.cache/spindle-py-venv}
if [ -x "$py_venv/bin/python" ]; then
  SPINDLE_BINARY=bin/spindle "$py_venv/bin/python" scripts/bench-python.py --runs 5 2>/dev/null | grep -E "^  (spindle|TorchDistributor)"
  echo "  Many short jobs: a session's warm ranks (torch preloaded) vs a new job each time"
  SPINDLE_BINARY=bin/spindle "$py_venv/bin/python" scripts/bench-session.py --runs 5
  echo "  A Spark DataFrame (4M rows, 16 float32 features and a label) into 2 ranks: pushed from the Spark tasks vs Spark alone vs written to Parquet and read vs Petastorm in the baseline venv of make bench-deps (3 rounds)"
  SPINDLE_BINARY=bin/spindle "$py_venv/bin/python" scripts/bench-spark-push.py --rows 4000000 --runs 3 2>/dev/null | tr '\r' '\n' | grep '^  '
  echo "  A Spark DataFrame (1M rows) into a warm session's job vs a new job: train() to the first batch on a rank (3 rounds)"
  SPINDLE_BINARY=bin/spindle "$py_venv/bin/python" scripts/bench-spark-session.py --rows 1000000 --runs 3 2>/dev/null | tr '\r' '\n' | grep '^  '
else
  echo "  skipped: no $py_venv (make deps)"
fi
# TensorFlowOnSpark needs TensorFlow, which lives in the test venv (make
# deps adds pyspark and tensorflowonspark there). Its feed moves one row at
# a time through a multiprocessing queue: 400k rows keep a round within
# minutes on a loaded machine.
echo "  A Spark DataFrame (400k rows) into 2 processes: spindle.spark.train vs TensorFlowOnSpark's InputMode.SPARK, whole runs (3 rounds)"
if [ -x "$venv/bin/python" ]; then
  SPINDLE_BINARY=bin/spindle "$venv/bin/python" scripts/bench-spark-tfos.py --rows 400000 --runs 3 2>/dev/null | grep '^  '
else
  echo "  skipped: no $venv (make deps)"
fi

section "batch inference: spindle predict of 4Mi rows on 2 executors vs ONNX Runtime scoring the same Parquet in one Python process per core (pyarrow), both writing Parquet"
go test -run '^$' -bench 'PredictVsONNXRuntime' -benchtime 1x -timeout 30m ./model/predict
