package executor

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
)

// feedHook builds the feed named in the task: a socket server for arrow
// and tensor, a JSON file for direct. It gives the process SPINDLE_FEED.
type feedHook struct {
	e       *Executor
	release func()
	server  *wire.Server
	// settle, when set, counts the rank's rows and agrees on the batches
	// per epoch with the other ranks (feed.Pipeline.Settle).
	settle func(context.Context) error
	// err is the feed's own failure, written by Run and read after the
	// run's goroutines are waited for.
	err error
}

// The parts of the life cycle feedHook takes part in.
var (
	_ taskHook   = (*feedHook)(nil)
	_ hookRunner = (*feedHook)(nil)
)

func (h *feedHook) Name() string { return "feed" }

func (h *feedHook) Prepare(_ context.Context, r *taskRun) error {
	f, err := h.e.prepareFeed(r.t, r.id, r.resolver, r.workDir, r.sockDir)
	if err != nil {
		return err
	}
	h.server, h.release, h.settle = f.server, f.release, f.settle
	if f.held != nil {
		// The membership hook is prepared after this one: look it up
		// when the driver's answer comes.
		f.held.follow = func(m *driverpb.Membership) error { return r.membership.update(m) }
	}
	r.feedPath, r.feed = f.path, f.server
	return nil
}

