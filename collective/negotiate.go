package collective

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Offer is what a negotiating Linker proposes on each of its streams
// before any data flows: a link kind both ends must offer for the stream
// to use it, and what the peer needs to reach this rank over that kind.
type Offer struct {
	// Name is the link kind offered ("ucx"); empty declines, and the
	// stream carries the data itself, as TCP.
	Name string
	// Payload is what the peer needs to connect (a UCX worker address).
	Payload []byte
	// Why says why this rank declines; it reaches the peer's log.
	Why string
}

// helloMagic opens every offer, so a rank that expected data (a peer on
// the plain TCP link) is told apart from one that negotiates.
const helloMagic = "SPXL"

// maxOfferBytes bounds an offer's name, reason and payload.
const maxOfferBytes = 1 << 20

// Negotiate swaps offers over every stream of s at once and returns the
// peer's offer by rank: outs[p] for the stream to rank p, ins[p] for the
// one from it (zero for ranks without a stream). Both ends of a stream see
// both offers, so they decide alike. It honours ctx and the setup's
// timeouts (LinkSetup.SetupTimeout).
func Negotiate(ctx context.Context, s LinkSetup, mine Offer) (outs, ins []Offer, err error) {
	msg, err := encodeOffer(mine)
	if err != nil {
		return nil, nil, err
	}
	deadline := s.setupDeadline(ctx)
	outs, ins = make([]Offer, len(s.Out)), make([]Offer, len(s.In))
	var g errgroup.Group
	for _, set := range []struct {
		conns  []*net.TCPConn
		offers []Offer
	}{{s.Out, outs}, {s.In, ins}} {
		for p, c := range set.conns {
			if c == nil {
				continue
			}
			g.Go(func() error {
				c.SetDeadline(deadline)
				stop := context.AfterFunc(ctx, func() { c.SetDeadline(aLongTimeAgo) })
				defer stop()
				o, err := swapOffer(c, msg)
				c.SetDeadline(time.Time{})
				if err != nil {
					return fmt.Errorf("negotiate the data link with rank %d: %w", p, err)
				}
				set.offers[p] = o
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return outs, ins, nil
}

func encodeOffer(o Offer) ([]byte, error) {
	if len(o.Name) > 255 || len(o.Why)+len(o.Payload) > maxOfferBytes {
		return nil, fmt.Errorf("collective: offer of %q too large", o.Name)
	}
	b := []byte(helloMagic)
	b = append(b, byte(len(o.Name)))
	b = append(b, o.Name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(o.Why)))
	b = append(b, o.Why...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(o.Payload)))
	return append(b, o.Payload...), nil
}

// swapOffer writes msg on c and reads the peer's offer.
func swapOffer(c net.Conn, msg []byte) (Offer, error) {
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, werr = c.Write(msg)
	}()
	o, rerr := readOffer(c)
	wg.Wait()
	if rerr != nil {
		return Offer{}, rerr
	}
	return o, werr
}

func readOffer(r io.Reader) (Offer, error) {
	var hdr [len(helloMagic) + 1]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Offer{}, err
	}
	if string(hdr[:len(helloMagic)]) != helloMagic {
		return Offer{}, errors.New("the peer does not negotiate its data link (is it set to the plain tcp link?)")
	}
	name := make([]byte, hdr[len(helloMagic)])
	if _, err := io.ReadFull(r, name); err != nil {
		return Offer{}, err
	}
	field := func() ([]byte, error) {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, err
		}
		size := binary.BigEndian.Uint32(n[:])
		if size > maxOfferBytes {
			return nil, fmt.Errorf("offer field of %d bytes", size)
		}
		b := make([]byte, size)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	why, err := field()
	if err != nil {
		return Offer{}, err
	}
	payload, err := field()
	if err != nil {
		return Offer{}, err
	}
	return Offer{Name: string(name), Why: string(why), Payload: payload}, nil
}

// Split divides s's streams: those keep selects go to picked, the others
// to rest. Each stream is in exactly one of them.
func (s LinkSetup) Split(keep func(peer int, out bool) bool) (picked, rest LinkSetup) {
	picked, rest = s, s
	picked.Out, picked.In = make([]*net.TCPConn, len(s.Out)), make([]*net.TCPConn, len(s.In))
	rest.Out, rest.In = make([]*net.TCPConn, len(s.Out)), make([]*net.TCPConn, len(s.In))
	for p, c := range s.Out {
		if c != nil && keep(p, true) {
			picked.Out[p] = c
		} else {
			rest.Out[p] = c
		}
	}
	for p, c := range s.In {
		if c != nil && keep(p, false) {
			picked.In[p] = c
		} else {
			rest.In[p] = c
		}
	}
	return picked, rest
}

// CloseStreams closes every stream of s; a Linker that fails calls it.
func (s LinkSetup) CloseStreams() {
	for _, set := range [][]*net.TCPConn{s.Out, s.In} {
		for _, c := range set {
			if c != nil {
				c.Close()
			}
		}
	}
}

