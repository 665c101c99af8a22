package executor

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestVisibleDevices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"0", []string{"0"}},
		{"0,2", []string{"0", "2"}},
		{" 1 , 3 ", []string{"1", "3"}},
		{"GPU-5f2a,GPU-77b1", []string{"GPU-5f2a", "GPU-77b1"}},
		{"-1", nil},
		{"1,-1,2", []string{"1"}},
		{"NoDevFiles", nil},
	} {
		got := visibleDevices(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("visibleDevices(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// smiOutput is what nvidia-smi answers gpuQuery on a machine of four GPUs,
// one of which cannot report its utilisation.
const smiOutput = `0, GPU-aaaa-0000, 37, 1024
1, GPU-bbbb-1111, 81, 2048
2, GPU-cccc-2222, [N/A], 512
3, GPU-dddd-3333, 0, 0
`

func TestParseGPUQuery(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name    string
		devices []string
		gpus    int
		util    float64
		mem     int64
	}{
		{"one by index", []string{"1"}, 1, 0.81, 2048 << 20},
		{"two by index", []string{"0", "1"}, 2, 0.59, 3072 << 20},
		{"by UUID", []string{"GPU-aaaa-0000"}, 1, 0.37, 1024 << 20},
		{"utilisation unknown", []string{"2"}, 1, 0, 512 << 20},
		{"idle", []string{"3"}, 1, 0, 0},
		{"one unreadable of two", []string{"1", "2"}, 2, 0.81, 2560 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseGPUQuery([]byte(smiOutput), tc.devices, at)
			if err != nil {
				t.Fatal(err)
			}
			if s.gpus != tc.gpus || s.memBytes != tc.mem || s.util < tc.util-1e-9 || s.util > tc.util+1e-9 || !s.at.Equal(at) {
				t.Fatalf("sample %+v, want %d GPUs at %.2f using %d bytes", s, tc.gpus, tc.util, tc.mem)
			}
		})
	}
	if _, err := parseGPUQuery([]byte(smiOutput), []string{"7"}, at); err == nil || !strings.Contains(err.Error(), "7") {
		t.Errorf("a device nvidia-smi does not list: %v, want an error naming it", err)
	}
	if _, err := parseGPUQuery([]byte("garbage\n"), []string{"0"}, at); err == nil {
		t.Error("output of another shape parsed")
	}
}

// fakeSMI puts an nvidia-smi that runs script on PATH.
func fakeSMI(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

// startSampler runs a sampler of devices until the test ends, logging
// into the returned buffer.
func startSampler(t *testing.T, devices string, timeout time.Duration) (*gpuSampler, *syncbuf.Buffer, func()) {
	t.Helper()
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g := newGPUSampler([]string{"PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=" + devices}, 10*time.Millisecond, DefaultGPUSampleTimeout, logger)
	if g == nil {
		t.Fatalf("no sampler for CUDA_VISIBLE_DEVICES=%s", devices)
	}
	g.period, g.timeout = 20*time.Millisecond, timeout
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.Run(ctx); err != nil {
			t.Errorf("sampler: %v", err)
		}
	}()
	stop := func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return g, &logs, stop
}

// TestGPUSamplerReadsItsDevices: a heartbeat carries the use of the
// devices CUDA_VISIBLE_DEVICES gives the process, not the machine's others.
func TestGPUSamplerReadsItsDevices(t *testing.T) {
	// Each call writes its arguments aside and renames them into place, so
	// the test never reads a file a later call has just truncated.
	dir := fakeSMI(t, "d=$(dirname \"$0\")\necho \"$@\" > \"$d/args.$$\" && mv \"$d/args.$$\" \"$d/args\"\ncat <<'EOF'\n"+smiOutput+"EOF\n")
	g, _, _ := startSampler(t, "1,GPU-dddd-3333", 5*time.Second)
	var u driverpb.Usage
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("a GPU sample", func() bool { g.fill(&u, time.Now()); return u.Gpus > 0 }))
	if u.Gpus != 2 || u.GpuUtilizationRatio != 0.405 || u.GpuMemoryBytes != 2048<<20 {
		t.Fatalf("usage %+v, want GPUs 1 and 3: 2 at 40.5%% using 2 GiB", &u)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.Contains(string(args), "--query-gpu=index,uuid,utilization.gpu,memory.used") || !strings.Contains(string(args), "noheader") {
		t.Errorf("nvidia-smi asked %q", args)
	}
	// A sample older than a few periods is not sent.
	var late driverpb.Usage
	g.fill(&late, time.Now().Add(time.Hour))
	if late.Gpus != 0 {
		t.Errorf("a stale sample was sent: %+v", &late)
	}
}

func TestNoGPUsNoSampler(t *testing.T) {
	for _, env := range [][]string{nil, {"CUDA_VISIBLE_DEVICES="}, {"CUDA_VISIBLE_DEVICES=-1"}} {
		if g := newGPUSampler(env, time.Second, DefaultGPUSampleTimeout, slog.New(slog.DiscardHandler)); g != nil {
			t.Errorf("env %q: a sampler of %q", env, g.devices)
		}
	}
	var u driverpb.Usage
	(*gpuSampler)(nil).fill(&u, time.Now())
	if u.Gpus != 0 {
		t.Error("a nil sampler filled GPU use")
	}
}

// TestGPUSamplerWithoutNvidiaSMI: no nvidia-smi is one line, then quiet.
func TestGPUSamplerWithoutNvidiaSMI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	g, logs, stop := startSampler(t, "0", time.Second)
	stop() // Run returns at once without nvidia-smi; this only waits for it
	if n := strings.Count(logs.String(), "no nvidia-smi"); n != 1 {
		t.Fatalf("%d lines about the missing nvidia-smi, want 1:\n%s", n, logs.String())
	}
	var u driverpb.Usage
	g.fill(&u, time.Now())
	if u.Gpus != 0 {
		t.Errorf("usage %+v without nvidia-smi", &u)
	}
}

