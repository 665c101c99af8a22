package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/spindle-ml/spindle/fsys"
)

// DefaultDecodeWorkers is the decode parallelism of a prefetching
// pipeline when none is configured: decoding then overlaps itself as well
// as the consumer, on one core more at most.
const DefaultDecodeWorkers = 2

// DefaultShuffleBufferRows is the shuffle buffer used when shuffling and
// none is configured.
const DefaultShuffleBufferRows = 65536

// PipelineConfig configures a rank's Pipeline.
type PipelineConfig struct {
	// Splits are the rank's splits (JobPlan.Ranks[rank]), in planned order.
	Splits []Split
	// Schema is the planned schema (JobPlan.Schema); every batch has it.
	Schema *arrow.Schema
	// Columns and LabelColumn select the columns as in ReadOptions.
	Columns     []string
	LabelColumn string
	// BatchRows is the rows in every batch (the last of an epoch may be
	// short when EvenBatches is EvenOff).
	BatchRows int
	// Shuffle permutes the order of the splits every epoch and mixes rows
	// through a shuffle buffer, deterministically for (Seed, epoch, Rank).
	Shuffle bool
	Seed    int64
	Rank    int
	// ShuffleBufferRows is how many rows are shuffled together; the
	// pipeline holds about three times this many rows while it shuffles.
	// Zero means DefaultShuffleBufferRows; 1 shuffles split order only.
	ShuffleBufferRows int
	// Prefetch is how many finished batches a goroutine prepares ahead of
	// the consumer; zero reads on the consumer's goroutine.
	Prefetch int
	// MemoryBudget bounds the bytes of the batches prepared ahead (one
	// batch always fits); zero means only Prefetch bounds them. Decoding
	// a Parquet split holds up to two of its read batches more, decoded
	// ahead (groupDecoder).
	MemoryBudget int64
	// EvenBatches makes every rank yield TargetBatches full batches per
	// epoch: EvenPad repeats the rank's own rows (from the start of the
	// epoch's order) to fill up, EvenDrop stops early; the empty value
	// means EvenPad.
	EvenBatches EvenMode
	// TargetBatches is the batches per epoch under EvenPad or EvenDrop
	// (EvenTarget over the plan's RowsPerRank). Zero derives it from this
	// rank's own rows, which only keeps ranks in step when they hold the
	// same number of batches.
	TargetBatches int64
	// EpochRows is, under EvenPad, the rows this rank yields per epoch
	// (EvenRows over the plan's RowsPerRank), so padding equalises batch
	// counts without filling the last batch. Zero means TargetBatches
	// full batches when a target is given, else this rank's own rows.
	EpochRows int64
	// Agree, when set under EvenPad or EvenDrop, replaces TargetBatches
	// and EpochRows for splits whose rows are unknown (a flight's
	// endpoints dealt unread): before the first epoch the pipeline reads
	// its splits once, into the cache, to count them, and learns every
	// rank's rows through Agree (Settle).
	Agree RowAgreement
	// CSV describes CSV inputs.
	CSV CSVOptions
	// Flight says how to reach the Arrow Flight services of Flight splits.
	Flight FlightOptions
	// Allocator allocates batches; nil means memory.DefaultAllocator.
	// The pipeline keeps the buffers it frees (and those of the batches
	// the consumer releases) for reuse, and gives them back to Allocator
	// when it is closed.
	Allocator memory.Allocator
	// DecodeWorkers is how many goroutines decode a Parquet split at
	// once, sharing each batch's columns, when Prefetch is set (without
	// it, reading stays on the consumer's goroutine). Zero means
	// DefaultDecodeWorkers. The batches are the same whatever it is.
	DecodeWorkers int
	// BufferPoolBytes bounds the freed buffers kept for reuse. Zero means
	// 64 MiB, or MemoryBudget when that is smaller; negative keeps none.
	BufferPoolBytes int64
	// CacheBytes bounds the decoded batches kept from one epoch to the
	// next: splits that fit are read and decoded once, in the first epoch
	// that reads them whole, and served from memory afterwards; the others
	// are read every epoch. Zero keeps none. The batches are the same
	// either way.
	CacheBytes int64
	// SpillDir and SpillBytes keep on local disk, as Arrow IPC files in
	// SpillDir, up to SpillBytes of the batches of Flight splits that do
	// not fit in CacheBytes: a pulled flight is costly to fetch again, and
	// pushed rows cannot be fetched again at all, so later epochs read
	// them from there. The files are removed when the pipeline closes.
	// Zero SpillBytes, or no SpillDir, keeps none.
	SpillDir   string
	SpillBytes int64
	// Float32Features reads float64 columns other than the label as
	// float32 (ReadOptions.Float32Features), for the tensor feed: the
	// batches' schema (Schema) then has float32 for them.
	Float32Features bool
	// BatchMemory, when set, holds the buffers of the batches the
	// pipeline yields while it has room (the feed's shared memory, so
	// that they reach the training process without a copy), except the
	// splits the epoch cache records: it keeps those batches themselves.
	BatchMemory BatchMemory
}

