// Package rdma finds a host's RDMA devices and points training processes
// at them.
//
// Discovery reads sysfs (github.com/Mellanox/rdmamap on the running host;
// any tree laid out the same way for tests and for inspecting a copy of a
// host's /sys): devices, ports, their state, link layer (InfiniBand or
// Ethernet, that is RoCE), rate, GID table (and which entry is RoCE v2),
// the network interface each port sits on (the RoCE GIDs' interface, or
// the IPoIB interface of an InfiniBand port; bonds included) and its
// addresses.
//
// Selection applies spindle.rdma.devices (NCCL_IB_HCA's syntax: names,
// prefixes, ports, "=" for exact names, "^" to exclude) and
// spindle.rdma.mode (auto, required, off) and keeps the active ports of
// one fabric. The executor calls Discover once per rank: the result's Env
// holds the hints for NCCL, Gloo and UCX (never overriding a variable the
// user set), and its Summary the one line the driver logs for the rank
// ("mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s"). In required mode a rank
// without a usable device fails the job before anything runs.
//
// Spindle's own collectives can run over UCX (see docs/rdma.md): one code
// path for InfiniBand, RoCE, shared memory and TCP.
package rdma
