package standalone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// maxOutcomeMessage bounds the reason the masters keep for an ended job.
const maxOutcomeMessage = 1000

// SetResult records how the job ended, for the masters (spindle status)
// when the application is finished at Close.
func (c *ClusterManager) SetResult(err error) {
	c.resultMu.Lock()
	defer c.resultMu.Unlock()
	c.result, c.resultSet = err, true
}

// outcome is the final status and message Close reports.
func (c *ClusterManager) outcome() (pb.FinalStatus, string) {
	c.resultMu.Lock()
	defer c.resultMu.Unlock()
	err := c.result
	switch {
	case !c.resultSet:
		return pb.FinalStatus_FINAL_STATUS_UNDEFINED, "finished by the driver"
	case err == nil:
		return pb.FinalStatus_FINAL_STATUS_SUCCEEDED, "the job succeeded"
	case errors.Is(err, driver.ErrInterrupted):
		return pb.FinalStatus_FINAL_STATUS_KILLED, "interrupted at the submit (Ctrl-C)"
	}
	// The first line: the rest quotes the failed rank's stderr.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > maxOutcomeMessage {
		msg = msg[:maxOutcomeMessage] + "..."
	}
	return pb.FinalStatus_FINAL_STATUS_FAILED, msg
}

// waitingCheck is how long a request may wait before the driver looks
// whether it waits for room, and how often it looks again.
const waitingCheck = 2 * time.Second

// sayWaiting prints, once, that the application's executors wait for room
// on the workers, what they need and what is free, while ctx lasts.
func (c *ClusterManager) sayWaiting(ctx context.Context) {
	t := time.NewTicker(waitingCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := c.client.Status(ctx)
		if err != nil {
			continue
		}
		for _, a := range st.Cluster.GetApps() {
			if a.GetId() != c.appID || !a.GetWaiting() {
				continue
			}
			var free []string
			for _, w := range st.Cluster.GetWorkers() {
				if w.GetAlive() {
					free = append(free, fmt.Sprintf("%s %d cores/%d MiB/%d GPUs", w.GetId(),
						w.GetCores()-w.GetUsedCores(), w.GetMemoryMb()-w.GetUsedMemoryMb(), w.GetGpus()-w.GetUsedGpus()))
				}
			}
			msg := fmt.Sprintf("%s: waiting for room: need %s; free: %s (spindle.standalone.gangTimeout bounds the wait)",
				c.appID, a.GetNeed(), strings.Join(free, ", "))
			c.logger.Info("waiting for room", "app", c.appID, "need", a.GetNeed())
			if c.cfg.Console != nil {
				c.cfg.Console.Eprintln(msg)
			}
			return
		}
	}
}