// TestGPUSamplerFailing: an nvidia-smi that keeps failing is named once
// (with what it said), however often it is tried.
func TestGPUSamplerFailing(t *testing.T) {
	dir := fakeSMI(t, "echo x >> \"$(dirname \"$0\")/runs\"\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2\nexit 9\n")
	g, logs, stop := startSampler(t, "0", 5*time.Second)
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("five runs of nvidia-smi", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return bytes.Count(b, []byte("x")) >= 5
	}))

	stop()
	if n := strings.Count(logs.String(), "GPU use not sampled"); n != 1 || !strings.Contains(logs.String(), "could not communicate") {
		t.Fatalf("%d lines about the failing nvidia-smi, want 1 quoting it:\n%s", n, logs.String())
	}
	var u driverpb.Usage
	g.fill(&u, time.Now())
	if u.Gpus != 0 {
		t.Errorf("usage %+v from a failing nvidia-smi", &u)
	}
}

// TestHungNvidiaSMIHoldsNoHeartbeat: while nvidia-smi hangs, heartbeats
// go on taking the process's usage (without GPU use); a run past its time
// is killed with its children, and the sampler stops when told to.
func TestHungNvidiaSMIHoldsNoHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"stopped while hung", time.Hour},
		{"killed after its time", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeSMI(t, "d=$(dirname \"$0\")\necho $$ >> \"$d/started\"\nsleep 3600\necho done > \"$d/finished\"\n")
			g, logs, stop := startSampler(t, "0", tc.timeout)
			obs := &observations{logger: slog.New(slog.DiscardHandler)}
			obs.setProcess(syscall.Getpgrp(), g)
			testutil.WaitFor(t, 20*time.Second, testutil.Holds("nvidia-smi to start", func() bool {
				_, err := os.Stat(filepath.Join(dir, "started"))
				return err == nil
			}))

			for i := 0; i < 3; i++ {
				var hb driverpb.HeartbeatRequest
				obs.take(&hb)
				if hb.GetUsage().GetMemoryBytes() <= 0 || hb.GetUsage().GetGpus() != 0 {
					t.Fatalf("heartbeat usage %+v while nvidia-smi hangs: want memory, no GPU use", hb.GetUsage())
				}
			}
			if tc.timeout < time.Minute {
				testutil.WaitFor(t, 20*time.Second, testutil.Holds("the hung nvidia-smi to be named", func() bool { return strings.Contains(logs.String(), "did not answer within") }))
				testutil.WaitFor(t, 20*time.Second, testutil.Holds("a second run after the first was killed", func() bool {
					b, _ := os.ReadFile(filepath.Join(dir, "started"))
					return bytes.Count(b, []byte("\n")) >= 2
				}))

			}
			stop()
			b, _ := os.ReadFile(filepath.Join(dir, "started"))
			for _, pid := range strings.Fields(string(b)) {
				testutil.WaitFor(t, 20*time.Second, testutil.Holds("nvidia-smi "+pid+" and its sleep to be killed", func() bool { return !groupAlive(pid) }))
			}
			if _, err := os.Stat(filepath.Join(dir, "finished")); err == nil {
				t.Error("nvidia-smi ran to its end")
			}
		})
	}
}

// groupAlive reports whether the process group led by pid has a process.
func groupAlive(pid string) bool {
	var n int
	for _, c := range pid {
		n = n*10 + int(c-'0')
	}
	return syscall.Kill(-n, 0) == nil
}
