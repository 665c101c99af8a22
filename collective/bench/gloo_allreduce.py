#!/usr/bin/env python3
"""Measure PyTorch gloo's allreduce, the baseline of Spindle's allreduce benchmark.

Starts WORLD processes on 127.0.0.1, allreduces (sum) float32 tensors of the
given sizes, and prints one JSON object on stdout:

    {"world": 2, "results": [{"bytes": 1048576, "iters": 20,
      "median_s": 0.0012, "times_s": [...]}, ...]}

Each iteration is timed the same way as the Go side: every rank enters a
barrier, times its own all_reduce with time.perf_counter, and the
iteration's time is the slowest rank's. The reported time is the median over
the iterations that follow the warm-up.

When torch cannot be imported it prints {"skipped": "<reason>"} and exits 0.
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, plan, warmup, queue):
    # Loopback only; gloo otherwise resolves the host name to pick a device.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method="tcp://127.0.0.1:%d" % port,
        rank=rank,
        world_size=world,
    )
    results = []
    for nbytes, iters in plan:
        t = torch.full((nbytes // 4,), float(rank + 1), dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(t)
        times = torch.zeros(iters, dtype=torch.float64)
        for i in range(iters):
            t.fill_(float(rank + 1))
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            times[i] = time.perf_counter() - start
        want = float(world * (world + 1) // 2)
        if t[0].item() != want or t[-1].item() != want:
            raise RuntimeError("rank %d: allreduce result %r, want %r" % (rank, t[0].item(), want))
        # The slowest rank defines each iteration's time.
        dist.all_reduce(times, op=dist.ReduceOp.MAX)
        ts = times.tolist()
        results.append({"bytes": nbytes, "iters": iters, "median_s": statistics.median(ts), "times_s": ts})
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        queue.put(results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, required=True, help="number of ranks")
    ap.add_argument(
        "--plan",
        required=True,
        help="comma-separated BYTES:ITERS pairs, e.g. 1048576:20,16777216:8",
    )
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations per size")
    args = ap.parse_args()
    plan = []
    for item in args.plan.split(","):
        nbytes, iters = item.split(":")
        plan.append((int(nbytes), int(iters)))

    try:
        import torch  # noqa: F401
        import torch.distributed as dist
        import torch.multiprocessing as mp
    except Exception as e:  # ImportError, or a broken installation
        print(json.dumps({"skipped": "torch not importable: %s" % e}))
        return 0
    if not dist.is_available() or not dist.is_gloo_available():
        print(json.dumps({"skipped": "this torch build has no gloo backend"}))
        return 0

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(
        worker,
        args=(args.world, free_port(), plan, args.warmup, queue),
        nprocs=args.world,
        join=True,
        start_method="spawn",
    )
    print(json.dumps({"world": args.world, "results": queue.get()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
