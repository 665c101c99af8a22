package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// membershipPath is where the training process finds the gang's
// collective membership (SPINDLE_MEMBERSHIP), beside the other services'
// files.
func membershipPath(filesDir string) string {
	return filepath.Join(filepath.Dir(filesDir), "membership.json")
}

// membershipJSON is the file's content, as the task package and the
// Python package read it.
type membershipJSON struct {
	Version      int64    `json:"version"`
	Peers        []string `json:"peers"`
	Incarnations []uint32 `json:"incarnations"`
	Joined       int      `json:"joined"`
	// Left lists the ranks, numbered as in the previous version, the
	// world went on without (an elastic job shrinking in place).
	Left []int `json:"left,omitempty"`
	// Services is every rank's framework rendezvous address (the port
	// MASTER_PORT names for rank 0), in rank order: a PyTorch group
	// re-formed after a shrink meets at its new rank 0's.
	Services []string `json:"services,omitempty"`
}

// incarnationsOf lists how often each rank's process was replaced, as the
// driver's membership says; every rank 0 when it says nothing.
func incarnationsOf(m *driverpb.Membership, world int) []uint32 {
	out := make([]uint32, world)
	copy(out, m.GetIncarnations())
	return out
}

// formatIncarnations is SPINDLE_INCARNATIONS's value.
func formatIncarnations(incs []uint32) string {
	s := make([]string, len(incs))
	for i, n := range incs {
		s[i] = strconv.FormatUint(uint64(n), 10)
	}
	return strings.Join(s, ",")
}

// membershipHook hands the training process the gang's membership: it
// writes the file at the start, and again whenever a heartbeat response
// brings a newer version (a lost rank was replaced alone while this
// process runs), so that the process rejoins the replacement in place.
type membershipHook struct {
	logger *slog.Logger

	mu      sync.Mutex
	path    string
	written bool // the file holds version
	version int64
}

// The parts of the life cycle membershipHook takes part in.
var _ taskHook = (*membershipHook)(nil)

func (h *membershipHook) Name() string { return "membership" }

func (h *membershipHook) Prepare(_ context.Context, r *taskRun) error {
	h.path = membershipPath(r.filesDir)
	m := r.id.membership
	if m == nil {
		m = &driverpb.Membership{Peers: r.id.peers, Incarnations: incarnationsOf(nil, r.id.worldSize)}
	}
	r.membership = h
	return h.update(m)
}

// current is the version the process has.
func (h *membershipHook) current() int64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// update writes m when it is newer than what the process has: under a
// temporary name, then renamed, so a reader never sees half a file.
func (h *membershipHook) update(m *driverpb.Membership) error {
	if h == nil || m == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.path == "" || (h.written && m.GetVersion() <= h.version) {
		return nil
	}
	out := membershipJSON{Version: m.GetVersion(), Incarnations: incarnationsOf(m, len(m.GetPeers())), Joined: int(m.GetJoined())}
	for _, r := range m.GetLeft() {
		out.Left = append(out.Left, int(r))
	}
	for _, p := range m.GetPeers() {
		addr, err := peerAddr(p, portPeer)
		if err != nil {
			return fmt.Errorf("membership version %d: %w", m.GetVersion(), err)
		}
		out.Peers = append(out.Peers, addr)
		if svc, err := peerAddr(p, portService); err == nil {
			out.Services = append(out.Services, svc)
		}
	}
	if len(out.Services) != len(out.Peers) {
		out.Services = nil // not every rank published one
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(h.path, b, 0o600); err != nil {
		return fmt.Errorf("write the membership file %s: %w", h.path, err)
	}
	h.version, h.written = m.GetVersion(), true
	switch {
	case len(out.Left) > 0:
		h.logger.Info("collective membership shrank; the training process goes on in the smaller world", "version", m.GetVersion(),
			"left", out.Left, "world_size", len(out.Peers), "incarnations", out.Incarnations)
	case m.GetVersion() > 0:
		h.logger.Info("collective membership changed; the training process rejoins", "version", m.GetVersion(),
			"joined", m.GetJoined(), "incarnations", out.Incarnations)
	}
	return nil
}

func (h *membershipHook) Close() error { return nil }
