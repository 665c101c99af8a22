package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// What the executor tells the driver about its training process besides
// progress: the values the process reports (spindle.report), its output
// when that does not reach the submit terminal otherwise, and the CPU,
// memory and GPUs it uses (gpu.go). All of it rides on heartbeats, so it is authenticated
// like them and costs no connection of its own.

// reportSocket is where the process sends reports, in the task's socket
// directory (as the checkpoint socket is).
func reportSocket(sockDir string) string {
	return filepath.Join(sockDir, "report.sock")
}

// Bounds on what waits for the next heartbeat. Past them the oldest
// reports and the newest output lines are dropped (and counted): a
// process is never slowed by what it reports or prints.
const (
	maxPendingReports     = 1024
	maxPendingSpans       = 100000
	maxPendingOutputLines = 4096
	maxPendingOutputBytes = 1 << 20
	maxReportBytes        = 64 << 10
)

// observations collects what a heartbeat carries besides progress.
type observations struct {
	mu             sync.Mutex
	reports        []*driverpb.Report
	reportsDropped int64
	output         []*driverpb.OutputLine
	outputBytes    int
	outputDropped  int64
	spans          []*driverpb.Span
	models         []*driverpb.ModelSaved
	// world is the process's newest report of how far its world was in
	// the epoch when it shrank in place; every heartbeat repeats it, so
	// that a lost heartbeat loses nothing.
	world *driverpb.WorldBatches

	pgid   int         // the training process group, once started
	gpu    *gpuSampler // nil when the process was given no GPUs
	usage  usageCache  // the group's CPU and memory, read at most every usageEvery
	sock   *net.UnixConn
	logger *slog.Logger
}

// newObservations listens for reports at sockPath.
func newObservations(sockPath string, logger *slog.Logger) (*observations, error) {
	_ = os.Remove(sockPath)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("listen for reports on %s: %w", sockPath, err)
	}
	return &observations{sock: conn, logger: logger}, nil
}

// Run receives reports until ctx ends, then takes what the process sent
// just before it ended (its last spans and reports) from the socket.
func (o *observations) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = o.sock.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, maxReportBytes)
	for {
		n, err := o.sock.Read(buf)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				// Reports are not worth stopping training for.
				o.logger.Warn("no more reports from the training process", "err", err)
			}
			o.drain(buf)
			return nil
		}
		o.take1(buf[:n])
	}
}

// take1 takes one datagram: the world's batches, a saved model, spans
// or a report, decoded once.
func (o *observations) take1(b []byte) {
	d, err := decodeDatagram(b)
	if err != nil {
		o.logger.Debug("report refused", "err", err)
		return
	}
	if w, ok := d.worldBatches(); ok {
		o.mu.Lock()
		if o.world == nil || w.GetMembershipVersion() >= o.world.GetMembershipVersion() {
			o.world = w
		}
		o.mu.Unlock()
		return
	}
	if m, ok := d.modelSaved(); ok {
		o.mu.Lock()
		if len(o.models) < maxPendingReports {
			o.models = append(o.models, m)
		}
		o.mu.Unlock()
		return
	}
	if spans, ok := d.spans(); ok {
		o.addSpans(spans)
		return
	}
	r, err := d.report()
	if err != nil {
		o.logger.Debug("report refused", "err", err)
		return
	}
	o.addReport(r)
}

// drain takes the datagrams still queued on the socket, without waiting.
func (o *observations) drain(buf []byte) {
	// The deadline that ended Run would refuse these reads.
	_ = o.sock.SetReadDeadline(time.Time{})
	raw, err := o.sock.SyscallConn()
	if err != nil {
		return
	}
	for {
		var n int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
			return true
		}); err != nil || rerr != nil || n <= 0 {
			return
		}
		o.take1(buf[:n])
	}
}

// Close stops receiving reports and removes the socket.
func (o *observations) Close() {
	_ = o.sock.Close()
	_ = os.Remove(o.sock.LocalAddr().String())
}

