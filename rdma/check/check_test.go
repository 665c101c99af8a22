package check

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/internal/sysfstest"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/rdma"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

const testToken = "0123456789abcdef-check-test"

func TestMain(m *testing.M) {
	// UCX over its TCP transport: no RDMA hardware needed.
	if os.Getenv("UCX_TLS") == "" {
		os.Setenv("UCX_TLS", "tcp")
	}
	goleak.VerifyTestMain(m)
}

func smallConfig() Config {
	cfg := DefaultConfig()
	cfg.Token, cfg.Pings, cfg.Bytes, cfg.MessageBytes, cfg.Timeout = testToken, 50, 8<<20, 1<<20, 10*time.Second
	return cfg
}

// TestCheckOverLoopback runs both ends on loopback: each link is measured
// (UCX where this binary can use it, else skipped saying why), and the
// listener gets the same results as the peer.
func TestCheckOverLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	l, err := Listen("127.0.0.1:0", smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	type served struct {
		peer    string
		results []Result
		err     error
	}
	done := make(chan served, 1)
	go func() {
		p, rs, err := l.Serve(ctx)
		done <- served{p, rs, err}
	}()
	results, err := Dial(ctx, l.Addr().String(), smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatalf("listener: %v", s.err)
	}
	if len(results) != 2 || results[0].Link != "tcp" || results[1].Link != "ucx" {
		t.Fatalf("results %+v, want tcp then ucx", results)
	}
	if len(s.results) != len(results) || s.results[0] != results[0] || s.results[1] != results[1] {
		t.Fatalf("the listener got %+v, the peer %+v", s.results, results)
	}
	ucxOK, why := ucx.Available()
	// Both ends are in this process: the TCP link's bytes go through
	// shared memory, UCX's over the transport UCX_TLS names.
	overUCX := map[string]string{"tcp": "tcp", "sm": "shared memory"}[os.Getenv("UCX_TLS")]
	for i, want := range []string{"shared memory", overUCX} {
		if r := results[i]; want != "" && r.Skipped == "" && (r.Over != want || !strings.Contains(r.String(), r.Link+" link over "+want+":")) {
			t.Errorf("%s link: over %q (%q), want %q", r.Link, r.Over, r, want)
		}
	}
	for _, r := range results {
		t.Log(r)
		if r.Link == "ucx" && !ucxOK {
			if !strings.Contains(r.Skipped, why) {
				t.Errorf("ucx skipped with %q, want the reason %q", r.Skipped, why)
			}
			continue
		}
		if r.Skipped != "" || r.LatencyUS <= 0 || r.ToListenerGBps <= 0 || r.ToPeerGBps <= 0 {
			t.Errorf("%s: %+v, want every figure measured", r.Link, r)
		}
		if !strings.Contains(r.String(), "latency") {
			t.Errorf("%q", r)
		}
	}
}

// TestBadInput: a wrong token, an unreachable listener, a short token and
// a tree that is not sysfs are the caller's input, named in the error.
func TestBadInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	l, err := Listen("127.0.0.1:0", smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := l.Serve(sctx)
		done <- err
	}()
	wrong := smallConfig()
	wrong.Token = "fedcba9876543210-another-token"
	addr := l.Addr().String()
	_, err = Dial(ctx, addr, wrong)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "different token") {
		t.Errorf("wrong token: %v", err)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("listener after a bad token and cancel: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if _, err := Dial(ctx, closed, smallConfig()); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "cannot reach the listener at "+closed) {
		t.Errorf("unreachable: %v", err)
	}
	short := smallConfig()
	short.Token = "short"
	if _, err := Dial(ctx, closed, short); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), EnvToken) {
		t.Errorf("short token: %v", err)
	}
	notSysfs := t.TempDir()
	if _, err := Devices(notSysfs); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), notSysfs) {
		t.Errorf("not a sysfs tree: %v", err)
	}
}

// TestWriteDevices prints a fake RoCE host: ports, state, link layer,
// GIDs, netdev and what a job selects.
func TestWriteDevices(t *testing.T) {
	root := sysfstest.Unpack(t, filepath.Join("..", "testdata", "roce-mlx5.txtar"))
	devs, err := Devices(root)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	WriteDevices(&b, devs, rdma.ModeAuto, rdma.Filter{})
	for _, want := range []string{
		"mlx5_0: MT4119, firmware 16.35.2000",
		"port 1: ACTIVE (LinkUp), RoCE v2, 100 Gb/sec",
		"netdev: eth2 10.10.0.2",
		"GID 3: 0000:0000:0000:0000:0000:ffff:0a0a:0002 RoCE v2 on eth2",
		"a job with spindle.rdma.mode=auto uses: mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WriteDevices(&b, nil, rdma.ModeRequired, rdma.Filter{})
	if !strings.Contains(b.String(), "RDMA devices: none") || !strings.Contains(b.String(), "and fails:") {
		t.Errorf("no devices:\n%s", b.String())
	}
}
