#!/usr/bin/env python3
"""Fit and check the allreduce cost model (docs/benchmarks.md, issue 40).

Reads BenchmarkAllReduceSelect output (collective/bench_select_test.go) on
stdin. On one host every message and byte of every rank costs the same
shared cores, so an allreduce takes T = M a + B b for M messages and B
bytes over all ranks; the script fits a and b, by least squares on log
time, once to the wall-clock medians and once to the CPU-time medians, and
prints each point's model/measured ratio, by algorithm and world size.
The CPU fit's a (the CPU both ends spend on one message) and b (on one
byte) are the measured inputs of the per-link model for a cluster, which
the script then evaluates for 1,000 ranks on 25 Gb/s.

Usage: go test -run '^$' -bench AllReduceSelect ./collective | python3 scripts/allreduce_model.py
"""

import math
import re
import statistics
import sys

CHUNK = 1 << 20  # collective.DefaultChunkBytes
ALPHA_OVER_BETA = 15e-6 / (8 / 25e9)  # collective/select.go's constant
WIRE = 8 / 25e9  # seconds per byte at 25 Gb/s


def default_small(n):
    """collective.DefaultSmallBytes."""
    if n <= 2:
        return 0
    lg = math.log2(n)
    return int(ALPHA_OVER_BETA * (n - 1 - lg) / (lg - (n - 1) / n))


def ring_messages(n, size):
    """Messages of one ring allreduce of size bytes of float32 on n ranks."""
    count = max(size // 4, 1)
    m = n  # each rank's header
    for k in range(n):
        elems = count // n + (1 if k < count % n else 0)
        if elems:
            m += 2 * (n - 1) * math.ceil(elems * 4 / CHUNK)
    return m


def tree_messages(n):
    """Messages of one binomial-tree allreduce: up, down, and the ceil(n/2)
    headers to a ring neighbour that is not a child (the others ride down)."""
    return 2 * (n - 1) + (n + 1) // 2


def points(lines):
    """Return {(ranks, size, algo): (wall medians s, cpu medians s)}."""
    wall, cpu = {}, {}
    pat = re.compile(r"^BenchmarkAllReduceSelect/round=\d+/ranks=(\d+)/size=(\d+)/algo=(\S+?)(?:-\d+)?\s")
    for line in lines:
        m = pat.match(line)
        if not m:
            continue
        key = (int(m[1]), int(m[2]), m[3])
        f = line.split()
        for i in range(len(f) - 1):
            if f[i + 1] == "us/op":
                wall.setdefault(key, []).append(float(f[i]) * 1e-6)
            if f[i + 1] == "cpu-us/op":
                cpu.setdefault(key, []).append(float(f[i]) * 1e-6)
    return {k: (statistics.median(wall[k]), statistics.median(cpu.get(k, [0]))) for k in wall}


def algorithm(n, size, algo):
    if algo == "auto":
        return "tree" if size <= default_small(n) else "ring"
    return algo


def fit(rows):
    """Least squares on log time of T = M a + B b, over a log grid."""
    best = None
    for i in range(200):
        a = 1e-7 * 10 ** (i / 50)  # 0.1 us .. 1 ms
        for j in range(200):
            b = 1e-12 * 10 ** (j / 50)  # 1 ps .. 10 ns a byte
            err = sum((math.log(m * a + by * b) - math.log(t)) ** 2 for m, by, t in rows)
            if best is None or err < best[0]:
                best = (err, a, b)
    return best[1], best[2], math.exp(math.sqrt(best[0] / len(rows)))


def main():
    pts = points(sys.stdin)
    rows = {}
    for (n, size, algo), (wall, cpu) in sorted(pts.items()):
        if algo.endswith("-sockets"):
            continue  # the model is of the default link
        alg = algorithm(n, size, algo)
        m = ring_messages(n, size) if alg == "ring" else tree_messages(n)
        b = 2 * (n - 1) * size
        rows[(n, size, algo)] = (alg, m, b, wall, cpu)
    seen = {}
    for k, (alg, m, b, wall, cpu) in rows.items():
        seen.setdefault((k[0], k[1], alg), (m, b, wall, cpu))
    uniq = list(seen.items())
    aw, bw, ew = fit([(m, b, w) for _, (m, b, w, _) in uniq])
    ac, bc, ec = fit([(m, b, c) for _, (m, b, _, c) in uniq if c > 0])
    print(f"wall-clock fit: a = {aw * 1e6:.1f} us a message, b = {bw * 1e9:.3f} ns a byte, rms error a factor of {ew:.2f}")
    print(f"CPU fit:        a = {ac * 1e6:.1f} us a message, b = {bc * 1e9:.3f} ns a byte, rms error a factor of {ec:.2f}")
    print("\nmodel / measured (wall clock), by algorithm and ranks:")
    by = {}
    for (n, size, alg), (m, b, w, _) in uniq:
        by.setdefault((alg, n), []).append((size, (m * aw + b * bw) / w))
    for (alg, n), ratios in sorted(by.items()):
        rms = math.exp(math.sqrt(statistics.mean(math.log(r) ** 2 for _, r in ratios)))
        cells = " ".join(f"{s}:{r:.2f}" for s, r in ratios)
        print(f"  {alg:4} {n:3} ranks: rms x{rms:.2f}  {cells}")
    # The cluster: per link, a message costs the CPU of both ends (ac) and
    # a byte the wire or the CPU, whichever is slower.
    beta = max(WIRE, bc)
    n, hosts, per = 1000, 125, 8
    lg = math.ceil(math.log2(n))
    print(f"\n1,000 ranks on 25 Gb/s (a = {ac * 1e6:.1f} us, b = {beta * 1e9:.2f} ns/B; hierarchy: 125 hosts of 8, 0.1 ns/B inside hosts):")
    print("  size      ring       tree       hier")
    for size in (8, 64 << 10, 1 << 20, 16 << 20, 64 << 20):
        ring = 2 * (n - 1) * (ac + size * beta / n)
        tree = (2 * lg + 1) * ac + 2 * lg * size * beta
        hier = 2 * (hosts - 1 + per - 1) * ac + 2 * size * beta + 2 * (per - 1) / per * size * 0.1e-9
        print(f"  {size:>9} {ring * 1e3:8.2f}ms {tree * 1e3:8.2f}ms {hier * 1e3:8.2f}ms")


if __name__ == "__main__":
    main()