// datagram is everything a training process sends on the report socket;
// which fields are set says what it is:
//
//	{"world_batches": {"version": V, "epoch": E, "batches": K}}  task.Env.ReportWorldBatches
//	{"model": {"name": ..., "version": N, "uri": ...}}           spindle model publish
//	{"spans": [{"name": ..., "cat": ..., "ts": US, "dur": US}]}  package timeline
//	{"step": N, "values": {"loss": 0.3}, "time": SECONDS}        spindle.report
type datagram struct {
	raw   []byte
	World *struct {
		Version int64 `json:"version"`
		Epoch   int32 `json:"epoch"`
		Batches int64 `json:"batches"`
	} `json:"world_batches"`
	Model *struct {
		Name    string `json:"name"`
		Version int64  `json:"version"`
		URI     string `json:"uri"`
	} `json:"model"`
	Spans []struct {
		Name string `json:"name"`
		Cat  string `json:"cat"`
		TS   int64  `json:"ts"`
		Dur  int64  `json:"dur"`
	} `json:"spans"`
	Step   int64              `json:"step"`
	Values map[string]float64 `json:"values"`
	Time   float64            `json:"time"`
}

// decodeDatagram decodes one datagram.
func decodeDatagram(b []byte) (*datagram, error) {
	d := &datagram{raw: b}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("report %q: %w", truncate(string(b), 80), err)
	}
	return d, nil
}

// worldBatches is how far the world was in its epoch when it shrank.
func (d *datagram) worldBatches() (*driverpb.WorldBatches, bool) {
	w := d.World
	if w == nil || w.Epoch < 0 || w.Batches < 0 {
		return nil, false
	}
	return &driverpb.WorldBatches{MembershipVersion: w.Version, Epoch: w.Epoch, Batches: w.Batches}, true
}

// modelSaved says a model was published.
func (d *datagram) modelSaved() (*driverpb.ModelSaved, bool) {
	m := d.Model
	if m == nil || m.Name == "" || m.Version < 1 {
		return nil, false
	}
	return &driverpb.ModelSaved{Name: truncate(m.Name, 200), Version: m.Version, Uri: truncate(m.URI, 2000),
		UnixMillis: time.Now().UnixMilli()}, true
}

// spans are timeline spans; malformed ones are left out.
func (d *datagram) spans() ([]*driverpb.Span, bool) {
	if d.Spans == nil {
		return nil, false
	}
	out := make([]*driverpb.Span, 0, len(d.Spans))
	for _, s := range d.Spans {
		if s.Name == "" || s.TS <= 0 || s.Dur < 0 {
			continue
		}
		out = append(out, &driverpb.Span{Name: truncate(s.Name, 200), Cat: truncate(s.Cat, 40), StartMicros: s.TS, DurationMicros: s.Dur})
	}
	return out, true
}

// report is a training process's values at a step; values that are not
// finite numbers are left out, and a report with none is refused.
func (d *datagram) report() (*driverpb.Report, error) {
	values := d.Values
	for k, v := range values {
		if k == "" || math.IsNaN(v) || math.IsInf(v, 0) {
			delete(values, k)
		}
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("report %q: no values", truncate(string(d.raw), 80))
	}
	at := time.Now()
	if d.Time > 0 {
		at = time.UnixMilli(int64(d.Time * 1000))
	}
	return &driverpb.Report{Step: d.Step, Values: values, UnixMillis: at.UnixMilli()}, nil
}

// addSpans keeps spans for the driver, up to a bound past which new ones
// are dropped.
func (o *observations) addSpans(spans []*driverpb.Span) {
	o.mu.Lock()
	defer o.mu.Unlock()
	room := maxPendingSpans - len(o.spans)
	if room <= 0 {
		return
	}
	o.spans = append(o.spans, spans[:min(room, len(spans))]...)
}

func (o *observations) addReport(r *driverpb.Report) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.reports) >= maxPendingReports {
		o.reports = o.reports[1:]
		o.reportsDropped++
	}
	o.reports = append(o.reports, r)
}