// Run serves the pushed feed. It fails only for the feed's own failures,
// decided before the training process can see its stream cut: kept even
// when the process's exit, which the cut causes, ends the run first.
// Where the ranks agree on their batches, this rank counts its rows at
// once, beside the process's start, so that no rank waits for this one's
// first epoch to begin.
func (h *feedHook) Run(ctx context.Context) error {
	if h.server == nil {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	// Agreeing ends with the feed: a process that ended without reading
	// it leaves nothing to agree for.
	sctx, stopSettle := context.WithCancel(gctx)
	defer stopSettle()
	if h.settle != nil {
		g.Go(func() error {
			if err := h.settle(sctx); err != nil && sctx.Err() == nil {
				return fmt.Errorf("feed: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		defer stopSettle()
		return h.server.Run(gctx)
	})
	if err := g.Wait(); err != nil {
		h.err = err
		return err
	}
	return nil
}

func (h *feedHook) Close() error {
	h.release()
	return nil
}

// preparedFeed is the feed a task names, built: the SPINDLE_FEED value,
// the pushed feed's server (nil for direct), a function that releases the
// feed once the training process is gone, and, where ranks agree on
// their batches, the agreement (feedHook.settle).
type preparedFeed struct {
	path    string
	server  *wire.Server
	release func()
	settle  func(context.Context) error
	// held is the feed's held epochs, when the task holds them.
	held *heldSource
}

// prepareFeed builds the feed named in t: its split spec and socket in
// sockDir, its spill under workDir.
func (e *Executor) prepareFeed(t *Task, id identity, res *fsys.Resolver, workDir, sockDir string) (*preparedFeed, error) {
	mode, err := wire.ParseMode(t.Feed.Mode)
	if err != nil {
		return nil, err
	}
	if mode == wire.ModeDirect {
		path := filepath.Join(sockDir, splitsFile)
		if err := writeFeedSpec(path, t.Feed, id, wire.WriteDirectSpec); err != nil {
			return nil, err
		}
		return &preparedFeed{path: path, release: func() {}}, nil
	}
	// The pushed feed's process learns its splits from the same spec
	// (SPINDLE_FEED_SPLITS), beside the socket.
	if err := writeFeedSpec(filepath.Join(sockDir, splitsFile), t.Feed, id, wire.WriteSplitsSpec); err != nil {
		return nil, err
	}
	return e.pushedFeed(t, id, mode, res, workDir, sockDir)
}

// splitsFile is the name of the rank's split spec in its socket directory.
const splitsFile = "splits.json"

// feedSplitsPath is SPINDLE_FEED_SPLITS for a rank fed at feedPath: the
// direct spec itself, or the spec written beside a pushed feed's socket.
func feedSplitsPath(feedPath, mode string) string {
	if mode == string(wire.ModeDirect) {
		return feedPath
	}
	return filepath.Join(filepath.Dir(feedPath), splitsFile)
}

// writeFeedSpec writes, with write, the spec a directly reading training
// process follows: this rank's share of the splits and the pipeline's
// epoch rules, so that direct and pushed feeding yield the same rows.
func writeFeedSpec(path string, f *FeedTask, id identity, write func(string, wire.DirectSpec) error) error {
	splits := driverpb.FeedSplits(f.Splits)
	// The feed is dealt among the workers: this rank's share is its rank
	// among them (its rank, in a job of workers only).
	feedRank, feedSize := id.feedRank()
	even, err := feed.ParseEvenMode(f.EvenBatches)
	if err != nil {
		return err
	}
	spec := wire.DirectSpec{
		Rank: feedRank, WorldSize: feedSize, Epochs: int(f.Epochs), BatchRows: int(f.BatchRows),
		Columns: f.Columns, LabelColumn: f.LabelColumn, Shuffle: f.Shuffle, Seed: f.Seed,
		EvenBatches: even, TargetBatches: f.TargetBatches, EpochRows: f.EpochRows, Splits: splits,
		StartEpoch: int(f.StartEpoch), StartBatch: f.StartBatch,
	}
	var rows int64
	for _, sp := range splits {
		rows += sp.Rows
	}
	spec.EpochRowLimit = max(feed.EpochRowLimit(rows, int(f.BatchRows), even, f.TargetBatches, f.EpochRows), 0)
	if f.Shuffle {
		spec.ShuffleBufferRows = cmp.Or(int(f.ShuffleBufferRows), feed.DefaultShuffleBufferRows)
	}
	for _, sp := range splits {
		if sp.Format == feed.FormatCSV {
			spec.CSV = &wire.DirectCSV{Header: f.GetCsv().GetHeader()}
			if d := f.GetCsv().GetDelimiter(); d != 0 {
				spec.CSV.Delimiter = string(rune(d))
			}
			break
		}
	}
	if err := write(path, spec); err != nil {
		return fmt.Errorf("write the feed's split spec: %w", err)
	}
	return nil
}

// pipelineConfig is the configuration of the rank's feed pipeline.
func (e *Executor) pipelineConfig(t *Task, id identity, mode wire.Mode, workDir string) (feed.PipelineConfig, error) {
	f := t.Feed
	rd, err := ipc.NewReader(bytes.NewReader(f.Schema))
	if err != nil {
		return feed.PipelineConfig{}, fmt.Errorf("decode the planned schema: %w", err)
	}
	schema := rd.Schema()
	rd.Release()
	even, err := feed.ParseEvenMode(f.EvenBatches)
	if err != nil {
		return feed.PipelineConfig{}, err
	}
	feedRank, _ := id.feedRank()
	return feed.PipelineConfig{
		Splits: driverpb.FeedSplits(f.Splits), Schema: schema, Columns: f.Columns, LabelColumn: f.LabelColumn,
		BatchRows: int(f.BatchRows), Shuffle: f.Shuffle, Seed: f.Seed, Rank: feedRank,
		ShuffleBufferRows: int(f.ShuffleBufferRows), Prefetch: int(f.PrefetchBatches), MemoryBudget: f.MemoryBudget,
		EvenBatches: even, TargetBatches: f.TargetBatches, EpochRows: f.EpochRows, CSV: f.GetCsv().ToFeed(), CacheBytes: f.CacheBytes,
		SpillDir: filepath.Join(workDir, "feed-spill"), SpillBytes: f.GetSpillBytes(),
		Flight: feed.FlightOptions{Token: f.GetFlightToken(), CAFile: f.GetFlightCaFile(), PushToken: feed.PushFeedToken(e.cfg.Secret, t.JobId),
			PushTLS: e.cfg.TLS},
		// The tensor feed sends float32: float64 features are narrowed as
		// they are decoded, not converted from memory as they are sent.
		Float32Features: mode == wire.ModeTensor,
		Agree:           agreeThroughDriver(f, e.client, e.cfg.ID),
	}, nil
}

// sharedRegion is the shared memory arrow batches are decoded straight
// into, and sent from without a copy; the read-ahead's budget bounds the
// space they take there too. Nil when the feed uses none or the system
// has none to give.
func (e *Executor) sharedRegion(f *FeedTask, mode wire.Mode) *wire.SharedRegion {
	if mode != wire.ModeArrow || f.GetNoSharedMemory() {
		return nil
	}
	region, err := wire.NewSharedRegion(f.MemoryBudget)
	if err != nil {
		e.logger.Warn("no shared memory to decode the feed into", "err", err)
		return nil
	}
	return region
}

// pushedFeed sets up the rank's pipeline and the socket server that
// pushes its batches to the training process.
func (e *Executor) pushedFeed(t *Task, id identity, mode wire.Mode, res *fsys.Resolver, workDir, sockDir string) (*preparedFeed, error) {
	f := t.Feed
	pcfg, err := e.pipelineConfig(t, id, mode, workDir)
	if err != nil {
		return nil, err
	}
	region := e.sharedRegion(f, mode)
	if region != nil {
		pcfg.BatchMemory = region
	}
	closeRegion := func() {
		if region != nil {
			if err := region.Close(); err != nil {
				e.logger.Warn("close the feed's shared memory", "err", err)
			}
		}
	}
	if n := int(f.GetTurnEpochs()); n > 0 {
		return e.turnFeed(t, id, mode, res, pcfg, n, sockDir, region, closeRegion)
	}
	pipe, err := feed.NewPipeline(res, pcfg)
	if err != nil {
		closeRegion()
		return nil, fmt.Errorf("set up the feed: %w", err)
	}
	var source wire.EpochSource = pipe
	if f.GetHasRest() {
		source = &restSource{Pipeline: pipe, res: res, cfg: pcfg, epoch: int(f.StartEpoch),
			segs: driverpb.FeedSegments(f.GetRest()), pad: f.GetRestBatches()}
	}
	var held *heldSource
	if f.GetHoldEpochs() {
		held = &heldSource{EpochSource: source, res: res, cfg: pcfg, end: driverEpochEnd(e.client, e.cfg.ID),
			forProcess: f.GetHoldForProcess()}
		source = held
	}
	path := filepath.Join(sockDir, "feed.sock")
	server, err := wire.NewServer(feedServerConfig(f, mode, path, source, region, e.feedLogger(id)))
	if err != nil {
		pipe.Close()
		closeRegion()
		return nil, err
	}
	pf := &preparedFeed{path: path, server: server, held: held, release: func() {
		server.Close()
		e.logFeedStats(pipe.Stats())
		if err := pipe.Close(); err != nil {
			e.logger.Warn("close the feed (its files on disk)", "err", err)
		}
		if held != nil {
			if err := held.Close(); err != nil {
				e.logger.Warn("close the feed on the smaller world's plan (its files on disk)", "err", err)
			}
		}
		closeRegion()
	}}
	if pcfg.Agree != nil {
		pf.settle = pipe.Settle
	}
	return pf, nil
}

// turnFeed is pushedFeed for a warm session's pushed input, one turn
// per turnEpochs epochs (turnSource).
func (e *Executor) turnFeed(t *Task, id identity, mode wire.Mode, res *fsys.Resolver, pcfg feed.PipelineConfig, turnEpochs int,
	sockDir string, region *wire.SharedRegion, closeRegion func()) (*preparedFeed, error) {
	log := e.feedLogger(id)
	source, err := newTurnSource(res, pcfg, turnEpochs, log)
	if err != nil {
		closeRegion()
		return nil, fmt.Errorf("set up the feed: %w", err)
	}
	path := filepath.Join(sockDir, "feed.sock")
	server, err := wire.NewServer(feedServerConfig(t.Feed, mode, path, source, region, log))
	if err != nil {
		source.Close()
		closeRegion()
		return nil, err
	}
	return &preparedFeed{path: path, server: server, release: func() {
		server.Close()
		e.logFeedStats(source.Stats())
		if err := source.Close(); err != nil {
			e.logger.Warn("close the feed (its files on disk)", "err", err)
		}
		closeRegion()
	}}, nil
}

// feedLogger is the logger of the rank's feed.
func (e *Executor) feedLogger(id identity) *slog.Logger {
	return e.cfg.Logger.With("executor", e.cfg.ID, "rank", id.rank)
}

// feedServerConfig is the configuration of the socket server that
// serves source's epochs to the training process at path.
func feedServerConfig(f *FeedTask, mode wire.Mode, path string, source wire.EpochSource, region *wire.SharedRegion, log *slog.Logger) wire.ServerConfig {
	return wire.ServerConfig{
		SocketPath: path, Mode: mode, Epochs: int(f.Epochs), Source: source, LabelColumn: f.LabelColumn,
		StartEpoch: int(f.StartEpoch), StartBatch: f.StartBatch, SharedMemory: !f.GetNoSharedMemory(), SharedRegion: region,
		Logger: log,
	}
}

func (e *Executor) logFeedStats(st feed.Stats) {
	e.logger.Debug("feed closed", "rows", st.Rows, "batches", st.Batches,
		"cached_splits", st.CachedSplits, "cached_bytes", st.CachedBytes,
		"spilled_splits", st.SpilledSplits, "spilled_bytes", st.SpilledBytes,
		"cache_hits", st.CacheHits, "cache_misses", st.CacheMisses)
}

// restSource serves one epoch, where an elastic job changed size, as the
// rest of the old ranks' epochs (segments), and the others from the rank's
// own pipeline.
type restSource struct {
	*feed.Pipeline
	res   *fsys.Resolver
	cfg   feed.PipelineConfig
	epoch int
	segs  []feed.Segment
	pad   int64
}

func (s *restSource) Epoch(ctx context.Context, epoch int) (feed.Reader, error) {
	if epoch == s.epoch {
		return feed.SegmentEpoch(ctx, s.res, s.cfg, s.segs, epoch, s.pad)
	}
	return s.Pipeline.Epoch(ctx, epoch)
}