// Validate reports the first problem with the configuration.
func (c PipelineConfig) Validate() error {
	switch {
	case c.BatchRows < 1:
		return fmt.Errorf("feed pipeline: batch rows %d: need at least 1", c.BatchRows)
	case c.ShuffleBufferRows < 0:
		return fmt.Errorf("feed pipeline: shuffle buffer rows %d: must not be negative", c.ShuffleBufferRows)
	case c.Prefetch < 0:
		return fmt.Errorf("feed pipeline: prefetch %d: must not be negative", c.Prefetch)
	case c.DecodeWorkers < 0:
		return fmt.Errorf("feed pipeline: decode workers %d: must not be negative", c.DecodeWorkers)
	case c.MemoryBudget < 0:
		return fmt.Errorf("feed pipeline: memory budget %d: must not be negative", c.MemoryBudget)
	case c.CacheBytes < 0:
		return fmt.Errorf("feed pipeline: cache bytes %d: must not be negative", c.CacheBytes)
	case c.SpillBytes < 0:
		return fmt.Errorf("feed pipeline: spill bytes %d: must not be negative", c.SpillBytes)
	case c.EpochRows < 0:
		return fmt.Errorf("feed pipeline: epoch rows %d: must not be negative", c.EpochRows)
	case c.TargetBatches < 0:
		return fmt.Errorf("feed pipeline: target batches %d: must not be negative", c.TargetBatches)
	case c.Rank < 0:
		return fmt.Errorf("feed pipeline: rank %d: must not be negative", c.Rank)
	case c.Schema == nil:
		return errors.New("feed pipeline: no schema (pass the plan's schema)")
	}
	if _, err := ParseEvenMode(string(c.EvenBatches)); err != nil {
		return fmt.Errorf("feed pipeline: %w", err)
	}
	if _, err := c.CSV.Normalize(); err != nil {
		return fmt.Errorf("feed pipeline: %w", err)
	}
	for i, s := range c.Splits {
		if s.URI == "" {
			return fmt.Errorf("feed pipeline: split %d has no uri", i)
		}
		if s.Rows <= 0 && c.EvenBatches != EvenOff && c.TargetBatches == 0 && c.Agree == nil {
			return fmt.Errorf("feed pipeline: split %d (%s) has no row count, which even batches need without a target", i, s.URI)
		}
	}
	return nil
}

// Pipeline feeds one rank's splits, one epoch at a time. It is safe for
// concurrent use; epochs are independent readers.
type Pipeline struct {
	res    *fsys.Resolver
	cfg    PipelineConfig
	schema *arrow.Schema
	rows   int64 // the rank's rows, from the splits
	limit  int64 // rows per epoch under even batches, or -1 (EpochRowLimit)
	// agree settles rows and limit before the first epoch; nil when they
	// are known from the start (PipelineConfig.Agree).
	agree *agreement

	pool          *bufferPool // nil when buffers are not reused
	footers       *footerCache
	cache         *splitCache // nil without a cache
	alloc         memory.Allocator
	batchAlloc    memory.Allocator // of the batches yielded (BatchMemory)
	decodeWorkers int

	rowsOut    atomic.Int64
	batchesOut atomic.Int64

	mu     sync.Mutex
	open   map[*epochReader]struct{}
	closed bool
}

