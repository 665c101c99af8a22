"""Spark DataFrames fed straight into a Spindle job: spindle.spark.train and spindle.spark.push.

A job started with ``input="flight-put:"`` runs an Arrow Flight endpoint
on its driver (docs/feed.md, "Arrow Flight: push"). push() has every
partition of a DataFrame DoPut its Arrow batches there from the Spark task
that computes it (``mapInArrow``), so training starts with the first
batches while Spark computes the rest, and the job's backpressure holds
the Spark tasks when the ranks are slower. Each partition pushes as a
named producer (``spark/JOB/part-N``): a Spark task that is retried asks
the job how many of its rows it took and skips them, so no row is fed
twice. The job's schema is declared from ``df.schema`` before anything is
pushed.

Where the Spark session can load the jar this package carries
(``spindle/jars/spindle-spark.jar``, built from jvm/spark-push), the tasks
push from the JVM instead: Spark's own ArrowWriter turns each partition's
rows into Arrow batches and Arrow Java's Flight client DoPuts them, the
same producers and protocol, without a Python worker decoding every row.
push() adds the jar to the session itself (as ``ADD JAR`` does); ``via``
picks a path.

In a warm session started with pushed input (``spindle.Session(input=
"flight-put:", ...)``), ``train(df, fn, session=s)`` runs fn on the
session's ranks and pushes df as that session job's turn: producers
``turn/N/spark/SESSION/part-K``, end-of-input with body N, so its rows
reach that job alone.

Needs pyspark and pyarrow (``pip install spindle-ml[spark]``) in the
notebook, and on the Spark executors where they push from Python;
cloudpickle for train() with a function.
"""

import os
import subprocess
import sys
import threading

from . import _run, _submit
from ._errors import SpindleError

# Spark SQL type names -> the push schema's types (spindle.flight.put.schema).
_TYPES = {
    "boolean": "bool", "byte": "int8", "short": "int16", "integer": "int32", "long": "int64",
    "float": "float32", "double": "float64", "string": "string", "binary": "binary", "date": "date32",
}


def push_schema(schema):
    """Return the spindle.flight.put.schema declaring a Spark StructType, or raise naming the column it cannot carry."""
    cols = []
    for field in schema.fields:
        kind = field.dataType.typeName()
        if kind not in _TYPES:
            raise SpindleError(f"column {field.name!r} is {field.dataType.simpleString()}, which a job's pushed input "
                               f"cannot carry (it takes {', '.join(sorted(set(_TYPES)))}): cast or drop it")
        if "," in field.name or ":" in field.name:
            raise SpindleError(f"column {field.name!r}: a pushed column's name may hold neither ',' nor ':'")
        cols.append(f"{field.name}:{_TYPES[kind]}")
    return ",".join(cols)


def push_input(master=None, sc=None):
    """Return the input of a job (or session) on master that Spark sc (the active one by default) is to push into.

    A local master's driver listens on loopback, which Spark executors on
    other hosts (Spark on YARN, a standalone or Kubernetes cluster) cannot
    reach: there the endpoint listens on Spark's own driver host, the
    address those executors already reach this host at. Otherwise, and
    for a cluster master (whose driver advertises a host its executors
    reach), it is plain ``flight-put:``.
    """
    master = master or "local"
    if master != "local" and not master.startswith("local["):
        return "flight-put:"
    if sc is None:
        pyspark = sys.modules.get("pyspark")  # no Spark imported: none to push from
        sc = pyspark and pyspark.SparkContext._active_spark_context
    # local and local-cluster Spark run their executors on this host.
    if sc is None or sc.master.startswith("local"):
        return "flight-put:"
    host = sc.getConf().get("spark.driver.host")
    if not host:
        return "flight-put:"
    return f"flight-put://[{host}]:0" if ":" in host else f"flight-put://{host}:0"


def _arrow_schema(spec):
    import pyarrow as pa
    types = {"bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
             "float32": pa.float32(), "float64": pa.float64(), "string": pa.string(), "binary": pa.binary(),
             "date32": pa.date32()}
    return pa.schema([pa.field(n, types[t]) for n, t in (c.split(":") for c in spec.split(","))])


def _connect(endpoint, token, ca):
    import pyarrow.flight as flight
    if endpoint.startswith("grpc+tls://"):
        client = flight.FlightClient(endpoint, tls_root_certs=ca)
    else:
        client = flight.FlightClient(endpoint)
    return client, flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token)])


