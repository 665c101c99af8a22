package ucx

import (
	"fmt"
	"net"
	"strings"

	"github.com/spindle-ml/spindle/collective"
)

// route is where one peer's bytes go, decided alike by both ends from
// facts both see: the peer list's hosts and the transports both UCX
// contexts offered.
type route int

const (
	// routeDeclined: one end offers no UCX; Spindle's link carries it.
	routeDeclined route = iota
	// routeUCX: UCX brings a transport Spindle's link lacks (or UCX is
	// forced).
	routeUCX
	// routeSameHost: both ranks run on one host, where Spindle's own
	// shared-memory rings are faster than UCX's.
	routeSameHost
	// routeNoRDMA: UCX would only use its tcp transport; Spindle's
	// sockets are faster, as NCCL keeps its own socket transport.
	routeNoRDMA
)

// chooseRoute decides the route to peer from this rank's and the peer's
// offers. It depends only on facts both ends share, so the two ends of a
// stream always pick the same route.
func chooseRoute(s collective.LinkSetup, peer int, forced bool, mine, theirs collective.Offer) route {
	if mine.Name != Name || theirs.Name != Name {
		return routeDeclined
	}
	if forced {
		return routeUCX
	}
	if sameHost(s.Peers, s.Rank, peer) {
		return routeSameHost
	}
	myRDMA, _ := decodePayload(mine.Payload)
	theirRDMA, _ := decodePayload(theirs.Payload)
	if !myRDMA || !theirRDMA {
		return routeNoRDMA
	}
	return routeUCX
}

// sameHost reports whether ranks a and b have the same host in peers.
func sameHost(peers []string, a, b int) bool {
	if a < 0 || b < 0 || a >= len(peers) || b >= len(peers) {
		return false
	}
	return hostOf(peers[a]) == hostOf(peers[b])
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// hasRDMA reports whether transports (resourceTransports) include one
// Spindle's own link lacks: RDMA verbs (rc, ud, dc).
func hasRDMA(transports []string) bool {
	return strings.Contains(overWhat(transports), overRDMA)
}

// resourceTransports returns the transports of the resource lines in
// what UCX prints of a context (ucp_context_print_info), which read
// "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0".
func resourceTransports(info string) []string {
	var out []string
	for _, line := range strings.Split(info, "\n") {
		if !strings.Contains(line, "resource") {
			continue
		}
		_, tl, ok := strings.Cut(line, "--")
		if tl = strings.TrimSpace(tl); ok && strings.Contains(tl, "/") {
			out = append(out, tl)
		}
	}
	return out
}

// encodePayload makes the offer's payload: one byte saying whether this
// rank's UCX has an RDMA transport, then its worker address.
func encodePayload(rdma bool, addr []byte) []byte {
	b := make([]byte, 1, 1+len(addr))
	if rdma {
		b[0] = 1
	}
	return append(b, addr...)
}

// decodePayload undoes encodePayload.
func decodePayload(p []byte) (rdma bool, addr []byte) {
	if len(p) == 0 {
		return false, nil
	}
	return p[0] == 1, p[1:]
}

// routeCounts counts distinct peers by route, for the log line.
type routeCounts map[route]int

// describe is the link's one line about its choice.
func (c routeCounts) describe() string {
	return fmt.Sprintf("link ucx: %d peers over UCX, %d over shared memory (same host), %d over Spindle's tcp link (UCX has no RDMA transport), %d over Spindle's link (UCX declined)",
		c[routeUCX], c[routeSameHost], c[routeNoRDMA], c[routeDeclined])
}