// Empty reports whether s has no stream.
func (s LinkSetup) Empty() bool {
	for _, set := range [][]*net.TCPConn{s.Out, s.In} {
		for _, c := range set {
			if c != nil {
				return false
			}
		}
	}
	return true
}

// LinkSpec is a link selection read from SPINDLE_COLLECTIVE_LINK:
// "tcp" (or unset), or NAME, NAME:required, NAME:declined or NAME:forced.
type LinkSpec struct {
	// Name is the link kind ("tcp", "ucx").
	Name string
	// Required fails the link's setup, naming the rank, when a stream
	// cannot use the kind instead of falling back to TCP.
	Required bool
	// Declined makes this rank negotiate without offering the kind (the
	// executor found no usable RDMA device), so every stream it is on
	// falls back to TCP while the other ranks still use the kind.
	Declined bool
	// Forced uses the kind on every stream whose two ends offer it, even
	// where Spindle's own link would be as fast (ranks on one host, or a
	// kind that would only use TCP itself): for comparisons and for
	// tests of the kind's own path.
	Forced bool
	// TCP carries the streams that fall back.
	TCP TCPLinker
}

// ParseLinkSpec parses a SPINDLE_COLLECTIVE_LINK value.
func ParseLinkSpec(v string) (LinkSpec, error) {
	name, opt, _ := strings.Cut(strings.TrimSpace(v), ":")
	s := LinkSpec{Name: name}
	if s.Name == "" {
		s.Name = "tcp"
	}
	switch opt {
	case "":
	case "required":
		s.Required = true
	case "declined":
		s.Declined = true
	case "forced":
		s.Forced = true
	default:
		return LinkSpec{}, fmt.Errorf("collective: %s=%q: unknown option %q (want NAME, NAME:required, NAME:declined or NAME:forced)", EnvLink, v, opt)
	}
	if s.Name == "tcp" && opt != "" {
		return LinkSpec{}, fmt.Errorf("collective: %s=%q: the tcp link takes no option", EnvLink, v)
	}
	return s, nil
}

// String formats s as SPINDLE_COLLECTIVE_LINK holds it.
func (s LinkSpec) String() string {
	switch {
	case s.Required:
		return s.Name + ":required"
	case s.Declined:
		return s.Name + ":declined"
	case s.Forced:
		return s.Name + ":forced"
	}
	return s.Name
}

var linkers struct {
	sync.Mutex
	byName map[string]func(LinkSpec) (Linker, error)
}

// RegisterLinker makes a link kind selectable by name in
// SPINDLE_COLLECTIVE_LINK; a package providing one (rdma/ucx) registers it
// when imported. open builds the Linker for one communicator. Every
// registered kind must negotiate (Negotiate) and fall back to TCP per
// stream, so ranks whose programs lack it still agree with the others.
func RegisterLinker(name string, open func(LinkSpec) (Linker, error)) {
	linkers.Lock()
	defer linkers.Unlock()
	if linkers.byName == nil {
		linkers.byName = make(map[string]func(LinkSpec) (Linker, error))
	}
	linkers.byName[name] = open
}

// linkerFor returns the Linker spec selects: nil for TCP; for a kind this
// program does not have, one that negotiates, declines and uses TCP.
func linkerFor(spec LinkSpec) (Linker, error) {
	if spec.Name == "tcp" {
		return nil, nil
	}
	linkers.Lock()
	open := linkers.byName[spec.Name]
	linkers.Unlock()
	if open == nil {
		why := fmt.Sprintf("this program has no %s link (it does not import its package)", spec.Name)
		if spec.Declined {
			why = "no usable RDMA device on this rank"
		}
		if spec.Required {
			return nil, fmt.Errorf("collective: %s=%s: %s", EnvLink, spec, why)
		}
		return DecliningLinker{Kind: spec.Name, Why: why, TCP: spec.TCP}, nil
	}
	return open(spec)
}

// DecliningLinker negotiates like a link of kind Kind without offering it,
// then carries every stream's data over TCP. It is what a rank uses when
// it cannot, or should not, use the kind its job selected.
type DecliningLinker struct {
	// Kind is the link kind the job selected.
	Kind string
	// Why reaches the peers' logs.
	Why string
	// TCP carries the data.
	TCP TCPLinker
}

// Name implements Linker.
func (d DecliningLinker) Name() string { return "tcp" }

// Link implements Linker.
func (d DecliningLinker) Link(ctx context.Context, s LinkSetup) (Link, error) {
	if _, _, err := Negotiate(ctx, s, Offer{Why: d.Why}); err != nil {
		s.CloseStreams()
		return nil, err
	}
	s.Logger.Info("data link is tcp instead of "+d.Kind, "reason", d.Why)
	return d.TCP.Link(ctx, s)
}