// addOutput keeps a line for the driver, or counts it as dropped.
func (o *observations) addOutput(line string, stderr bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.output) >= maxPendingOutputLines || o.outputBytes+len(line) > maxPendingOutputBytes {
		o.outputDropped++
		return
	}
	o.output = append(o.output, &driverpb.OutputLine{Stderr: stderr, Text: line})
	o.outputBytes += len(line)
}

// setProcess names the process group whose usage is reported, and the
// sampler of its GPUs (nil without GPUs).
func (o *observations) setProcess(pgid int, gpu *gpuSampler) {
	o.mu.Lock()
	o.pgid, o.gpu = pgid, gpu
	o.mu.Unlock()
}

// take empties what waits into a heartbeat.
func (o *observations) take(hb *driverpb.HeartbeatRequest) {
	if o == nil {
		return
	}
	o.mu.Lock()
	hb.Reports, o.reports = o.reports, nil
	hb.Output, o.output, o.outputBytes = o.output, nil, 0
	hb.OutputDropped, o.outputDropped = o.outputDropped, 0
	hb.Spans, o.spans = o.spans, nil
	hb.Models, o.models = o.models, nil
	hb.WorldBatches = o.world
	pgid, gpu := o.pgid, o.gpu
	o.mu.Unlock()
	if pgid > 0 {
		if u := o.usage.get(pgid); u != nil {
			gpu.fill(u, time.Now())
			hb.Usage = u
		}
	}
}

// takeExit empties what waits into the exit report.
func (o *observations) takeExit(r *driverpb.ExitReport, usage *driverpb.Usage) {
	if o == nil {
		return
	}
	var hb driverpb.HeartbeatRequest
	o.take(&hb)
	r.Reports, r.Output, r.OutputDropped, r.Spans, r.Models = hb.Reports, hb.Output, hb.OutputDropped, hb.Spans, hb.Models
	r.Usage = usage
}

// lineTee writes each line to w and keeps it for the driver. The process
// output copier writes one whole line per Write.
type lineTee struct {
	w      io.Writer
	obs    *observations
	stderr bool
}

func (t lineTee) Write(p []byte) (int, error) {
	t.obs.addOutput(string(bytes.TrimRight(p, "\n")), t.stderr)
	return t.w.Write(p)
}

// groupUsage sums the CPU time and resident memory of every process in
// process group pgid, from a proc file system at root. CPU time includes
// children the group's processes have already waited for.
func groupUsage(root string, pgid int) (*driverpb.Usage, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	page := int64(os.Getpagesize())
	u := &driverpb.Usage{}
	found := false
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		st, ok := parseStat(string(b))
		if !ok || st.pgrp != pgid {
			continue
		}
		found = true
		u.CpuSeconds += float64(st.utime+st.stime+st.cutime+st.cstime) / ticksPerSecond
		u.MemoryBytes += st.rssPages * page
	}
	if !found {
		return nil, fmt.Errorf("no process in group %d", pgid)
	}
	return u, nil
}

// procStat is what groupUsage reads of /proc/PID/stat.
type procStat struct {
	pgrp                         int
	utime, stime, cutime, cstime int64
	rssPages                     int64
}

// parseStat reads a /proc/PID/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted from its last ')'.
func parseStat(s string) (procStat, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(n int) int64 { v, _ := strconv.ParseInt(f[n-3], 10, 64); return v }
	return procStat{
		pgrp: int(num(5)), utime: num(14), stime: num(15), cutime: num(16), cstime: num(17),
		rssPages: num(24),
	}, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// usageOf is an ended process's CPU time (with the children it waited
// for) and peak resident memory.
func usageOf(ps *os.ProcessState) *driverpb.Usage {
	if ps == nil {
		return nil
	}
	u := &driverpb.Usage{CpuSeconds: (ps.UserTime() + ps.SystemTime()).Seconds()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.MemoryBytes = ru.Maxrss * 1024 // kilobytes on Linux
	}
	return u
}