def _taken(client, descriptor, options, timeout=60.0):
    """Rows the job already took from this producer, waiting while a killed run's stream is still open."""
    import time

    import pyarrow.flight as flight
    deadline = time.monotonic() + timeout
    while True:
        try:
            return max(client.get_flight_info(descriptor, options=options).total_records, 0)
        except flight.FlightUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _drain(acks):
    """Read a DoPut's acknowledgements until the stream ends."""
    while acks.read() is not None:
        pass


def _partition_pusher(endpoint, token, ca, spec, prefix):
    """Return the mapInArrow function that pushes one partition's batches as producer PREFIX/part-N."""

    def push_partition(batches):
        import pyarrow as pa
        import pyarrow.flight as flight
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        schema = _arrow_schema(spec)
        client, options = _connect(endpoint, token, ca)
        descriptor = flight.FlightDescriptor.for_path(*prefix.split("/"), f"part-{part}")
        skip = taken = _taken(client, descriptor, options)
        writer, acks = client.do_put(descriptor, schema, options=options)
        # Acknowledgements are drained beside the writes, so the job's
        # flow control, not a round trip per batch, paces the producer.
        drained = threading.Thread(target=_drain, args=(acks,), daemon=True)
        drained.start()
        rows = 0
        try:
            for batch in batches:
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                if skip:
                    batch, skip = batch.slice(skip), 0
                # Spark may hand large_string and friends; the job's schema is exact.
                batch = pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(batch.columns, schema)], schema=schema)
                writer.write_batch(batch)
                rows += batch.num_rows
        finally:
            # Also when computing the partition failed: the stream ends now,
            # not when a reused Python worker collects it, so the retried
            # task's GetFlightInfo gets its count instead of waiting. The
            # acknowledgements end once the endpoint has seen the end.
            try:
                writer.done_writing()
            finally:
                drained.join()
                writer.close()
                client.close()
        # The partition's rows the job has: an earlier attempt's and this one's.
        yield pa.RecordBatch.from_arrays([pa.array([part], pa.int32()), pa.array([taken + rows], pa.int64())],
                                         names=["partition", "rows"])

    return push_partition


def _run_spark(sc, job, pushing):
    """Call pushing() (a Spark action that returns the rows it pushed) in a job group of its own, cancelled when the Spindle job ends first or the caller is interrupted."""
    group = f"spindle-push-{job.job_id}"
    box = {}

    def action():
        try:
            sc.setJobGroup(group, f"push rows into spindle job {job.job_id}", interruptOnCancel=True)
            box["rows"] = pushing()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=action, name="spindle-push", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.5)
            if t.is_alive() and job.exit_code is not None:
                _cancel(sc, group, t)
                if job.exit_code != 0:
                    raise job._failure()
                raise SpindleError(f"job {job.job_id} ended before Spark pushed the whole DataFrame "
                                   "(its ranks stopped reading the feed)")
    except KeyboardInterrupt:
        _cancel(sc, group, t)
        raise
    if "error" in box:
        raise box["error"]
    return box["rows"]


def jar_path():
    """Return the path of the jar with Spindle's JVM pusher that this package carries, or None when it carries none.

    The wheel carries it; give it to a Spark session with ``spark.jars``
    (push() also adds it to a running session itself).
    """
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", "spindle-spark.jar")
    return path if os.path.isfile(path) else None


def _jvm_pusher(spark):
    """Return Spindle's JVM pusher class as this thread's Py4J sees it, adding the jar to spark's session when it is not loaded yet; None when it cannot load (no jar, Spark Connect, Spark before 4)."""
    from py4j.java_gateway import JavaClass
    from py4j.protocol import Py4JError
    if int(spark.version.split(".")[0]) < 4:
        return None  # the jar is built against Spark 4's Arrow and Netty
    try:
        jvm = spark.sparkContext._jvm
        jspark = spark._jsparkSession
        loader = jspark.sharedState().jarClassLoader()
        # Py4J finds classes through the calling JVM thread's context class
        # loader; the session's jar loader sees what ADD JAR added.
        jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
        cls = jvm.ml.spindle.spark.Push
        if isinstance(cls, JavaClass):
            return cls
        path = jar_path()
        if path is None:
            return None
        jspark.sessionState().resourceLoader().addJar(path)
        jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
        cls = jvm.ml.spindle.spark.Push
        return cls if isinstance(cls, JavaClass) else None
    except (AttributeError, Py4JError):
        return None


