package scaletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

// ManagerConfig shapes the simulated cluster.
type ManagerConfig struct {
	// StartLatency is the least time from a request to its container's
	// start; each container starts up to StartSpread later than that, at
	// random, as containers on a busy cluster do.
	StartLatency, StartSpread time.Duration
	// RanksPerHost is how many executors share a simulated host.
	RanksPerHost int
	// Heartbeat is how often simulated executors heartbeat (the job's
	// spindle.executor.heartbeatInterval).
	Heartbeat time.Duration
	// Seed makes the start times repeatable.
	Seed uint64
}

// Manager is a driver.ClusterManager whose executors are simulated in a
// swarm child process (this program again, see MaybeSwarm).
type Manager struct {
	cfg    ManagerConfig
	cmd    *exec.Cmd
	in     io.WriteCloser
	events chan driver.Event
	done   chan struct{} // closed by Close
	reader sync.WaitGroup
	rnd    *rand.Rand

	mu         sync.Mutex
	enc        *json.Encoder
	live       map[string]bool
	started    map[string]time.Time
	registered map[string]time.Time
	heartbeats int
	peersEnv   int
	failures   []string
	changed    chan struct{} // closed and replaced on every report
}

var _ driver.ClusterManager = (*Manager)(nil)

// NewManager starts the swarm process.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.RanksPerHost <= 0 {
		cfg.RanksPerHost = 8
	}
	if cfg.Heartbeat <= 0 {
		return nil, errors.New("scaletest: ManagerConfig.Heartbeat must be positive")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run the swarm: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), swarmEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("swarm stdin: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("swarm stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the swarm %s: %w", exe, err)
	}
	m := &Manager{cfg: cfg, cmd: cmd, in: in, enc: json.NewEncoder(in), events: make(chan driver.Event, 1024),
		done: make(chan struct{}), rnd: rand.New(rand.NewPCG(cfg.Seed, 1)),
		live: map[string]bool{}, started: map[string]time.Time{}, registered: map[string]time.Time{}, changed: make(chan struct{})}
	m.reader.Go(func() { m.read(out) })
	return m, nil
}

// Request starts every executor in specs in the swarm, each after its
// container-start latency, and returns once they are all asked for.
func (m *Manager) Request(ctx context.Context, specs []driver.ExecutorSpec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, s := range specs {
		addr, id := argValue(s.Args, "--driver"), argValue(s.Args, "--id")
		if addr == "" || id == "" {
			return fmt.Errorf("scaletest: executor %s: no --driver or --id in its arguments", s.ID)
		}
		delay := m.cfg.StartLatency
		if m.cfg.StartSpread > 0 {
			delay += time.Duration(m.rnd.Int64N(int64(m.cfg.StartSpread)))
		}
		h := i / m.cfg.RanksPerHost
		c := command{Op: "start", ID: id, Driver: addr, Secret: s.Env[envcontract.JobSecret],
			Host:    fmt.Sprintf("worker-%04d.rack%02d.cluster.example.com", h, h/40),
			DelayMS: delay.Milliseconds(), Heartbeat: m.cfg.Heartbeat.Milliseconds()}
		if err := m.enc.Encode(c); err != nil {
			return fmt.Errorf("scaletest: start executor %s in the swarm: %w", id, err)
		}
		m.live[id] = true
	}
	return ctx.Err()
}

// Finish tells every simulated training process to end well at its next
// heartbeat.
func (m *Manager) Finish() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.enc.Encode(command{Op: "finish"})
}

// Release stops the named executors (all when ids is empty) and waits
// until the swarm says they are gone.
func (m *Manager) Release(ctx context.Context, ids []string) error {
	m.mu.Lock()
	if len(ids) == 0 {
		for id := range m.live {
			ids = append(ids, id)
		}
	}
	err := m.enc.Encode(command{Op: "stop", IDs: ids})
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("scaletest: stop %d executors: %w", len(ids), err)
	}
	return m.wait(ctx, func() bool {
		return !slices.ContainsFunc(ids, func(id string) bool { return m.live[id] })
	})
}

// wait waits until cond, called with m.mu held, holds.
func (m *Manager) wait(ctx context.Context, cond func() bool) error {
	for {
		m.mu.Lock()
		ok, changed := cond(), m.changed
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Events delivers executor events until Close.
func (m *Manager) Events() <-chan driver.Event { return m.events }

// Close ends the swarm and every executor in it.
func (m *Manager) Close() error {
	close(m.done)
	m.mu.Lock()
	err := m.in.Close()
	m.mu.Unlock()
	werr := m.cmd.Wait()
	m.reader.Wait()
	return errors.Join(err, werr)
}

// read turns the swarm's reports into events and timings until it ends.
func (m *Manager) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var r report
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		at := time.Unix(0, r.Unix)
		var ev *driver.Event
		m.mu.Lock()
		switch r.Ev {
		case "started":
			m.started[r.ID] = at
			ev = &driver.Event{ExecutorID: r.ID, Kind: driver.ExecutorStarted, Host: "sim", Time: at}
		case "registered":
			m.registered[r.ID] = at
			m.peersEnv = max(m.peersEnv, r.PeersEnvBytes)
		case "exited":
			delete(m.live, r.ID)
			m.heartbeats += r.Heartbeats
			if r.Msg != "" {
				m.failures = append(m.failures, r.ID+": "+r.Msg)
			}
			ev = &driver.Event{ExecutorID: r.ID, Kind: driver.ExecutorExited, ExitCode: r.Code, Message: r.Msg, Time: at}
		}
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
		if ev != nil {
			select {
			case m.events <- *ev:
			case <-m.done:
			}
		}
	}
}

// Timings are when the swarm's containers started and their executors
// registered (their Register calls returned: the whole gang was in).
type Timings struct {
	FirstStart, LastStart, FirstRegistered, LastRegistered time.Time
	Started, Registered                                    int
	// PeersEnvBytes is the size of SPINDLE_PEERS for one rank.
	PeersEnvBytes int
	// Heartbeats is how many heartbeats exited executors sent in all.
	Heartbeats int
	// Failures are the executors that ended with an error, and why.
	Failures []string
}

// Timings returns what the swarm reported so far.
func (m *Manager) Timings() Timings {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := Timings{Started: len(m.started), Registered: len(m.registered), PeersEnvBytes: m.peersEnv,
		Heartbeats: m.heartbeats, Failures: slices.Clone(m.failures)}
	for _, at := range m.started {
		if t.FirstStart.IsZero() || at.Before(t.FirstStart) {
			t.FirstStart = at
		}
		if at.After(t.LastStart) {
			t.LastStart = at
		}
	}
	for _, at := range m.registered {
		if t.FirstRegistered.IsZero() || at.Before(t.FirstRegistered) {
			t.FirstRegistered = at
		}
		if at.After(t.LastRegistered) {
			t.LastRegistered = at
		}
	}
	return t
}

// WaitRegistered waits until n executors have registered.
func (m *Manager) WaitRegistered(ctx context.Context, n int) error {
	return m.wait(ctx, func() bool { return len(m.registered) >= n })
}

// argValue returns the value after flag in args.
func argValue(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// SwarmCPU is the CPU time the swarm process has used so far, from
// /proc (0 where there is none): what simulating the executors costs the
// machine the driver shares with them.
func (m *Manager) SwarmCPU() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which ends with the last ')':
	// utime and stime are the 12th and 13th of them, in clock ticks.
	_, rest, ok := strings.Cut(string(b[bytes.LastIndexByte(b, ')')+1:]), " ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100
