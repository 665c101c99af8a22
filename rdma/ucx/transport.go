package ucx

import (
	"slices"
	"strings"
)

// Kinds of transport UCX moves a link's bytes over, as its log line and
// `spindle rdma check` name them.
const (
	overSharedMemory = "shared memory"
	overTCP          = "tcp"
	overRDMA         = "rdma"
)

// laneTransports returns the transports ("posix/memory", "tcp/lo",
// "rc_mlx5/mlx5_0:1") of the lanes in what UCX prints of an endpoint
// (ucp_ep_print_info), whose lane lines read
// "lane[0]:  1:posix/memory.0 md[1] -> md[1]/posix/sysdev[255] am am_bw#0".
func laneTransports(info string) []string {
	var out []string
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, "lane[")
		if !ok {
			continue
		}
		if _, rest, ok = strings.Cut(rest, "]:"); !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		// "1:posix/memory.0": the resource's index, then tl/device and
		// its path index.
		_, tl, ok := strings.Cut(fields[0], ":")
		if !ok || !strings.Contains(tl, "/") {
			continue
		}
		if i := strings.LastIndexByte(tl, '.'); i > strings.IndexByte(tl, '/') {
			tl = tl[:i]
		}
		if !slices.Contains(out, tl) {
			out = append(out, tl)
		}
	}
	return out
}

// overWhat names what kind of transport carries bytes over transports,
// as laneTransports returns them: shared memory, tcp or rdma (several,
// joined by "+", when the lanes differ), or "" when none is known.
func overWhat(transports []string) string {
	var kinds []string
	for _, t := range transports {
		tl, _, _ := strings.Cut(t, "/")
		var k string
		switch {
		case tl == "posix" || tl == "sysv" || tl == "xpmem" || tl == "cma" || tl == "knem":
			k = overSharedMemory
		case tl == "tcp":
			k = overTCP
		case strings.HasPrefix(tl, "rc") || strings.HasPrefix(tl, "ud") || strings.HasPrefix(tl, "dc"):
			k = overRDMA
		default:
			continue // self, the GPU copies: not how bytes cross between ranks
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	return strings.Join(kinds, "+")
}
