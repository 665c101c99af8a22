package executor

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
)

// turnSource serves a warm session's pushed input, one turn (one job of
// the session) per turnEpochs epochs: the turn's first epoch reads its
// stream from the push endpoint, its later ones come from the cache or
// spill of a pipeline of the turn's own, which is closed (its memory
// and files freed) when the next turn begins.
type turnSource struct {
	res        *fsys.Resolver
	cfg        feed.PipelineConfig // the planned one: the turn's tickets and spill are set per turn
	turnEpochs int
	schema     *arrow.Schema
	log        *slog.Logger

	mu   sync.Mutex
	turn int
	pipe *feed.Pipeline
}

var _ wire.EpochSource = (*turnSource)(nil)

// newTurnSource checks cfg by building turn 1's pipeline, which it keeps.
func newTurnSource(res *fsys.Resolver, cfg feed.PipelineConfig, turnEpochs int, log *slog.Logger) (*turnSource, error) {
	s := &turnSource{res: res, cfg: cfg, turnEpochs: turnEpochs, log: log}
	pipe, err := s.pipeline(1)
	if err != nil {
		return nil, err
	}
	s.turn, s.pipe, s.schema = 1, pipe, pipe.Schema()
	return s, nil
}

// pipeline builds turn n's pipeline.
func (s *turnSource) pipeline(n int) (*feed.Pipeline, error) {
	cfg := s.cfg
	cfg.Splits = make([]feed.Split, len(s.cfg.Splits))
	for i, sp := range s.cfg.Splits {
		sp.Ticket = feed.PushTurnTicket(sp.Ticket, n)
		cfg.Splits[i] = sp
	}
	if cfg.SpillDir != "" {
		cfg.SpillDir = filepath.Join(cfg.SpillDir, "turn-"+strconv.Itoa(n))
	}
	return feed.NewPipeline(s.res, cfg)
}

// Schema is every turn's schema, the planned one.
func (s *turnSource) Schema() *arrow.Schema { return s.schema }

// Epoch opens epoch epoch, of turn epoch/turnEpochs+1, first closing
// the pipeline of the turn before when it is a new turn's.
func (s *turnSource) Epoch(ctx context.Context, epoch int) (feed.Reader, error) {
	n := epoch/s.turnEpochs + 1
	s.mu.Lock()
	defer s.mu.Unlock()
	if n != s.turn {
		if s.pipe != nil {
			s.closePipe()
		}
		pipe, err := s.pipeline(n)
		if err != nil {
			return nil, fmt.Errorf("set up the feed of turn %d: %w", n, err)
		}
		s.turn, s.pipe = n, pipe
	}
	return s.pipe.Epoch(ctx, epoch)
}

// closePipe closes the current turn's pipeline. s.mu is held.
func (s *turnSource) closePipe() {
	st := s.pipe.Stats()
	s.log.Debug("feed of a turn closed", "turn", s.turn, "rows", st.Rows, "batches", st.Batches,
		"cache_hits", st.CacheHits, "spilled_bytes", st.SpilledBytes)
	if err := s.pipe.Close(); err != nil {
		s.log.Warn("close the feed of a turn (its files on disk)", "turn", s.turn, "err", err)
	}
	s.pipe = nil
}

// Stats are the current turn's pipeline's.
func (s *turnSource) Stats() feed.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pipe == nil {
		return feed.Stats{}
	}
	return s.pipe.Stats()
}

// Close closes the current turn's pipeline.
func (s *turnSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pipe != nil {
		err := s.pipe.Close()
		s.pipe = nil
		return err
	}
	return nil
}