// Stats counts what a pipeline has handed out over all its epochs, and
// what its cache holds.
type Stats struct {
	Rows    int64
	Batches int64
	// CachedSplits and CachedBytes are what the cache holds now in
	// memory, SpilledSplits and SpilledBytes on disk; CacheHits counts
	// the splits it served and CacheMisses those read from their sources
	// while it was on.
	CachedSplits  int
	CachedBytes   int64
	SpilledSplits int
	SpilledBytes  int64
	CacheHits     int64
	CacheMisses   int64
}

// NewPipeline checks cfg and returns a pipeline reading through res.
func NewPipeline(res *fsys.Resolver, cfg PipelineConfig) (*Pipeline, error) {
	if cfg.EvenBatches == "" {
		cfg.EvenBatches = EvenPad
	}
	mode, err := ParseEvenMode(string(cfg.EvenBatches))
	if err != nil {
		return nil, fmt.Errorf("feed pipeline: %w", err)
	}
	cfg.EvenBatches = mode
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.CSV, err = cfg.CSV.Normalize(); err != nil {
		return nil, err
	}
	if cfg.Allocator == nil {
		cfg.Allocator = memory.DefaultAllocator
	}
	if cfg.ShuffleBufferRows == 0 {
		cfg.ShuffleBufferRows = DefaultShuffleBufferRows
	}
	p := &Pipeline{res: res, cfg: cfg, schema: cfg.readOptions().outSchema(cfg.Schema), limit: -1, open: map[*epochReader]struct{}{}, alloc: cfg.Allocator,
		footers: newFooterCache(cfg.Splits)}
	if limit := cfg.BufferPoolBytes; limit >= 0 {
		if limit == 0 {
			limit = defaultPoolBytes
			if cfg.MemoryBudget > 0 {
				limit = min(limit, cfg.MemoryBudget)
			}
		}
		p.pool = newBufferPool(cfg.Allocator, limit)
		p.alloc = p.pool
	}
	p.batchAlloc = NewBatchAllocator(cfg.BatchMemory, p.alloc)
	var spill *spillStore
	if cfg.SpillBytes > 0 && cfg.SpillDir != "" {
		spill = newSpillStore(cfg.SpillDir, cfg.SpillBytes, p.alloc)
	}
	if cfg.CacheBytes > 0 || spill != nil {
		p.cache = newSplitCache(cfg.CacheBytes, cfg.BatchMemory, spill)
	}
	for _, s := range cfg.Splits {
		p.rows += s.Rows
	}
	if cfg.Prefetch > 0 {
		p.decodeWorkers = cfg.DecodeWorkers
		if p.decodeWorkers == 0 {
			p.decodeWorkers = DefaultDecodeWorkers
		}
	}
	p.limit = EpochRowLimit(p.rows, cfg.BatchRows, mode, cfg.TargetBatches, cfg.EpochRows)
	if cfg.Agree != nil && mode != EvenOff {
		p.agree = &agreement{with: cfg.Agree, turn: make(chan struct{}, 1)}
	}
	return p, nil
}

// Schema returns the schema of every batch.
func (p *Pipeline) Schema() *arrow.Schema { return p.schema }

// minReadRows is the fewest rows the pipeline asks a split reader for at a
// time: decoding has a cost per call and per column, so small batches are
// cut (without copying) from larger decoded ones.
const minReadRows = 16384

// sharedReadBytes and maxSharedReadRows size the read batches that
// several decode workers share (Pipeline.readRows).
const (
	sharedReadBytes   = 4 << 20
	maxSharedReadRows = 65536
)

