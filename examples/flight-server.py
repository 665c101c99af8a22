#!/usr/bin/env python3
"""An Arrow Flight service (pyarrow.flight) that a Spindle job reads from.

It serves one flight, --path, holding a Parquet file's rows (--parquet) or
synthetic rows (id int64, x float64 = id, label float64 = id % 2), cut
into --endpoints endpoints that Spindle deals to its ranks; with --token
it wants "authorization: Bearer TOKEN" (spindle.flight.token). Once
listening it prints the input to give spindle submit:

    flight-server: serving grpc://127.0.0.1:PORT/PATH

    python3 examples/flight-server.py --rows 100000 --endpoints 4 &
    spindle submit --input grpc://127.0.0.1:PORT/clicks ... -- python3 train.py
"""

import argparse
import sys

import pyarrow as pa
import pyarrow.flight as flight


class BearerCheck(flight.ServerMiddlewareFactory):
    """Refuses calls without the expected bearer token."""

    def __init__(self, token):
        super().__init__()
        self.token = token

    def start_call(self, info, headers):
        if "Bearer " + self.token not in headers.get("authorization", []):
            raise flight.FlightUnauthenticatedError("a valid bearer token is required")
        return None


class Server(flight.FlightServerBase):
    def __init__(self, host, port, path, table, endpoints, token, sized):
        middleware = {"auth": BearerCheck(token)} if token else {}
        super().__init__(flight.Location.for_grpc_tcp(host, port), middleware=middleware)
        self.uri = f"grpc+tcp://{host}:{self.port}"
        self.path = path
        self.sized = sized
        step = -(-table.num_rows // endpoints)
        self.parts = [table.slice(i * step, step) for i in range(endpoints)]
        self.schema = table.schema

    def _check(self, descriptor):
        path = "/".join(p.decode() for p in descriptor.path)
        if path != self.path:
            raise flight.FlightServerError(f"no flight {path!r}")

    def get_flight_info(self, context, descriptor):
        self._check(descriptor)
        endpoints = [flight.FlightEndpoint(str(i).encode(), [self.uri]) for i in range(len(self.parts))]
        rows = sum(p.num_rows for p in self.parts) if self.sized else -1
        return flight.FlightInfo(self.schema, descriptor, endpoints, rows, -1)

    def do_get(self, context, ticket):
        part = self.parts[int(ticket.ticket.decode())]
        return flight.RecordBatchStream(part)


def main():
    ap = argparse.ArgumentParser(description="serve rows over Arrow Flight for a Spindle job to read")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--path", default="clicks", help="the flight's path (grpc://host:port/PATH)")
    ap.add_argument("--parquet", help="serve this Parquet file's rows")
    ap.add_argument("--rows", type=int, default=10000, help="without --parquet: how many synthetic rows")
    ap.add_argument("--batch-rows", type=int, default=4096, help="rows per batch sent")
    ap.add_argument("--endpoints", type=int, default=2)
    ap.add_argument("--token", help="require this bearer token (better: --token-file)")
    ap.add_argument("--token-file", help="require the bearer token in this file")
    ap.add_argument("--unsized", action="store_true", help="do not say the flight's row count")
    args = ap.parse_args()
    token = args.token
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    if args.parquet:
        import pyarrow.parquet as pq
        table = pq.read_table(args.parquet)
    else:
        n = args.rows
        table = pa.table({
            "id": pa.array(range(n), type=pa.int64()),
            "x": pa.array([float(i) for i in range(n)], type=pa.float64()),
            "label": pa.array([float(i % 2) for i in range(n)], type=pa.float64()),
        })
    table = pa.Table.from_batches(table.to_batches(max_chunksize=args.batch_rows))
    server = Server(args.host, args.port, args.path, table, args.endpoints, token, not args.unsized)
    print(f"flight-server: serving grpc://{args.host}:{server.port}/{args.path}", flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
