package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// EnvReportSocket names the executor's socket for reports.
const EnvReportSocket = envcontract.ReportSocket

// ErrReportDropped means the executor could not take a report at once.
var ErrReportDropped = errors.New("task: report dropped")

var reporter struct {
	mu   sync.Mutex
	path string
	conn *net.UnixConn
}

// Report sends named values at a training step to the job's web UI,
// event log and metrics (they arrive with the executor's next heartbeat),
// as spindle.report does in Python. It never waits: a report the executor
// cannot take at once is dropped (ErrReportDropped). Outside Spindle it
// does nothing and returns ErrNotSpindle. NaN and infinite values are
// left out.
func Report(step int64, values map[string]float64) error {
	path := os.Getenv(EnvReportSocket)
	if path == "" {
		return ErrNotSpindle
	}
	clean := make(map[string]float64, len(values))
	for k, v := range values {
		if k != "" && !math.IsNaN(v) && !math.IsInf(v, 0) {
			clean[k] = v
		}
	}
	if len(clean) == 0 {
		return nil
	}
	msg, err := json.Marshal(struct {
		Step   int64              `json:"step"`
		Values map[string]float64 `json:"values"`
		Time   float64            `json:"time"`
	}{step, clean, float64(time.Now().UnixMilli()) / 1000})
	if err != nil {
		return fmt.Errorf("task: report: %w", err)
	}
	return send(path, msg)
}

// ReportModel tells the job that this process published version of model
// name into the model store, at uri (its directory): the job's web UI and
// event log list it. Outside a job it returns ErrNotSpindle.
func ReportModel(name string, version int, uri string) error {
	path := os.Getenv(EnvReportSocket)
	if path == "" {
		return ErrNotSpindle
	}
	type model struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
		URI     string `json:"uri"`
	}
	msg, err := json.Marshal(struct {
		Model model `json:"model"`
	}{model{name, version, uri}})
	if err != nil {
		return fmt.Errorf("task: report model: %w", err)
	}
	return send(path, msg)
}

// send writes one datagram to the report socket at path.
func send(path string, msg []byte) error {
	reporter.mu.Lock()
	defer reporter.mu.Unlock()
	if reporter.conn == nil || reporter.path != path {
		conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			return fmt.Errorf("task: report to %s: %w", path, err)
		}
		reporter.conn, reporter.path = conn, path
	}
	// Write once, without waiting for room in the executor's queue.
	raw, err := reporter.conn.SyscallConn()
	if err != nil {
		return fmt.Errorf("task: report to %s: %w", path, err)
	}
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		_, werr = syscall.Write(int(fd), msg)
		return true
	}); err != nil {
		return fmt.Errorf("task: report to %s: %w", path, err)
	}
	switch {
	case errors.Is(werr, syscall.EAGAIN):
		return ErrReportDropped
	case werr != nil:
		return fmt.Errorf("task: report to %s: %w", path, werr)
	}
	return nil
}
