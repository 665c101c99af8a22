package executor

import (
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/rdma"
)

// discoverRDMA finds this host's RDMA devices and selects the rank's
// ports by the job's spindle.rdma settings. base is the executor's
// environment: variables set there or in the task's --env are the user's,
// and the hints leave them alone. The error of a required mode without a
// device wraps rdma.ErrNoDevice; the plan is filled in either way.
func discoverRDMA(t *Task, base []string) (rdma.Plan, error) {
	mode, err := rdma.ParseMode(t.GetRdmaMode())
	if err != nil {
		return rdma.Plan{}, err
	}
	user := make(map[string]bool, len(base)+len(t.GetEnv()))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		user[k] = true
	}
	for k := range t.GetEnv() {
		user[k] = true
	}
	return rdma.Discover(rdma.Config{Mode: mode, Devices: t.GetRdmaDevices()}, func(k string) bool { return user[k] })
}

// withRDMAHints returns env with the hints set, replacing Spindle's own
// choices (the socket interfaces picked from the published address); the
// hints already leave out what the user set.
func withRDMAHints(env []string, hints map[string]string) []string {
	if len(hints) == 0 {
		return env
	}
	out := make([]string, 0, len(env)+len(hints))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := hints[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range hints {
		out = append(out, k+"="+v)
	}
	return out
}

// setupError is a failure found before the training process started that
// is the job's configuration's fault; the driver fails the job as bad
// input (exit status 2).
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// rdmaLine returns the RDMA report for heartbeats, "" before discovery.
func (e *Executor) rdmaLine() string {
	s, _ := e.rdmaReport.Load().(string)
	return s
}

// rdmaReport is the line the driver logs for this rank.
func rdmaReport(id identity, p rdma.Plan) string {
	return fmt.Sprintf("rank %d on %s: %s", id.rank, id.host, p.Summary)
}
