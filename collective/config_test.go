package collective

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestHandshakeMismatch(t *testing.T) {
	type want struct {
		blames int
		says   string
	}
	tests := []struct {
		name  string
		world int
		tweak func(rank int, cfg *Config)
		want  map[int]want // by rank; other ranks must fail too
		// alt is another failure a rank of want may see first, when two
		// refusals race.
		alt map[int]want
	}{
		{
			name:  "job id",
			world: 2,
			tweak: func(r int, cfg *Config) {
				if r == 1 {
					cfg.JobID = "other-job"
				}
			},
			want: map[int]want{0: {1, `job id`}, 1: {0, `job id`}},
		},
		{
			name:  "world size",
			world: 2,
			tweak: func(r int, cfg *Config) {
				if r == 1 {
					cfg.WorldSize = 3
					cfg.Peers = append(cfg.Peers[:2:2], "127.0.0.1:1")
				}
			},
			// Both ranks dial each other (ring and tree links), so either may
			// be the one to reject the other's hello first.
			want: map[int]want{0: {1, "world size"}, 1: {0, "world size"}},
		},
		{
			name:  "peer order",
			world: 3,
			tweak: func(r int, cfg *Config) {
				if r == 0 {
					// Rank 0 believes rank 1 is where rank 2 listens.
					cfg.Peers = []string{cfg.Peers[0], cfg.Peers[2], cfg.Peers[1]}
				}
			},
			// Rank 2 may have finished connecting before rank 0's bad hello
			// arrives; it then fails at its first operation instead. Rank 0
			// dials both others (ring and tree links), so the first refusal
			// it hears may come from either.
			want: map[int]want{0: {1, "addressed to rank 1, but this is rank 2"}},
			alt:  map[int]want{0: {2, "addressed to rank 2, but this is rank 1"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms, errs := startRanks(t, tc.world, func(r int, cfg *Config) {
				cfg.ConnectTimeout = testutil.Scale(2 * time.Second)
				tc.tweak(r, cfg)
			})
			for r, err := range errs {
				if err == nil {
					if _, ok := tc.want[r]; ok {
						t.Fatalf("rank %d: New succeeded", r)
					}
					if err := comms[r].Barrier(context.Background()); err == nil {
						t.Fatalf("rank %d: barrier in a misconfigured job succeeded", r)
					}
					continue
				}
				w, ok := tc.want[r]
				if !ok {
					continue
				}
				var pe *PeerError
				matches := func(w want) bool {
					return errors.Is(err, ErrHandshake) && errors.As(err, &pe) && pe.Rank == w.blames && strings.Contains(err.Error(), w.says)
				}
				if alt, ok := tc.alt[r]; !matches(w) && (!ok || !matches(alt)) {
					t.Fatalf("rank %d: got %v, want ErrHandshake blaming rank %d and saying %q", r, err, w.blames, w.says)
				}
			}
		})
	}
}

// TestConnectTimeout: a peer that never starts is blamed when the
// connect timeout passes, or the caller's deadline when that comes first,
// and the error says which.
func TestConnectTimeout(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts nothing: a peer that never starts
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close() // connection refused
	for _, tc := range []struct {
		name, addr     string
		callerDeadline bool
		says           string
	}{
		{"silent", silent.Addr().String(), false, "within the connect timeout of 300ms"},
		{"refused", closedAddr, false, "within the connect timeout of 300ms"},
		{"silent/caller's deadline", silent.Addr().String(), true, "before the caller's deadline"},
		{"refused/caller's deadline", closedAddr, true, "before the caller's deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, connect := context.Background(), 300*time.Millisecond
			if tc.callerDeadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, connect)
				defer cancel()
				connect = time.Hour
			}
			_, err = New(ctx, Config{
				Rank: 0, WorldSize: 2, Peers: []string{ln.Addr().String(), tc.addr}, Listener: ln,
				ConnectTimeout: connect, Logger: quietLogger(),
			})
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Rank != 1 || pe.Addr != tc.addr || !errors.Is(err, ErrPeerLost) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want ErrPeerLost naming rank 1 at %s and saying %q", err, tc.addr, tc.says)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	tests := []struct {
		name string
		cfg  Config
		want string // "" means valid
	}{
		{"valid", Config{Rank: 1, WorldSize: 2, Peers: []string{"h:1", addr}, Listener: ln}, ""},
		{"single rank without peers", Config{WorldSize: 1}, ""},
		{"zero world", Config{WorldSize: 0}, "world size 0"},
		{"rank out of range", Config{Rank: 2, WorldSize: 2, Peers: []string{"h:1", "h:2"}}, "rank 2"},
		{"peer count", Config{Rank: 0, WorldSize: 3, Peers: []string{"h:1", "h:2"}}, "2 peer addresses for world size 3"},
		{"bad address", Config{Rank: 0, WorldSize: 2, Peers: []string{"h:1", "nocolon"}}, `"nocolon" of rank 1`},
		{"listener port", Config{Rank: 0, WorldSize: 2, Peers: []string{"h:1", "h:2"}, Listener: ln}, "listener of rank 0"},
		{"negative timeout", Config{WorldSize: 1, Timeout: -time.Second}, "timeout"},
		{"short token", Config{WorldSize: 1, Token: "s3cret"}, "peer token is 6 bytes long: need at least 16"},
		{"token", Config{WorldSize: 1, Token: testToken}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	peersFile := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(peersFile, []byte("10.0.0.1:7000,10.0.0.2:7000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		EnvRank:      "1",
		EnvWorldSize: "2",
		EnvPeers:     "10.0.0.1:7000, 10.0.0.2:7000",
		EnvJobID:     "job-7",
	}
	tests := []struct {
		name   string
		change map[string]string // "" deletes the variable
		want   string            // the variable the error must name; "" means valid
	}{
		{"valid", nil, ""},
		{"timeout", map[string]string{EnvTimeoutSecs: "2.5"}, ""},
		{"no rank", map[string]string{EnvRank: ""}, EnvRank},
		{"bad rank", map[string]string{EnvRank: "one"}, EnvRank},
		{"rank too big", map[string]string{EnvRank: "2"}, EnvRank},
		{"bad world", map[string]string{EnvWorldSize: "0"}, EnvWorldSize},
		{"no peers", map[string]string{EnvPeers: ""}, EnvPeers},
		{"peer count", map[string]string{EnvPeers: "a:1"}, EnvPeers},
		{"bad peer", map[string]string{EnvPeers: "a:1,b"}, EnvPeers},
		{"peers file", map[string]string{EnvPeers: "", envcontract.PeersFile: peersFile}, ""},
		{"peers file gone", map[string]string{EnvPeers: "", envcontract.PeersFile: peersFile + ".gone"}, envcontract.PeersFile},
		{"bad timeout", map[string]string{EnvTimeoutSecs: "-3"}, EnvTimeoutSecs},
		{"bad fd", map[string]string{EnvPeerFD: "x"}, EnvPeerFD},
		{"token", map[string]string{EnvPeerToken: testToken}, ""},
		{"incarnations", map[string]string{EnvIncarnations: "0, 2"}, ""},
		{"incarnation count", map[string]string{EnvIncarnations: "0"}, EnvIncarnations},
		{"bad incarnation", map[string]string{EnvIncarnations: "0,-1"}, EnvIncarnations + `="0,-1": rank 1`},
		{"short token", map[string]string{EnvPeerToken: "abc123"}, EnvPeerToken + " is 6 bytes long: need at least 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.change {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			cfg, err := configFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error naming %s", err, tc.want)
				}
				if v := tc.change[EnvPeerToken]; v != "" && strings.Contains(err.Error(), v) {
					t.Fatalf("error %q shows the token", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Rank != 1 || cfg.WorldSize != 2 || cfg.Peers[1] != "10.0.0.2:7000" || cfg.JobID != "job-7" {
				t.Fatalf("got %+v", cfg)
			}
			if cfg.Token != tc.change[EnvPeerToken] {
				t.Fatalf("token %q, want %q", cfg.Token, tc.change[EnvPeerToken])
			}
			if _, ok := tc.change[EnvTimeoutSecs]; ok && cfg.Timeout != 2500*time.Millisecond {
				t.Fatalf("timeout %s, want 2.5s", cfg.Timeout)
			}
			if _, ok := tc.change[EnvIncarnations]; ok && !slices.Equal(cfg.Incarnations, []uint32{0, 2}) {
				t.Fatalf("incarnations %v, want [0 2]", cfg.Incarnations)
			}
		})
	}
}

// inheritFD returns a new raw descriptor for ln's socket, as a child
// process would inherit it; whoever it is handed to owns it.
func inheritFD(t *testing.T, ln net.Listener) string {
	t.Helper()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(fd)
}

// TestConfigFromEnvListener hands an inherited-style descriptor to
// ConfigFromEnv and checks that the listener it builds is the one bound.
func TestConfigFromEnvListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lookup := func(peers, fd string) func(string) (string, bool) {
		env := map[string]string{EnvRank: "0", EnvWorldSize: "1", EnvPeers: peers, EnvPeerFD: fd}
		return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	}

	if _, err := configFromEnv(lookup("127.0.0.1:1", inheritFD(t, ln))); err == nil || !strings.Contains(err.Error(), EnvPeerFD) {
		t.Fatalf("listener on another port than SPINDLE_PEERS says: %v", err)
	}

	// A descriptor that is not a socket.
	f, err := os.CreateTemp(t.TempDir(), "notsocket")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := configFromEnv(lookup(ln.Addr().String(), strconv.Itoa(fd))); err == nil || !strings.Contains(err.Error(), "not a listening socket") {
		t.Fatalf("regular file as listener: %v", err)
	}

	cfg, err := configFromEnv(lookup(ln.Addr().String(), inheritFD(t, ln)))
	if err != nil {
		t.Fatal(err)
	}
	defer cfg.Listener.Close()
	if cfg.Listener.Addr().String() != ln.Addr().String() {
		t.Fatalf("listener on %s, want %s", cfg.Listener.Addr(), ln.Addr())
	}
}

// TestMeshTimeoutsFromConfig: the mesh's hello, notice and probe bounds
// come from its configuration, with the documented defaults for zero; a
// mesh told to wait briefly for a hello drops a connection that sends
// none.
func TestMeshTimeoutsFromConfig(t *testing.T) {
	d := DefaultConfig()
	if d.HandshakeTimeout != 10*time.Second || d.NoticeTimeout != 2*time.Second || d.ProbeTimeout != time.Second {
		t.Fatalf("defaults: handshake %v, notice %v, probe %v", d.HandshakeTimeout, d.NoticeTimeout, d.ProbeTimeout)
	}
	if c := (Config{}).withDefaults(); c.HandshakeTimeout != d.HandshakeTimeout || c.NoticeTimeout != d.NoticeTimeout || c.ProbeTimeout != d.ProbeTimeout {
		t.Fatalf("zero config: handshake %v, notice %v, probe %v", c.HandshakeTimeout, c.NoticeTimeout, c.ProbeTimeout)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMesh(MeshConfig{Rank: 0, WorldSize: 2, Peers: []string{ln.Addr().String(), "127.0.0.1:1"}, Listener: ln,
		JobID: "job", HandshakeTimeout: 20 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.cfg.NoticeTimeout != DefaultNoticeTimeout || m.cfg.ProbeTimeout != DefaultProbeTimeout {
		t.Fatalf("zero notice and probe bounds: %v, %v", m.cfg.NoticeTimeout, m.cfg.ProbeTimeout)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The mesh closes the silent connection after its 20ms; the read's
	// own deadline, far longer, is only there to end the test if not.
	c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a connection that sent no hello: read %v, want EOF (closed by the mesh)", err)
	}
}
