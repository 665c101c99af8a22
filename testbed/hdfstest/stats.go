package hdfstest

import (
	"sort"
	"sync"
	"sync/atomic"
)

// counters are the cluster's live operation counts.
type counters struct {
	mu      sync.Mutex
	nnCalls map[string]int64

	readOps, writeOps            atomic.Int64
	bytesSent, bytesReceived     atomic.Int64
	packetsSent, packetsReceived atomic.Int64
	checksumErrors               atomic.Int64

	nnAuth                        map[string]int64 // under mu
	handshakes, handshakesRefused atomic.Int64
}

func newCounters() *counters {
	return &counters{nnCalls: map[string]int64{}, nnAuth: map[string]int64{}}
}

func (c *counters) auth(how string) {
	c.mu.Lock()
	c.nnAuth[how]++
	c.mu.Unlock()
}

func (c *counters) call(method string) {
	c.mu.Lock()
	c.nnCalls[method]++
	c.mu.Unlock()
}

// Stats is a snapshot of what the cluster served since it started or since
// the last ResetStats.
type Stats struct {
	// NameNodeCalls counts namenode RPCs by method.
	NameNodeCalls map[string]int64
	// ReadOps and WriteOps count datanode block reads and writes (one per
	// client connection-op, each a round trip).
	ReadOps, WriteOps int64
	// BytesSent counts the bytes datanodes sent to readers, framing included.
	BytesSent int64
	// BytesReceived counts the data bytes datanodes received.
	BytesReceived int64
	// PacketsSent and PacketsReceived count data-transfer packets.
	PacketsSent, PacketsReceived int64
	// ChecksumErrors counts chunks that failed verification on a datanode.
	ChecksumErrors int64

	// NameNodeCallsByAuth counts namenode RPCs by how their connection
	// authenticated and the hadoop.rpc.protection it runs at, such as
	// "TOKEN privacy" or "SIMPLE authentication".
	NameNodeCallsByAuth map[string]int64
	// Handshakes and HandshakesRefused count data-transfer SASL handshakes
	// (dfs.data.transfer.protection) datanodes completed and refused; a
	// connection without one counts as refused.
	Handshakes, HandshakesRefused int64
}

// NameNodeCallsExcept sums NameNodeCalls over every method not in skip
// (for example "renewLease", which clients send in the background).
func (s Stats) NameNodeCallsExcept(skip ...string) int64 {
	var n int64
outer:
	for m, c := range s.NameNodeCalls {
		for _, x := range skip {
			if m == x {
				continue outer
			}
		}
		n += c
	}
	return n
}

// Methods returns the namenode methods called, sorted.
func (s Stats) Methods() []string {
	out := make([]string, 0, len(s.NameNodeCalls))
	for m := range s.NameNodeCalls {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	calls := make(map[string]int64, len(c.nnCalls))
	for k, v := range c.nnCalls {
		calls[k] = v
	}
	byAuth := make(map[string]int64, len(c.nnAuth))
	for k, v := range c.nnAuth {
		byAuth[k] = v
	}
	c.mu.Unlock()
	st := Stats{
		NameNodeCalls:   calls,
		ReadOps:         c.readOps.Load(),
		WriteOps:        c.writeOps.Load(),
		BytesSent:       c.bytesSent.Load(),
		BytesReceived:   c.bytesReceived.Load(),
		PacketsSent:     c.packetsSent.Load(),
		PacketsReceived: c.packetsReceived.Load(),
		ChecksumErrors:  c.checksumErrors.Load(),
	}
	st.NameNodeCallsByAuth = byAuth
	st.Handshakes, st.HandshakesRefused = c.handshakes.Load(), c.handshakesRefused.Load()
	return st
}

func (c *counters) reset() {
	c.mu.Lock()
	c.nnCalls = map[string]int64{}
	c.nnAuth = map[string]int64{}
	c.mu.Unlock()
	for _, a := range []*atomic.Int64{&c.readOps, &c.writeOps, &c.bytesSent, &c.bytesReceived, &c.packetsSent, &c.packetsReceived, &c.checksumErrors, &c.handshakes, &c.handshakesRefused} {
		a.Store(0)
	}
}