def _cancel(sc, group, t):
    """Cancel the pushing Spark job until its thread ends (a job not started yet is cancelled when it is)."""
    while t.is_alive():
        sc.cancelJobGroup(group)
        t.join(2)


def _producer_files(job, timeout):
    """The job's push endpoint, the producers' token and the CA (or None) to verify it with."""
    p = job.push_endpoint(timeout=timeout)
    with open(p["token_file"], "rb") as f:
        token = f.read().strip()
    ca = None
    if p.get("ca_file"):
        with open(p["ca_file"], "rb") as f:
            ca = f.read()
    return p["endpoint"], token, ca


def end_input(job, timeout=60):
    """Tell job its pushed input is complete; for a session's job (a :class:`spindle.SessionRun`), its turn's."""
    import pyarrow.flight as flight
    endpoint, token, ca = _producer_files(job, timeout)
    turn = getattr(job, "turn", None)
    client, options = _connect(endpoint, token, ca)
    try:
        for _ in client.do_action(flight.Action("end-of-input", str(turn or "").encode()), options=options):
            pass
    finally:
        client.close()


def push(df, job, end_of_input=True, timeout=60, via="auto"):
    """Push every row of df into job's pushed input from the Spark tasks; return how many of df's rows the job has.

    job is a :class:`spindle.Job` submitted with ``input="flight-put:"``
    and ``conf={"spindle.flight.put.schema": push_schema(df.schema)}``
    (train() does both), or a job of a session with pushed input
    (``Session.start``), whose turn the rows are pushed as. Blocks until
    Spark has pushed every partition; then, with end_of_input, tells the
    job its input (its turn's) is complete. The count is every row of df,
    also when Spark retried tasks (a retry counts the rows its failed
    attempt pushed).

    via picks how the tasks push: "jvm" from Spark's JVM with the jar this
    package carries (jar_path()), "python" from Python workers
    (``mapInArrow``), "auto" (the default) the JVM where the session can
    load the jar. Either way a partition is producer PREFIX/part-N, so a
    retried task skips the rows the job already took.
    """
    if via not in ("auto", "jvm", "python"):
        raise SpindleError(f"push: via={via!r}: want 'auto', 'jvm' or 'python'")
    try:
        endpoint, token, ca = _producer_files(job, timeout)
    except FileNotFoundError:
        # The driver removes the token when the job ends: it ended first
        # (its process may still be on its way out).
        try:
            code = job.wait(timeout=30, check=False)
        except subprocess.TimeoutExpired:
            raise SpindleError(f"job {job.job_id}: its push token file is gone while the job runs") from None
        if code != 0:
            raise job._failure() from None
        raise SpindleError(f"job {job.job_id} ended before Spark pushed the whole DataFrame "
                           "(its ranks stopped reading the feed)") from None
    spec = push_schema(df.schema)
    turn = getattr(job, "turn", None)
    prefix = f"turn/{turn}/spark/{job.session.job.job_id}" if turn else f"spark/{job.job_id}"
    spark = df.sparkSession

    def from_jvm():
        # In the pushing thread: Py4J resolves the class per JVM thread.
        pusher = _jvm_pusher(spark)
        if pusher is None:
            return None
        batch = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", "10000"))
        if batch <= 0:
            batch = 10000
        return pusher.push(df._jdf, endpoint, token.decode(), ca and ca.decode(), spec, prefix, batch)

    def from_python():
        fn = _partition_pusher(endpoint, token, ca, spec, prefix)
        return sum(r["rows"] for r in df.mapInArrow(fn, "partition int, rows long").collect())

    def pushing():
        if via != "python":
            rows = from_jvm()
            if rows is not None:
                return rows
            if via == "jvm":
                raise SpindleError("push(via='jvm'): the Spark session cannot load Spindle's JVM pusher "
                                   f"(its jar: {jar_path() or 'none in this install, spindle/jars/spindle-spark.jar'}; "
                                   f"it needs Spark 4 or later, this is Spark {spark.version}): use via='python'")
        return from_python()

    pushed = _run_spark(spark.sparkContext, job, pushing)
    if end_of_input:
        end_input(job, timeout)
    return pushed