// rowBytes estimates a row's decoded bytes: fixed-width columns their
// width, others 32.
func rowBytes(schema *arrow.Schema) int {
	n := 0
	for _, f := range schema.Fields() {
		if w := fixedWidth(f.Type); w > 0 {
			n += w
		} else {
			n += 32
		}
	}
	return max(n, 1)
}

// readOptions returns the options the pipeline opens its splits with.
func (p *Pipeline) readOptions() ReadOptions {
	o := p.cfg.readOptions()
	o.BatchRows, o.Allocator, o.DecodeWorkers, o.footers = p.readRows(), p.alloc, p.decodeWorkers, p.footers
	if !p.shuffled() {
		// Read batches are what the epoch yields (sliced, or joined by
		// the rebatcher); shuffled, they are windows the shuffle keeps.
		o.batchAlloc = p.batchAlloc
	}
	return o
}

// readOptions returns the options of c that readers take as they are.
func (c PipelineConfig) readOptions() ReadOptions {
	return ReadOptions{Columns: c.Columns, LabelColumn: c.LabelColumn, Schema: c.Schema, CSV: c.CSV, Flight: c.Flight,
		Float32Features: c.Float32Features}
}

// shuffled reports whether the epoch's rows are shuffled across batches
// (not only its splits).
func (p *Pipeline) shuffled() bool { return p.cfg.Shuffle && p.cfg.ShuffleBufferRows > 1 }

// readRows is the batch size asked of split readers: at least
// minReadRows and, for smaller batches, a multiple of BatchRows, so that
// every batch is a slice of one decoded batch rather than joined (copied)
// from two; with several decode workers, about sharedReadBytes. Not when
// rows are shuffled: the read batches make up the shuffle windows, so the
// read size stays fixed and a seed gives the same order whatever the
// batch size.
func (p *Pipeline) readRows() int {
	b := p.cfg.BatchRows
	switch {
	case p.shuffled():
		return max(b, minReadRows)
	case p.decodeWorkers > 1:
		// Several decoders share each read batch, and a helper joins
		// it some 100 us late: larger ones keep that small beside it.
		rows := min(maxSharedReadRows, max(minReadRows, sharedReadBytes/rowBytes(p.schema)))
		return (rows + b - 1) / b * b
	case b >= minReadRows:
		return b
	}
	return (minReadRows + b - 1) / b * b
}

// Stats returns the rows and batches handed out so far and what the cache
// holds.
func (p *Pipeline) Stats() Stats {
	st := Stats{Rows: p.rowsOut.Load(), Batches: p.batchesOut.Load()}
	if p.cache != nil {
		st.CachedSplits, st.CachedBytes = p.cache.stats()
		st.SpilledSplits, st.SpilledBytes = p.cache.spill.stats()
		st.CacheHits, st.CacheMisses = p.cache.hits.Load(), p.cache.misses.Load()
	}
	return st
}

// Epoch opens epoch number epoch (0-based). With prefetching, reading
// starts at once on a goroutine the reader owns; Close stops and waits
// for it, and so does cancelling ctx.
func (p *Pipeline) Epoch(ctx context.Context, epoch int) (Reader, error) {
	if epoch < 0 {
		return nil, fmt.Errorf("feed pipeline: epoch %d: must not be negative", epoch)
	}
	if err := p.Settle(ctx); err != nil {
		return nil, fmt.Errorf("open epoch %d: %w", epoch, err)
	}
	schema := p.schema
	c := p.cfg
	order := make([]int, len(c.Splits))
	for i := range order {
		order[i] = i
	}
	// The epoch rules (epoch.go), which the Python direct reader follows too.
	if c.Shuffle {
		perm := make([]int64, len(order))
		permutation(perm, epochKey(c.Seed, epoch, c.Rank, streamSplits), nil)
		for i, j := range perm {
			order[i] = int(j)
		}
	}
	src := &splitStream{p: p, order: order, limit: -1}
	var chain stage = src
	if p.limit >= 0 {
		src.limit = p.limit
		src.cycle = true
	}
	if p.shuffled() {
		chain = newRowShuffler(chain, schema, c.ShuffleBufferRows, epochKey(c.Seed, epoch, c.Rank, streamRows), p.batchAlloc)
	}
	chain = newRebatcher(chain, schema, int64(c.BatchRows), p.batchAlloc)

	r := &epochReader{p: p, schema: schema, chain: chain}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		chain.close()
		return nil, fmt.Errorf("open epoch %d: %w", epoch, ErrClosed)
	}
	if c.Prefetch > 0 {
		r.pre = startPrefetch(ctx, chain, c.Prefetch, c.MemoryBudget)
	}
	p.open[r] = struct{}{}
	return r, nil
}

