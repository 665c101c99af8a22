package standalone

import (
	"errors"
	"strings"

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
