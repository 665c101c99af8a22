package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/worker"
)

// envWorkerProcess carries a worker's configuration to a test binary
// started as a worker process.
const envWorkerProcess = "SPINDLE_TESTCLUSTER_WORKER"

// processConfig is the part of worker.Config a worker process gets.
type processConfig struct {
	ID                string        `json:"id"`
	Masters           []string      `json:"masters"`
	Secret            string        `json:"secret"`
	Cores             int           `json:"cores"`
	MemoryMB          int64         `json:"memory_mb"`
	GPUs              int           `json:"gpus"`
	WorkDir           string        `json:"work_dir"`
	Binary            string        `json:"binary"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
	AddrFile          string        `json:"addr_file"`
}

// MaybeRunWorkerProcess turns the test binary into a worker when started
// by StartWorkerProcess; call it first in TestMain. It does not return in
// that case.
func MaybeRunWorkerProcess() {
	raw := os.Getenv(envWorkerProcess)
	if raw == "" {
		return
	}
	var pc processConfig
	if err := json.Unmarshal([]byte(raw), &pc); err != nil {
		fmt.Fprintf(os.Stderr, "worker process: bad configuration: %v\n", err)
		os.Exit(2)
	}
	c := worker.DefaultConfig()
	c.ID, c.Masters, c.Secret = pc.ID, pc.Masters, pc.Secret
	c.Addr = "127.0.0.1:0"
	c.Cores, c.MemoryMB, c.GPUs = pc.Cores, pc.MemoryMB, pc.GPUs
	c.WorkDir, c.Binary, c.HeartbeatInterval = pc.WorkDir, pc.Binary, pc.HeartbeatInterval
	c.StopGrace = time.Second
	c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w, err := worker.New(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker process: %v\n", err)
		os.Exit(2)
	}
	if err := os.WriteFile(pc.AddrFile, []byte(w.Addr()), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "worker process: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err = w.Run(ctx)
	stop()
	_ = w.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker process: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// WorkerProcess is a worker running as a child process of the test.
type WorkerProcess struct {
	ID   string
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartWorkerProcess starts the test binary as a worker (the test's
// TestMain must call MaybeRunWorkerProcess) with the defaults of
// StartWorker.
func StartWorkerProcess(t testing.TB, addrs []string, id string, cores int, memoryMB int64) *WorkerProcess {
	t.Helper()
	dir := t.TempDir()
	pc := processConfig{ID: id, Masters: addrs, Secret: Secret, Cores: cores, MemoryMB: memoryMB,
		WorkDir: dir + "/work", Binary: "/bin/sh", HeartbeatInterval: 100 * time.Millisecond, AddrFile: dir + "/addr"}
	raw, err := json.Marshal(pc)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorkerProcess+"="+string(raw))
	out := testutil.LogWriter(t)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker process %s: %v", id, err)
	}
	wp := &WorkerProcess{ID: id, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(wp.done)
	}()
	t.Cleanup(func() { wp.Kill() })
	testutil.WaitFor(t, 30*time.Second, testutil.Holds("worker process "+id+" to listen", func() bool {
		b, err := os.ReadFile(pc.AddrFile)
		wp.Addr = string(b)
		return err == nil && len(b) > 0
	}))

	return wp
}

// Pid returns the worker process's pid.
func (w *WorkerProcess) Pid() int { return w.cmd.Process.Pid }

// Kill kills the worker process with SIGKILL, as a crash would, and waits
// for it.
func (w *WorkerProcess) Kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}