// Close closes every epoch reader still open and gives the buffers kept
// for reuse back to the allocator; Epoch fails afterwards. Batches still
// held by the caller stay valid.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	p.closed = true
	open := make([]*epochReader, 0, len(p.open))
	for r := range p.open {
		open = append(open, r)
	}
	p.mu.Unlock()
	for _, r := range open {
		r.Close()
	}
	var err error
	if p.cache != nil {
		err = p.cache.close()
	}
	if p.pool != nil {
		p.pool.close()
	}
	return err
}

// epochReader hands out one epoch's batches. Next and Close may be called
// from different goroutines (Pipeline.Close closes readers in use).
type epochReader struct {
	p      *Pipeline
	schema *arrow.Schema
	chain  stage
	pre    *prefetcher // nil without read-ahead

	closed atomic.Bool
	mu     sync.Mutex // guards chain
}

var _ Reader = (*epochReader)(nil)

func (r *epochReader) Schema() *arrow.Schema { return r.schema }

func (r *epochReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	var rec arrow.RecordBatch
	var err error
	if r.pre != nil {
		rec, err = r.pre.next(ctx)
	} else {
		r.mu.Lock()
		if r.closed.Load() {
			err = ErrClosed
		} else {
			rec, err = r.chain.next(ctx)
		}
		r.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	r.p.rowsOut.Add(rec.NumRows())
	r.p.batchesOut.Add(1)
	return rec, nil
}

// Buffered returns how many batches can be taken without waiting: those
// the read-ahead goroutine has prepared. It is zero without read-ahead.
func (r *epochReader) Buffered() int {
	if r.pre == nil {
		return 0
	}
	return len(r.pre.ch)
}

func (r *epochReader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if r.pre != nil {
		r.pre.stop() // the goroutine that used the chain has ended
	}
	r.mu.Lock()
	err := r.chain.close()
	r.mu.Unlock()
	r.p.mu.Lock()
	delete(r.p.open, r)
	r.p.mu.Unlock()
	return err
}

// stage is one step of an epoch's chain of readers.
type stage interface {
	// next returns the next batch, which the caller owns, or io.EOF.
	next(ctx context.Context) (arrow.RecordBatch, error)
	// close releases what the stage holds, and its input.
	close() error
}

// splitStream reads the rank's splits in an epoch's order. With a limit
// it stops after limit rows; with cycle it starts the splits over when
// they run out before the limit (padding).
//
// While a file's split is read, the next one is opened on a goroutine
// (openAhead): opening reads and parses the file's footer and plans the
// split's column readers, which the decoders would otherwise wait for
// at every split's start, and its decoders start on its first batches
// while the current split's last ones finish.
type splitStream struct {
	p     *Pipeline
	order []int
	limit int64
	cycle bool

	i        int
	cur      Reader
	emitted  int64
	passRows int64 // rows read since the order last started over

	ahead       *splitOpening // the split after cur, being opened; or nil
	aheadCtx    context.Context
	aheadCancel context.CancelFunc
}

// openAhead turns opening the next split ahead on; benchmarks turn it off
// to measure it.
var openAhead = true

// splitOpening is a split being opened on a goroutine: r and err are set
// once done is closed.
type splitOpening struct {
	split int // the split's index in the pipeline's splits
	done  chan struct{}
	r     Reader
	err   error
}

func (s *splitStream) next(ctx context.Context) (arrow.RecordBatch, error) {
	for {
		if s.limit >= 0 && s.emitted >= s.limit {
			return nil, io.EOF
		}
		if s.cur == nil {
			if s.i == len(s.order) {
				if !s.cycle || s.limit < 0 {
					return nil, io.EOF
				}
				if s.passRows == 0 {
					return nil, fmt.Errorf("feed pipeline: rank %d has no rows to fill %d batches with", s.p.cfg.Rank, s.limit/int64(s.p.cfg.BatchRows))
				}
				s.i, s.passRows = 0, 0
			}
			split := s.order[s.i]
			r, err := s.open(ctx, split)
			s.i++
			if err != nil {
				return nil, err
			}
			s.cur = r
			s.openNext(ctx, s.p.cfg.Splits[split].Rows)
		}
		rec, err := s.cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			cerr := s.cur.Close()
			s.cur = nil
			if cerr != nil {
				return nil, cerr
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		n := rec.NumRows()
		if s.limit >= 0 && s.emitted+n > s.limit {
			cut := rec.NewSlice(0, s.limit-s.emitted)
			rec.Release()
			rec, n = cut, s.limit-s.emitted
		}
		s.emitted += n
		s.passRows += n
		return rec, nil
	}
}

// openSplit opens split i of the rank, through the cache when there is one.
func (p *Pipeline) openSplit(ctx context.Context, i int) (Reader, error) {
	open := func(cached bool) (Reader, error) {
		o := p.readOptions()
		if cached {
			// The cache keeps these batches and hands them out again:
			// they must not be in batch memory, which the consumer may
			// write into. The feed copies them instead.
			o.batchAlloc = nil
		}
		return OpenSplit(ctx, p.res, p.cfg.Splits[i], o)
	}
	if p.cache == nil {
		return open(false)
	}
	sp := p.cfg.Splits[i]
	return p.cache.open(i, sp.Rows, sp.Format == FormatFlight || IsFlightURI(sp.URI), open)
}

// open returns split's reader: the one opened ahead, when it is that
// split's, else one opened now.
func (s *splitStream) open(ctx context.Context, split int) (Reader, error) {
	if a := s.ahead; a != nil {
		s.ahead = nil
		if a.split == split {
			select {
			case <-a.done:
			case <-ctx.Done():
				s.ahead = a // close waits for it
				return nil, ctx.Err()
			}
			return a.r, a.err
		}
		s.drop(a)
	}
	return s.p.openSplit(ctx, split)
}

// openNext starts opening the split after the current one, which
// promises curRows rows (0 when it does not say), when there is one the
// epoch will read and it is a file's (a Flight stream is not started
// before it is needed).
func (s *splitStream) openNext(ctx context.Context, curRows int64) {
	if !openAhead {
		return
	}
	i := s.i
	if i == len(s.order) {
		if !s.cycle || s.limit < 0 {
			return
		}
		i = 0
	}
	if s.limit >= 0 && curRows > 0 && s.emitted+curRows >= s.limit {
		return // the current split ends the epoch
	}
	split := s.order[i]
	if sp := s.p.cfg.Splits[split]; sp.Format == FormatFlight || IsFlightURI(sp.URI) {
		return
	}
	if s.aheadCtx == nil {
		// The split is read by later calls, whose contexts may be
		// shorter than this one: it lives until the stage is closed.
		s.aheadCtx, s.aheadCancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	a := &splitOpening{split: split, done: make(chan struct{})}
	s.ahead = a
	go func() {
		defer close(a.done)
		a.r, a.err = s.p.openSplit(s.aheadCtx, split)
	}()
}

// drop waits for a split opened ahead and closes it unread.
func (s *splitStream) drop(a *splitOpening) {
	<-a.done
	if a.r != nil {
		a.r.Close()
	}
}

func (s *splitStream) close() error {
	if s.aheadCancel != nil {
		s.aheadCancel()
	}
	if s.ahead != nil {
		s.drop(s.ahead)
		s.ahead = nil
	}
	if s.cur == nil {
		return nil
	}
	err := s.cur.Close()
	s.cur = nil
	return err
}
