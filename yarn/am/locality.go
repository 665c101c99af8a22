package am

import (
	"cmp"
	"context"
	"net"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// anyHost is YARN's resource name for "any node".
const anyHost = "*"

// localityLevel is how far a pending gang's requests have been relaxed.
type localityLevel int

// Locality levels, strictest first.
const (
	// levelNode: only the nodes holding an executor's input.
	levelNode localityLevel = iota
	// levelRack: those nodes' racks too.
	levelRack
	// levelAny: any node.
	levelAny
)

func (l localityLevel) String() string {
	switch l {
	case levelNode:
		return "node"
	case levelRack:
		return "rack"
	}
	return "any"
}

// buildAsks returns the ResourceRequests of one priority for the executors
// still waiting there, hosts[i] being the NodeManager hosts that hold
// waiting executor i's input: one request per such node, one per rack of
// those nodes, and one for any node, which counts every waiting executor.
// At levelNode the rack and any requests do not relax locality (YARN
// places containers on the named nodes only), at levelRack the rack
// requests do, at levelAny everything does. Names asked before that no
// executor wants any more are asked for 0 containers (cancelled); asked
// records every name asked.
func buildAsks(prio int32, capab *pb.ResourceProto, hosts [][]string, racks map[string]string, level localityLevel, asked map[string]bool) []*pb.ResourceRequestProto {
	nodes, rackCount := map[string]int{}, map[string]int{}
	for _, hs := range hosts {
		seenRack := map[string]bool{}
		for _, h := range hs {
			nodes[h]++
			if r := racks[h]; r != "" && !seenRack[r] {
				seenRack[r] = true
				rackCount[r]++
			}
		}
	}
	want := map[string]*pb.ResourceRequestProto{}
	ask := func(name string, n int, relax bool) {
		want[name] = &pb.ResourceRequestProto{
			Priority: &pb.PriorityProto{Priority: proto.Int32(prio)}, ResourceName: proto.String(name),
			Capability: proto.Clone(capab).(*pb.ResourceProto), NumContainers: proto.Int32(int32(n)), RelaxLocality: proto.Bool(relax),
		}
	}
	for h, n := range nodes {
		ask(h, n, true)
	}
	for r, n := range rackCount {
		ask(r, n, level >= levelRack)
	}
	ask(anyHost, len(hosts), len(nodes) == 0 || level >= levelAny)
	for name := range asked {
		if _, ok := want[name]; !ok {
			ask(name, 0, true)
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
		asked[name] = true
	}
	// Nodes, then racks, then any; by name within each, so that requests
	// are the same from one call to the next.
	rank := func(name string) int {
		switch {
		case name == anyHost:
			return 2
		case strings.HasPrefix(name, "/"):
			return 1
		}
		return 0
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	out := make([]*pb.ResourceRequestProto, len(names))
	for i, name := range names {
		out[i] = want[name]
	}
	return out
}

// hostIndex matches the hosts HDFS names for an input's blocks (DataNode
// host names or addresses) to NodeManager hosts, which may be spelled
// differently (a name where HDFS has an address, a short name where it has
// a fully qualified one).
type hostIndex struct {
	byName map[string]string // lower-case name or short name -> NodeManager host
	byAddr map[string]string // address -> NodeManager host
	lookup func(ctx context.Context, host string) ([]string, error)
	// timeout bounds one lookup (Config.LookupTimeout; zero:
	// DefaultLookupTimeout).
	timeout time.Duration
}

// newHostIndex indexes the NodeManager hosts; lookup resolves names to
// addresses (nil: the system resolver).
func newHostIndex(nmHosts []string, lookup func(ctx context.Context, host string) ([]string, error)) *hostIndex {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	ix := &hostIndex{byName: map[string]string{}, byAddr: map[string]string{}, lookup: lookup}
	sort.Strings(nmHosts)
	for _, h := range nmHosts {
		l := strings.ToLower(h)
		ix.byName[l] = h
		if short, _, ok := strings.Cut(l, "."); ok && net.ParseIP(h) == nil {
			if _, taken := ix.byName[short]; !taken {
				ix.byName[short] = h
			}
		}
		for _, a := range ix.addrs(h) {
			if _, taken := ix.byAddr[a]; !taken {
				ix.byAddr[a] = h
			}
		}
	}
	return ix
}

func (ix *hostIndex) addrs(host string) []string {
	if ip := net.ParseIP(host); ip != nil {
		return []string{ip.String()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(ix.timeout, DefaultLookupTimeout))
	defer cancel()
	as, err := ix.lookup(ctx, host)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		if ip := net.ParseIP(a); ip != nil {
			out = append(out, ip.String())
		}
	}
	return out
}

// match returns the NodeManager hosts among preferred, in order, without
// repeats; hosts that run no NodeManager are left out.
func (ix *hostIndex) match(preferred []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range preferred {
		h, ok := ix.byName[strings.ToLower(p)]
		if !ok {
			if short, _, cut := strings.Cut(strings.ToLower(p), "."); cut && net.ParseIP(p) == nil {
				h, ok = ix.byName[short]
			}
		}
		if !ok {
			for _, a := range ix.addrs(p) {
				if h, ok = ix.byAddr[a]; ok {
					break
				}
			}
		}
		if ok && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}
