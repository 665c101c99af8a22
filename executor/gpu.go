package executor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/envcontract"
)

// How the executor samples the GPUs of its training process: nvidia-smi,
// run at most once a second (it averages utilisation over about that
// long itself, so sampling faster shows nothing new), each run bounded,
// in a goroutine of its own so that a slow or hung nvidia-smi never
// holds a heartbeat back: heartbeats carry the latest sample, and none
// once it is older than a few periods.
const (
	gpuSampleMin  = time.Second
	gpuStaleAfter = 3 // periods
	// nvidiaSMI is the program that reads NVIDIA GPUs' use, looked up on
	// the executor's PATH (it comes with the NVIDIA driver).
	nvidiaSMI = "nvidia-smi"
)

// gpuQuery asks nvidia-smi for one line per GPU: its index, UUID,
// utilisation (percent) and memory used (MiB).
var gpuQuery = []string{"--query-gpu=index,uuid,utilization.gpu,memory.used", "--format=csv,noheader,nounits"}

// gpuSample is the use of a process's GPUs at one moment.
type gpuSample struct {
	at       time.Time
	gpus     int
	util     float64 // mean, 0 to 1
	memBytes int64
}

// gpuSampler samples the GPUs a training process was given.
type gpuSampler struct {
	devices []string // as CUDA_VISIBLE_DEVICES names them: indices or UUIDs
	program string
	period  time.Duration
	timeout time.Duration
	logger  *slog.Logger

	mu   sync.Mutex
	last gpuSample
}

// newGPUSampler returns a sampler of the devices the training process's
// environment names in CUDA_VISIBLE_DEVICES, or nil when it names none
// (the process was given no GPUs, so there is nothing to show).
func newGPUSampler(env []string, heartbeat, timeout time.Duration, logger *slog.Logger) *gpuSampler {
	var devices []string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, envcontract.CUDAVisible+"="); ok {
			devices = visibleDevices(v)
		}
	}
	if len(devices) == 0 {
		return nil
	}
	return &gpuSampler{devices: devices, program: nvidiaSMI, period: max(heartbeat, gpuSampleMin),
		timeout: timeout, logger: logger}
}

// visibleDevices splits a CUDA_VISIBLE_DEVICES value. CUDA stops at the
// first entry it cannot use; so does this, leaving out "-1" and "NoDevFiles"
// (the ways to hide every device).
func visibleDevices(v string) []string {
	var out []string
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if d == "" || strings.HasPrefix(d, "-") || strings.EqualFold(d, "NoDevFiles") {
			break
		}
		out = append(out, d)
	}
	return out
}

// Run samples until ctx ends. Without nvidia-smi it says so once and
// stops; a failing nvidia-smi is named once, then only at debug level.
func (g *gpuSampler) Run(ctx context.Context) error {
	program, err := exec.LookPath(g.program)
	if err != nil {
		g.logger.Info("GPU use not shown: no nvidia-smi on the executor's PATH", "devices", strings.Join(g.devices, ","))
		return nil
	}
	t := time.NewTicker(g.period)
	defer t.Stop()
	failing := false
	for {
		s, err := g.sample(ctx, program)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !failing:
			g.logger.Info("GPU use not sampled; trying again each heartbeat", "err", err)
			failing = true
		case err != nil:
			g.logger.Debug("GPU use not sampled", "err", err)
		default:
			if failing {
				g.logger.Info("GPU use sampled again")
				failing = false
			}
			g.mu.Lock()
			g.last = s
			g.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sample runs nvidia-smi once, for at most g.timeout: a hung one is
// killed with every process it started.
func (g *gpuSampler) sample(ctx context.Context, program string) (gpuSample, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, gpuQuery...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that keeps the output open cannot hold Wait past this.
	cmd.WaitDelay = time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return gpuSample{}, fmt.Errorf("%s did not answer within %s", program, g.timeout)
	}
	if err != nil {
		return gpuSample{}, fmt.Errorf("run %s: %w: %s", program, err, truncate(strings.TrimSpace(stderr.String()), 200))
	}
	return parseGPUQuery(out, g.devices, time.Now())
}

// parseGPUQuery reads nvidia-smi's answer to gpuQuery and sums up the
// devices named in devices (indices or UUIDs). A device whose
// utilisation nvidia-smi cannot read ("[N/A]") counts for its memory
// only.
func parseGPUQuery(out []byte, devices []string, at time.Time) (gpuSample, error) {
	want := map[string]bool{}
	for _, d := range devices {
		want[d] = true
	}
	s := gpuSample{at: at}
	var utilSum float64
	utilN := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 4 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		index, uuid := f[0], f[1]
		if !want[index] && !want[uuid] {
			continue
		}
		s.gpus++
		if u, err := strconv.ParseFloat(f[2], 64); err == nil {
			utilSum += u / 100
			utilN++
		}
		if mib, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			s.memBytes += mib << 20
		}
	}
	if s.gpus == 0 {
		return gpuSample{}, fmt.Errorf("nvidia-smi lists none of the devices %s", strings.Join(devices, ","))
	}
	if utilN > 0 {
		s.util = utilSum / float64(utilN)
	}
	return s, nil
}

// fill puts the latest sample into u, unless it is stale: a heartbeat
// never shows GPU use older than a few periods.
func (g *gpuSampler) fill(u *driverpb.Usage, now time.Time) {
	if g == nil || u == nil {
		return
	}
	g.mu.Lock()
	s := g.last
	g.mu.Unlock()
	if s.gpus == 0 || now.Sub(s.at) > gpuStaleAfter*g.period {
		return
	}
	u.Gpus, u.GpuUtilizationRatio, u.GpuMemoryBytes = int32(s.gpus), s.util, s.memBytes
}
