#!/usr/bin/env python3
"""Push rows into a Spindle job over Arrow Flight (pyarrow.flight).

A job started with --input flight-put: (or flight-put://host:port) runs an
Arrow Flight endpoint on its driver, and spindle submit prints where it is
and the file holding the producers' token:

    pushed input: producers DoPut Arrow record batches to grpc://HOST:PORT
    (...), sending "authorization: Bearer TOKEN" with the token in FILE; ...

This producer pushes a Parquet file's rows (--parquet), or synthetic rows
(id int64, x float64 = id, label float64 = id % 2) with --rows, reading
the driver's acknowledgement of every batch: a batch is fed to training
exactly once when it is acknowledged. --end-of-input then tells the job
its input is complete (run it from the last producer to finish, or give
the job spindle.flight.put.rows instead).

A job with spindle.job.tls.enabled serves the endpoint with TLS: submit
prints a grpc+tls:// endpoint and the file holding the job's CA
certificate, which the producer verifies the endpoint with (--ca-file).

With --producer-id the producer names its stream (a path descriptor) and
starts by asking the job how many of its rows it has already taken
(GetFlightInfo of that path): a producer that was killed and is run again
with the same id and the same rows resumes after them, so every row is fed
exactly once.

    python3 examples/flight-producer.py --endpoint grpc://HOST:PORT \\
        --token-file FILE --rows 100000 --end-of-input

    python3 examples/flight-producer.py --endpoint grpc+tls://HOST:PORT \\
        --ca-file CA_FILE --token-file FILE --rows 100000 --end-of-input
"""

import argparse
import json
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight


def synthetic(first, rows):
    ids = pa.array(range(first, first + rows), type=pa.int64())
    x = pa.array([float(i) for i in range(first, first + rows)], type=pa.float64())
    label = pa.array([float(i % 2) for i in range(first, first + rows)], type=pa.float64())
    return pa.table({"id": ids, "x": x, "label": label})


def resume_point(client, descriptor, options):
    """The rows the job has taken from this producer, waiting while the job
    still has a stream of it open (a killed run's, not yet seen to end)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return max(client.get_flight_info(descriptor, options=options).total_records, 0)
        except flight.FlightUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description="push rows into a Spindle job's flight-put: input")
    ap.add_argument("--endpoint", required=True, help="grpc://host:port or grpc+tls://host:port, as spindle submit prints it")
    ap.add_argument("--token-file", required=True, help="the file spindle submit names (spindle.flight.put.tokenFile)")
    ap.add_argument("--ca-file", help="with grpc+tls://: the job's CA certificate, the file spindle submit names")
    ap.add_argument("--parquet", help="push this Parquet file's rows")
    ap.add_argument("--rows", type=int, default=10000, help="without --parquet: how many synthetic rows")
    ap.add_argument("--first-id", type=int, default=0, help="the first synthetic row's id")
    ap.add_argument("--batch-rows", type=int, default=4096, help="rows per pushed batch")
    ap.add_argument("--end-of-input", action="store_true", help="then say the job's input is complete")
    ap.add_argument("--verbose", action="store_true", help="print every acknowledgement")
    ap.add_argument("--producer-id", help="name this producer's stream, and resume after the rows the job took from it")
    args = ap.parse_args()

    with open(args.token_file) as f:
        token = f.read().strip()
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])
    if args.parquet:
        import pyarrow.parquet as pq
        table = pq.read_table(args.parquet)
    else:
        table = synthetic(args.first_id, args.rows)

    if args.endpoint.startswith("grpc+tls://"):
        if not args.ca_file:
            print("flight-producer: a grpc+tls:// endpoint needs --ca-file (spindle submit names the file)", file=sys.stderr)
            return 2
        with open(args.ca_file, "rb") as f:
            client = flight.FlightClient(args.endpoint, tls_root_certs=f.read())
    else:
        client = flight.FlightClient(args.endpoint)
    if args.producer_id:
        descriptor = flight.FlightDescriptor.for_path(*args.producer_id.split("/"))
        taken = resume_point(client, descriptor, options)
        if taken:
            print(f"flight-producer: the job has {taken} rows of {args.producer_id} already; resuming after them", flush=True)
            table = table.slice(taken)
    else:
        descriptor = flight.FlightDescriptor.for_command(b"")  # anonymous
    writer, acks = client.do_put(descriptor, table.schema, options=options)
    acknowledged = 0
    cut = False
    try:
        for batch in table.to_batches(max_chunksize=args.batch_rows):
            writer.write_batch(batch)
            # The driver answers every batch it took: {"batches": N, "rows": M}.
            # Waiting for each answer keeps one batch in flight; a producer
            # may let a few run ahead and read the answers later.
            answer = acks.read()
            if answer is None:  # the job ended the stream; close() says why
                cut = True
                break
            acknowledged = json.loads(answer.to_pybytes())["rows"]
            if args.verbose:
                print(f"flight-producer: acknowledged {acknowledged} rows", flush=True)
        writer.done_writing()
        writer.close()
    except (flight.FlightError, pa.ArrowException) as e:
        print(f"flight-producer: the job refused the stream after {acknowledged} acknowledged rows: {e}", file=sys.stderr)
        return 1
    if cut:
        print(f"flight-producer: the job ended the stream after {acknowledged} acknowledged rows", file=sys.stderr)
        return 1
    print(f"flight-producer: pushed {acknowledged} rows, every one acknowledged")
    if args.end_of_input:
        for result in client.do_action(flight.Action("end-of-input", b""), options=options):
            total = json.loads(result.body.to_pybytes())["rows"]
            print(f"flight-producer: end of input; the job has {total} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