def train(df, fn_or_command, *args, num_workers=None, label=None, epochs=None, all_ranks=False, session=None,
          via="auto", **submit_options):
    """Start a job of num_workers (2) ranks fed with epochs (1) epochs of df's rows, push them from Spark, and wait for it.

    With session (a :class:`spindle.Session` started with pushed input),
    the job is the session's next, fn runs on its warm ranks, and df's
    rows are that job's turn of the session's input; num_workers, label
    and epochs are the session's (they may be given only as they are).

    fn_or_command is a function (or "module:function") run on every rank
    as spindle.run does, whose result (rank 0's, or with all_ranks every
    rank's) is returned; or a training command (a list or string, as
    spindle.submit takes), for which the exit code is returned. The ranks
    read the rows as any job's feed (spindle.batches(), spindle.tensors(),
    spindle.torch.FeedDataset), label last; epochs after the first come
    from the executors' cache. via is push()'s. Other options are
    spindle.submit's. A local job's endpoint is where Spark's executors
    reach it (push_input).
    """
    if session is not None:
        return _train_in_session(df, fn_or_command, args, session, num_workers, label, epochs, all_ranks, via,
                                 submit_options)
    num_workers = num_workers or 2
    epochs = 1 if epochs is None else epochs
    conf = dict(submit_options.pop("conf", None) or {})
    conf.setdefault("spindle.flight.put.schema", push_schema(df.schema))
    opts = dict(submit_options, label_column=label, epochs=epochs, conf=conf)
    opts.setdefault("master", f"local[{num_workers}]")
    opts["input"] = push_input(opts["master"], df.sparkSession.sparkContext)
    if callable(fn_or_command) or (isinstance(fn_or_command, str) and ":" in fn_or_command and " " not in fn_or_command):
        job = _run.start(fn_or_command, args, {}, num_workers=num_workers, **opts)
    else:
        job = _submit.submit(fn_or_command, num_executors=num_workers, **opts)
    with job:
        try:
            push(df, job, via=via)
        except KeyboardInterrupt:
            job.kill()
            raise
        except Exception:
            # A push that failed (the job refused the rows, Spark failed)
            # leaves the job waiting for input: stop it, and say why
            # the job failed if it did.
            if job.exit_code is not None and job.exit_code != 0:
                raise job._failure() from None
            job.kill()
            raise
        code = job.wait()
        if isinstance(job, _run.RunJob):
            return job.results(all_ranks)
        return code



def _train_in_session(df, fn, args, session, num_workers, label, epochs, all_ranks, via, submit_options):
    """train() in a session with pushed input: fn on its warm ranks, df's rows its turn."""
    where = "spindle.spark.train(session=...)"
    if submit_options:
        raise SpindleError(f"{where}: {', '.join(sorted(submit_options))}: the session's job options were set "
                           "when it started (spindle.Session(...)); drop them here")
    if not getattr(session, "pushed", False):
        raise SpindleError(f"{where}: the session's input is not pushed: start it with spindle.Session(input='flight-put:', "
                           "conf={'spindle.flight.put.schema': spindle.spark.push_schema(df.schema)}, epochs=..., ...)")
    if not (callable(fn) or (isinstance(fn, str) and ":" in fn and " " not in fn)):
        raise SpindleError(f"{where}: {fn!r}: a session runs functions (or 'module:function'), not commands")
    for name, given, its in (("num_workers", num_workers, session.num_executors), ("label", label, session.label_column),
                             ("epochs", epochs, session.epochs)):
        if given is not None and given != its:
            raise SpindleError(f"{where}: {name}={given!r}, but the session's jobs have {name}={its!r} "
                               "(set when it started)")
    spec = push_schema(df.schema)
    if spec.replace(" ", "") != session.push_schema.replace(" ", ""):
        raise SpindleError(f"{where}: the DataFrame's schema {spec} is not the session's spindle.flight.put.schema "
                           f"{session.push_schema}: cast its columns, or start a session with this schema")
    run = session.start(fn, *args, pushed=True)
    try:
        push(df, run, via=via)
    except BaseException:
        if run.exit_code is not None and run.exit_code != 0:
            raise run._failure() from None
        run.kill()
        raise
    run.wait()
    return run.results(all_ranks)
