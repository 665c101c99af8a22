package ucx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spindle-ml/spindle/collective"
)

// ErrUnavailable means this process cannot use UCX: libucp could not be
// loaded, or the binary was built without cgo or UCX's headers.
var ErrUnavailable = errors.New("ucx: not available")

// Name is the link kind's name in SPINDLE_COLLECTIVE_LINK and logs.
const Name = "ucx"

func init() {
	collective.RegisterLinker(Name, func(spec collective.LinkSpec) (collective.Linker, error) {
		return Linker{Spec: spec}, nil
	})
}

// Available reports whether this process can use UCX: detail is the
// loaded UCX's version, or why not.
func Available() (ok bool, detail string) {
	if err := load(); err != nil {
		return false, err.Error()
	}
	return true, "UCX " + version()
}

// NewLinker returns a Linker that moves a communicator's bytes over UCX
// wherever both ends of a stream can (forced: even where Spindle's own
// link would be faster), and fails with ErrUnavailable when this process
// cannot use UCX at all (tests and tools that want UCX or nothing).
func NewLinker() (collective.Linker, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return Linker{Spec: collective.LinkSpec{Name: Name, Forced: true,
		TCP: collective.TCPLinker{SocketBufferBytes: collective.DefaultSocketBufferBytes}}}, nil
}

// Linker builds UCX data links. Over each mesh stream the two ranks swap
// offers (collective.Negotiate): the stream's direction uses UCX when both
// offer it and UCX brings a transport Spindle's own link lacks (RDMA
// verbs on both ranks, which are on different hosts; chooseRoute), or
// when Spec.Forced; otherwise Spindle's own link carries it (shared
// memory on one host, TCP sockets between hosts). A rank
// without UCX (no libucp, no device, a program without this package) slows
// only its own links and the job still runs. The rank logs one line
// saying which link it uses and, for TCP, why.
type Linker struct {
	// Spec is the selection read from SPINDLE_COLLECTIVE_LINK: Declined
	// offers nothing; Required fails instead of falling back.
	Spec collective.LinkSpec
}

var _ collective.Linker = Linker{}

// Name implements collective.Linker.
func (Linker) Name() string { return Name }

// Link implements collective.Linker.
func (l Linker) Link(ctx context.Context, s collective.LinkSetup) (collective.Link, error) {
	eng, why := l.openEngine(s)
	if why != "" && l.Spec.Required {
		s.CloseStreams()
		return nil, fmt.Errorf("rank %d cannot use UCX (%s=%s): %s", s.Rank, collective.EnvLink, l.Spec, why)
	}
	offer := collective.Offer{Why: why}
	if eng != nil {
		offer = collective.Offer{Name: Name, Payload: encodePayload(hasRDMA(eng.resources()), eng.address())}
	}
	outs, ins, err := collective.Negotiate(ctx, s, offer)
	if err != nil {
		if eng != nil {
			eng.Close()
		}
		s.CloseStreams()
		return nil, err
	}
	theirs := func(peer int, out bool) collective.Offer {
		if out {
			return outs[peer]
		}
		return ins[peer]
	}
	counts, seen := routeCounts{}, map[int]bool{}
	routeOf := func(peer int, out bool) route {
		r := chooseRoute(s, peer, l.Spec.Forced, offer, theirs(peer, out))
		if !seen[peer] {
			seen[peer] = true
			counts[r]++
		}
		return r
	}
	picked, rest := s.Split(func(peer int, out bool) bool { return routeOf(peer, out) == routeUCX })
	declined, _ := rest.Split(func(peer int, out bool) bool { return routeOf(peer, out) == routeDeclined })
	reasons := tcpReasons(declined, why, theirs)
	if l.Spec.Required && len(reasons) > 0 {
		if eng != nil {
			eng.Close()
		}
		s.CloseStreams()
		return nil, fmt.Errorf("UCX required (%s=%s) but a link cannot use it: %s", collective.EnvLink, l.Spec, strings.Join(reasons, "; "))
	}

	lk := &link{rank: s.Rank}
	if eng != nil && !picked.Empty() {
		if err := lk.connectUCX(eng, s, picked, outs, ins); err != nil {
			eng.Close()
			rest.CloseStreams()
			return nil, err
		}
	} else if eng != nil {
		eng.Close()
	}
	if !rest.Empty() {
		t, err := l.Spec.TCP.Link(ctx, rest)
		if err != nil {
			lk.Close()
			rest.CloseStreams()
			return nil, err
		}
		lk.tcp = t
	}
	s.Logger.Info(counts.describe(), "ucx_peers", counts[routeUCX], "same_host_peers", counts[routeSameHost],
		"no_rdma_peers", counts[routeNoRDMA], "declined_peers", counts[routeDeclined])
	logLink(s, lk, reasons)
	return lk, nil
}

// openEngine starts this rank's UCX engine, or says why it cannot.
func (l Linker) openEngine(s collective.LinkSetup) (*engine, string) {
	if l.Spec.Declined {
		return nil, "no usable RDMA device on this rank"
	}
	eng, err := newEngine(s.Rank, s.Timeout)
	if err != nil {
		return nil, err.Error()
	}
	return eng, ""
}

