package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ReportWorldBatches tells the job how far the world was in its epoch when
// it lost a rank and went on without it in place: epoch, counting from 0,
// and the batches of it the world completed (after CatchUp, every
// survivor agrees on them; the step whose collective failed is not
// counted). Call it after Rejoin formed the smaller world and CatchUp
// settled the step, before reading the next batch. The driver deals the
// lost rank's rows from that batch on among the survivors' feeds, so
// that they are trained once in the same epoch (docs/reliability.md,
// "Going on in place"); a job without input needs no report.
//
// Any survivor's report is enough; each may send it. It waits while the
// executor cannot take it at once, until ctx ends. Outside Spindle it
// returns ErrNotSpindle; without a membership, ErrNoMembership.
func (e Env) ReportWorldBatches(ctx context.Context, epoch int, batches int64) error {
	path := os.Getenv(EnvReportSocket)
	if path == "" {
		return ErrNotSpindle
	}
	m, err := e.Membership()
	if err != nil {
		return err
	}
	if epoch < 0 || batches < 0 {
		return fmt.Errorf("task: report world batches: epoch %d, batches %d: neither may be negative", epoch, batches)
	}
	msg, err := json.Marshal(map[string]worldBatches{"world_batches": {Version: m.Version, Epoch: epoch, Batches: batches}})
	if err != nil {
		return fmt.Errorf("task: report world batches: %w", err)
	}
	for {
		err := send(path, msg)
		if !errors.Is(err, ErrReportDropped) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("task: report world batches (membership version %d): %w", m.Version, ctx.Err())
		case <-time.After(membershipPoll):
		}
	}
}

// worldBatches is the report's body, as the executor reads it.
type worldBatches struct {
	Version int64 `json:"version"`
	Epoch   int   `json:"epoch"`
	Batches int64 `json:"batches"`
}
