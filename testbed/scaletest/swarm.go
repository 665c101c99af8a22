package scaletest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/auth"
)

// swarmEnv, set to 1, makes a program that calls MaybeSwarm the swarm.
const swarmEnv = "SPINDLE_SCALETEST_SWARM"

// command is one line from the manager to the swarm.
type command struct {
	// Op is "start" (an executor), "finish" (every executor ends its
	// training with exit 0 at its next heartbeat) or "stop" (the named
	// executors, as a cluster kills containers).
	Op        string   `json:"op"`
	ID        string   `json:"id,omitempty"`
	Driver    string   `json:"driver,omitempty"`
	Secret    string   `json:"secret,omitempty"`
	Host      string   `json:"host,omitempty"`
	DelayMS   int64    `json:"delay_ms,omitempty"`
	Heartbeat int64    `json:"heartbeat_ms,omitempty"`
	IDs       []string `json:"ids,omitempty"`
}

// report is one line from the swarm to the manager.
type report struct {
	ID string `json:"id"`
	// Ev is "started", "registered" or "exited".
	Ev   string `json:"ev"`
	Unix int64  `json:"t"` // nanoseconds
	Code int    `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// PeersEnvBytes is, on "registered", the size of the SPINDLE_PEERS
	// value this rank's training process would get.
	PeersEnvBytes int `json:"peers_env_bytes,omitempty"`
	// Heartbeats is, on "exited", how many heartbeats the executor sent.
	Heartbeats int `json:"heartbeats,omitempty"`
}

// MaybeSwarm runs this process as the swarm when the manager started it so,
// and exits; otherwise it returns at once. Programs and test binaries that
// use a Manager call it first thing in main (TestMain).
func MaybeSwarm() {
	if os.Getenv(swarmEnv) != "1" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := runSwarm(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scaletest swarm:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// swarm runs simulated executors as the manager's commands say.
type swarm struct {
	out    *json.Encoder
	outMu  sync.Mutex
	finish chan struct{}
	once   sync.Once
	// decodeOnce picks the one executor that decodes its whole
	// registration answer (register.go).
	decodeOnce atomic.Bool

	// onReport, when set, gets every report instead of out (the
	// in-process executors of a YARN run).
	onReport func(report)

	mu    sync.Mutex
	stops map[string]context.CancelFunc
	wg    sync.WaitGroup
}

// runSwarm reads commands from in until it ends, then stops every executor
// still running and waits for them.
func runSwarm(ctx context.Context, in io.Reader, out io.Writer) error {
	bw := bufio.NewWriter(out)
	s := &swarm{out: json.NewEncoder(bw), finish: make(chan struct{}), stops: map[string]context.CancelFunc{}}
	flush := time.NewTicker(20 * time.Millisecond)
	defer flush.Stop()
	flushDone := make(chan struct{})
	var flusher sync.WaitGroup
	flusher.Go(func() {
		for {
			select {
			case <-flush.C:
				s.outMu.Lock()
				_ = bw.Flush()
				s.outMu.Unlock()
			case <-flushDone:
				return
			}
		}
	})
	ctx, cancel := context.WithCancel(ctx)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var err error
	for sc.Scan() {
		var c command
		if err = json.Unmarshal(sc.Bytes(), &c); err != nil {
			err = fmt.Errorf("read command %q: %w", sc.Text(), err)
			break
		}
		s.handle(ctx, c)
	}
	if err == nil {
		err = sc.Err()
	}
	cancel()
	s.wg.Wait()
	close(flushDone)
	flusher.Wait()
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func (s *swarm) handle(ctx context.Context, c command) {
	switch c.Op {
	case "start":
		ectx, stop := context.WithCancel(ctx)
		s.mu.Lock()
		s.stops[c.ID] = stop
		s.mu.Unlock()
		s.wg.Go(func() {
			defer stop()
			s.runExecutor(ectx, c)
		})
	case "finish":
		s.once.Do(func() { close(s.finish) })
	case "stop":
		s.mu.Lock()
		for _, id := range c.IDs {
			if stop := s.stops[id]; stop != nil {
				stop()
			}
		}
		s.mu.Unlock()
	}
}

func (s *swarm) emit(r report) {
	r.Unix = time.Now().UnixNano()
	if s.onReport != nil {
		s.onReport(r)
		return
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_ = s.out.Encode(r)
}

// runExecutor is one simulated executor: its container starts after the
// delay, it registers, heartbeats until the swarm is told to finish or it
// is stopped, and reports its exit.
func (s *swarm) runExecutor(ctx context.Context, c command) {
	if c.DelayMS > 0 {
		t := time.NewTimer(time.Duration(c.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	s.emit(report{ID: c.ID, Ev: "started"})
	hbs, code, err := s.execute(ctx, c)
	r := report{ID: c.ID, Ev: "exited", Code: code, Heartbeats: hbs}
	if err != nil {
		r.Msg = err.Error()
	}
	s.emit(r)
}

// execute speaks the control plane as an executor does and returns the
// heartbeats it sent and its exit code.
func (s *swarm) execute(ctx context.Context, c command) (int, int, error) {
	signer, err := auth.NewSigner(c.Secret)
	if err != nil {
		return 0, 1, fmt.Errorf("job secret: %w", err)
	}
	conn, err := grpc.NewClient(c.Driver, append(signer.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return 0, 1, fmt.Errorf("connect to driver %s: %w", c.Driver, err)
	}
	defer conn.Close()
	client := driverpb.NewControlClient(conn)
	req := &driverpb.RegisterRequest{ExecutorId: c.ID, Host: c.Host, Ports: []uint32{40000, 40001}, Pid: int32(os.Getpid())}
	var rank int32
	r := report{ID: c.ID, Ev: "registered"}
	if s.decodeOnce.CompareAndSwap(false, true) {
		// One executor decodes the whole answer, as every real one does.
		resp, err := client.Register(ctx, req, grpc.WaitForReady(true))
		if err != nil {
			return 0, 1, fmt.Errorf("register: %w", err)
		}
		rank, r.PeersEnvBytes = resp.GetRank(), peersEnvBytes(resp.GetPeers())
	} else if rank, err = registerRaw(ctx, conn, req); err != nil {
		return 0, 1, fmt.Errorf("register: %w", err)
	}
	s.emit(r)
	tr := newTraining(rank)
	tick := time.NewTicker(time.Duration(c.Heartbeat) * time.Millisecond)
	defer tick.Stop()
	hbs := 0
	for {
		select {
		case <-ctx.Done():
			return hbs, 137, nil // killed, as a container is
		case <-s.finish:
			_, err := client.ReportExit(ctx, tr.exit(c.ID))
			if err != nil {
				return hbs, 0, fmt.Errorf("report exit: %w", err)
			}
			return hbs, 0, nil
		case <-tick.C:
			hr, err := client.Heartbeat(ctx, tr.heartbeat(c.ID))
			if err != nil {
				if ctx.Err() != nil {
					return hbs, 137, nil
				}
				return hbs, 1, fmt.Errorf("heartbeat: %w", err)
			}
			hbs++
			if hr.GetStop() {
				return hbs, 143, nil
			}
		}
	}
}

// peersEnvBytes is the size of SPINDLE_PEERS built from peers, as the
// executor builds it (host:port of each rank's first port, comma-separated).
func peersEnvBytes(peers []*driverpb.Peer) int {
	addrs := make([]string, len(peers))
	for i, p := range peers {
		port := uint32(0)
		if len(p.GetPorts()) > 0 {
			port = p.GetPorts()[0]
		}
		addrs[i] = fmt.Sprintf("%s:%d", p.GetHost(), port)
	}
	return len(strings.Join(addrs, ","))
}