// tcpReasons says why each stream left on TCP is TCP, for the log line
// and a required mode: why, when this rank offers no UCX, else what the
// peer said.
func tcpReasons(rest collective.LinkSetup, why string, theirs func(peer int, out bool) collective.Offer) []string {
	var reasons []string
	for _, out := range []bool{true, false} {
		streams := rest.In
		if out {
			streams = rest.Out
		}
		for p, c := range streams {
			if c == nil {
				continue
			}
			r := why
			if r == "" {
				r = fmt.Sprintf("rank %d: %s", p, orDefault(theirs(p, out).Why, "it does not offer UCX"))
			}
			if !contains(reasons, r) {
				reasons = append(reasons, r)
			}
		}
	}
	sort.Strings(reasons)
	return reasons
}

// connectUCX connects the engine to the peers of the picked streams, with
// the addresses they offered, and marks them as UCX in lk.
func (lk *link) connectUCX(eng *engine, s, picked collective.LinkSetup, outs, ins []collective.Offer) error {
	lk.ucx = eng
	lk.outUCX, lk.inUCX = make([]bool, len(s.Out)), make([]bool, len(s.In))
	for _, set := range []struct {
		out   bool
		offer []collective.Offer
	}{{true, outs}, {false, ins}} {
		streams := picked.In
		if set.out {
			streams = picked.Out
		}
		for p, c := range streams {
			if c == nil {
				continue
			}
			_, addr := decodePayload(set.offer[p].Payload)
			if err := eng.connect(p, addr, set.out, c); err != nil {
				return err
			}
			if set.out {
				lk.outUCX[p] = true
			} else {
				lk.inUCX[p] = true
			}
		}
	}
	return nil
}

// logLink says which data link the rank uses, and why TCP where it is.
func logLink(s collective.LinkSetup, lk *link, reasons []string) {
	switch {
	case lk.tcp == nil:
		s.Logger.Info("data link is ucx over "+lk.over(), "ucx", version(), "transports", strings.Join(lk.ucx.transports(), " "))
	case lk.ucx == nil && len(reasons) == 0:
		s.Logger.Info("data link is Spindle's own, where UCX brings no faster transport", "over", collective.Over(lk.tcp))
	case lk.ucx == nil:
		s.Logger.Info("data link is tcp instead of "+Name, "reason", strings.Join(reasons, "; "))
	default:
		s.Logger.Info("data link is ucx over "+lk.over()+" to some neighbours, tcp to others", "ucx", version(),
			"transports", strings.Join(lk.ucx.transports(), " "), "tcp_reason", orDefault(strings.Join(reasons, "; "), "Spindle's own link is faster there"))
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// link routes each direction to UCX or TCP, as negotiated.
type link struct {
	rank          int
	ucx           *engine         // nil when no direction uses UCX
	tcp           collective.Link // nil when none uses TCP
	outUCX, inUCX []bool          // by peer rank
}

var (
	_ collective.Link    = (*link)(nil)
	_ collective.Carrier = (*link)(nil)
	_ inPlaceReceiver    = (*link)(nil)
	_ inPlaceReceiver    = (*engine)(nil)
)

// over names what carries the link's UCX bytes: shared memory, tcp or
// rdma (overWhat), "an unknown transport" when UCX does not say.
func (l *link) over() string {
	if o := overWhat(l.ucx.transports()); o != "" {
		return o
	}
	return "an unknown transport"
}

// Over implements collective.Carrier: what UCX carries the bytes over,
// and what the streams left on TCP go over.
func (l *link) Over() string {
	var kinds []string
	if l.ucx != nil {
		kinds = strings.Split(l.over(), "+")
	}
	if l.tcp != nil {
		for _, k := range strings.Split(collective.Over(l.tcp), "+") {
			if k != "" && !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	slices.Sort(kinds)
	return strings.Join(kinds, "+")
}

func (l *link) pick(ucx []bool, peer int) collective.Link {
	if peer >= 0 && peer < len(ucx) && ucx[peer] {
		return l.ucx
	}
	return l.tcp
}

// Send implements collective.Link.
func (l *link) Send(ctx context.Context, peer int, p []byte) error {
	t := l.pick(l.outUCX, peer)
	if t == nil {
		return fmt.Errorf("ucx: rank %d has no link to send to rank %d", l.rank, peer)
	}
	return t.Send(ctx, peer, p)
}

// Recv implements collective.Link.
func (l *link) Recv(ctx context.Context, peer int, p []byte) error {
	t := l.pick(l.inUCX, peer)
	if t == nil {
		return fmt.Errorf("ucx: rank %d has no link to receive from rank %d", l.rank, peer)
	}
	return t.Recv(ctx, peer, p)
}

// inPlaceReceiver is the collectives' optional in-place receive
// (collective's inPlaceReceiver), which the UCX engine and the TCP link
// over shared memory both offer.
type inPlaceReceiver interface {
	RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (bool, error)
}

// RecvInPlace hands the ring's reduction received bytes where they landed,
// over UCX or, for a stream left on TCP, where the TCP link can.
func (l *link) RecvInPlace(ctx context.Context, peer, n, align int, scratch []byte, fn func([]byte)) (bool, error) {
	ip, ok := l.pick(l.inUCX, peer).(inPlaceReceiver)
	if !ok {
		return false, nil
	}
	return ip.RecvInPlace(ctx, peer, n, align, scratch, fn)
}

// Interrupt implements collective.Link.
func (l *link) Interrupt() {
	if l.ucx != nil {
		l.ucx.Interrupt()
	}
	if l.tcp != nil {
		l.tcp.Interrupt()
	}
}

// Close implements collective.Link.
func (l *link) Close() error {
	if l.ucx != nil {
		l.ucx.Close()
	}
	if l.tcp != nil {
		l.tcp.Close()
	}
	return nil
}
