package push

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/spindle-ml/spindle/feed"

	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/rpc"
)

// ActionEndOfInput is the Flight action (DoAction type) a producer sends
// to say that the job's pushed input is complete.
const ActionEndOfInput = "end-of-input"

// DefaultBufferBytes bounds the pushed rows a driver holds for its
// ranks when no bound is configured.
const DefaultBufferBytes = 64 << 20

// ProducerToken is the token producers push into job jobID with,
// derived from the job's secret.
func ProducerToken(secret, jobID string) string {
	return auth.DeriveToken(secret, "flight-put/producer/"+jobID)
}

// Config configures the endpoint producers push a job's input into.
type Config struct {
	// Ranks is the number of ranks the rows are dealt to.
	Ranks int
	// BatchRows is the job's batch size: rows are dealt in rounds of one
	// batch per rank.
	BatchRows int
	// EvenBatches says how the rows left when the input ends are dealt
	// (see pushDealer.endLocked); empty means EvenPad.
	EvenBatches feed.EvenMode
	// Schema is the schema producers must push; nil takes the first
	// producer's, which every other producer must then match.
	Schema *arrow.Schema
	// Required are the columns the job reads (its columns and label):
	// a first producer whose schema lacks one is refused rather than
	// setting a schema the job cannot use.
	Required []string
	// Rows, when positive, is the job's declared row count: the input
	// ends when that many rows have been accepted, and a batch that would
	// go past it is refused.
	Rows int64
	// BufferBytes bounds the rows dealt to ranks and not yet sent to
	// them; producers wait while it is reached. Zero means
	// DefaultBufferBytes.
	BufferBytes int64
	// ProducerToken is the bearer token producers send (DoPut, DoAction,
	// GetFlightInfo); FeedToken the one the ranks' executors send (DoGet).
	// Neither may be empty: no call is served unauthenticated.
	ProducerToken, FeedToken string
	// TLS, when set, serves the endpoint with TLS (spindle.job.tls.enabled):
	// producers verify it with the job's CA, ranks also present the
	// executors' client certificate. Nil serves plain text.
	TLS *tls.Config
	// Logger logs producers coming and going; nil means slog.Default().
	Logger *slog.Logger
	// JournalDir, when set, keeps every batch sent to a rank in a file
	// there (rank-N.arrow, removed by Close), so that a rank's stream
	// opened again, by an executor that replaced a lost one, is sent
	// the rank's rows from the start before the live ones. Without it a
	// rank's stream can be opened once.
	JournalDir string
	// Turns serves one input per turn instead of the job's one (a warm
	// session's pushed input, each of its jobs a turn, numbered from
	// 1): a stream names its turn with its descriptor's path,
	// turn/N[/NAME...]; end-of-input's body is the turn it ends; a rank
	// reads turn N with feed.PushTurnTicket, and opening it drops what
	// is left for the rank of every earlier turn. Neither Rows nor
	// JournalDir goes with it.
	Turns bool
}

// Why a push endpoint refused a producer's stream (Stats.RefusedBy).
const (
	// RefusedAuth: no valid producer token.
	RefusedAuth = "auth"
	// RefusedSchema: the stream's schema is unreadable or does not match
	// the job's.
	RefusedSchema = "schema"
	// RefusedBusy: its producer's name has another stream open.
	RefusedBusy = "busy"
	// RefusedEnded: a batch came after the input ended or would have
	// taken it past its declared rows.
	RefusedEnded = "ended"
	// RefusedMalformed: a batch's Arrow data is inconsistent (offsets
	// out of order or out of bounds, invalid UTF-8, short buffers).
	RefusedMalformed = "malformed"
)

// RefuseReasons lists every reason a stream is refused for.
var RefuseReasons = [...]string{RefusedAuth, RefusedSchema, RefusedBusy, RefusedEnded, RefusedMalformed}

// Stats is what a push endpoint has done so far.
type Stats struct {
	// Streams counts the DoPut streams accepted (schema matching),
	// Refused those refused (bad token, schema mismatch, a busy producer
	// name, after the end), RefusedBy the same by reason (RefuseReasons).
	Streams, Refused int64
	RefusedBy        map[string]int64
	// Producers is the streams open now.
	Producers int64
	// Rows, Batches and Bytes are what was accepted (Bytes: the batches'
	// Arrow buffers); Fed the rows dealt to each rank.
	Rows, Batches, Bytes int64
	Fed                  []int64
	// BackpressureWait is the time producers' batches waited for room,
	// all producers together.
	BackpressureWait time.Duration
	// BufferedBytes is what the driver holds now of pushed rows (dealt
	// and waiting for their rank, or waiting to be dealt);
	// PeakBufferedBytes the most it has held.
	BufferedBytes, PeakBufferedBytes int64
	// Ended says the input has ended.
	Ended bool
	// Named is, for each producer that named its streams (a path
	// descriptor), what was taken from it, in the order they first
	// pushed.
	Named []ProducerStats
}

// ProducerStats is what a push endpoint took from one named producer over
// all its streams.
type ProducerStats struct {
	Name          string
	Rows, Batches int64
	Streams       int64 // its streams accepted
	Open          bool  // one of them is open now
}

// namedProducer is what the endpoint knows of a producer that names its
// streams (a path descriptor): the rows taken from it over all its
// streams, and whether one is open now.
type namedProducer struct {
	seq     int // the order in which it first pushed
	rows    int64
	batches int64
	streams int64
	active  bool
}

// Server is a running push endpoint: an Arrow Flight service that
// producers DoPut batches into, and that the job's ranks DoGet their
// share from.
type Server struct {
	flight.BaseFlightServer
	cfg    Config
	log    *slog.Logger
	even   feed.EvenMode
	srv    *grpc.Server
	addr   string
	served chan error

	mu        sync.Mutex
	schema    *arrow.Schema // nullable fields; nil until declared or pushed
	schemaSet chan struct{}
	named     map[string]*namedProducer
	// base is the job's one input; nil in turn mode, whose turns are
	// held by number, at is the newest turn each rank opened, passed
	// the oldest of those (no turn before it is served again), and
	// retired what the closed turns took.
	base    *turnState
	turns   map[int]*turnState
	at      []int
	passed  int
	retired retiredTotals

	streams, producers atomic.Int64
	// tapRefused counts calls refused on their headers, unread.
	tapRefused atomic.Int64
	refused    [len(RefuseReasons)]atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Start serves pushed input on lis until Close.
func Start(lis net.Listener, cfg Config) (*Server, error) {
	switch {
	case cfg.Ranks < 1:
		return nil, fmt.Errorf("push endpoint: %d ranks: need at least one", cfg.Ranks)
	case cfg.BatchRows < 1:
		return nil, fmt.Errorf("push endpoint: batch rows %d: need at least 1", cfg.BatchRows)
	case cfg.ProducerToken == "" || cfg.FeedToken == "":
		return nil, errors.New("push endpoint: no token: calls are never served unauthenticated")
	case cfg.Rows < 0 || cfg.BufferBytes < 0:
		return nil, fmt.Errorf("push endpoint: negative rows %d or buffer bytes %d", cfg.Rows, cfg.BufferBytes)
	case cfg.Turns && (cfg.Rows > 0 || cfg.JournalDir != ""):
		return nil, errors.New("push endpoint: turns go with neither a declared row count nor journals")
	}
	even, err := feed.ParseEvenMode(string(cfg.EvenBatches))
	if err != nil {
		return nil, fmt.Errorf("push endpoint: %w", err)
	}
	if cfg.BufferBytes == 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, even: even,
		addr: lis.Addr().String(), served: make(chan error, 1), schemaSet: make(chan struct{}),
		named: map[string]*namedProducer{}, turns: map[int]*turnState{}, at: make([]int, cfg.Ranks)}
	s.retired.fed = make([]int64, cfg.Ranks)
	if !cfg.Turns {
		s.base = s.newTurn(0)
	}
	if cfg.Schema != nil {
		s.schema = nullableSchema(cfg.Schema)
		close(s.schemaSet)
	}
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(feed.MaxFlightMessage)}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	// The token is checked in a tap, on the call's headers, before any
	// of its messages is read: a caller without one cannot make the
	// driver read (and hold) a message of up to MaxFlightMessage bytes.
	// A handler's panic fails its call, never the driver.
	s.srv = rpc.NewServer(rpc.ServerConfig{Logger: s.log, Options: append(opts, grpc.InTapHandle(s.tap))})
	flight.RegisterFlightServiceServer(s.srv, s)
	go func() { s.served <- s.srv.Serve(lis) }()
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops serving, ending every stream, and releases the rows held.
// Closing again does nothing.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		turns := s.allTurnsLocked()
		s.mu.Unlock()
		for _, ts := range turns {
			ts.dealer.close()
		}
		s.srv.Stop()
		if err := <-s.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.closeErr = fmt.Errorf("push endpoint: %w", err)
		}
		// Every DoGet has returned: the journals are no longer written.
		for _, ts := range turns {
			for r, rs := range ts.ranks {
				if err := rs.close(); err != nil && s.closeErr == nil {
					s.closeErr = fmt.Errorf("push endpoint: rank %d: %w", r, err)
				}
			}
		}
	})
	return s.closeErr
}

// EndInput ends the job's input as a producer's end-of-input action
// does; in turn mode it does nothing (each turn ends its own).
func (s *Server) EndInput() {
	if s.base != nil {
		s.base.dealer.end()
	}
}

// Stats returns what the endpoint has done so far.
func (s *Server) Stats() Stats {
	st := Stats{Streams: s.streams.Load(), Producers: s.producers.Load(), RefusedBy: map[string]int64{}}
	for i, r := range RefuseReasons {
		n := s.refused[i].Load()
		st.RefusedBy[r] = n
		st.Refused += n
	}
	s.mu.Lock()
	st.Rows, st.Batches, st.Bytes, st.BackpressureWait = s.retired.rows, s.retired.batches, s.retired.bytes, s.retired.waited
	st.Fed = append([]int64(nil), s.retired.fed...)
	for _, ts := range s.allTurnsLocked() {
		d := ts.dealer
		d.mu.Lock()
		st.Rows, st.Batches, st.Bytes, st.BackpressureWait = st.Rows+d.rows, st.Batches+d.batches, st.Bytes+d.bytes, st.BackpressureWait+d.waited
		for r, n := range d.fed {
			st.Fed[r] += n
		}
		st.BufferedBytes += d.pendB + d.queuedB
		st.PeakBufferedBytes = max(st.PeakBufferedBytes, d.peak)
		st.Ended = !s.cfg.Turns && d.ended
		d.mu.Unlock()
	}
	st.Named = make([]ProducerStats, len(s.named))
	for name, np := range s.named {
		st.Named[np.seq] = ProducerStats{Name: name, Rows: np.rows, Batches: np.batches, Streams: np.streams, Open: np.active}
	}
	s.mu.Unlock()
	return st
}

// refuse counts a refused stream.
func (s *Server) refuse(reason string) {
	for i, r := range RefuseReasons {
		if r == reason {
			s.refused[i].Add(1)
		}
	}
}

// Schema waits for the job's schema: the declared one, or the first
// producer's.
func (s *Server) Schema(ctx context.Context) (*arrow.Schema, error) {
	select {
	case <-s.schemaSet:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.schema, nil
}

// Plan waits for the job's schema and plans the job: one split per rank,
// its stream from this endpoint at advertise (host:port, the address the
// executors dial). Row counts are not known ahead: RowsPerRank is zero,
// and the ranks' streams are kept even by the endpoint itself.
func (s *Server) Plan(ctx context.Context, advertise string, columns []string, label string) (*feed.JobPlan, error) {
	schema, err := s.Schema(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := feed.SelectSchema(schema, columns, label, "the pushed input")
	if err != nil {
		return nil, err
	}
	plan := &feed.JobPlan{Schema: sel, Ranks: make([][]feed.Split, s.cfg.Ranks), RowsPerRank: make([]int64, s.cfg.Ranks)}
	scheme := "grpc"
	if s.cfg.TLS != nil {
		scheme = "grpc+tls"
	}
	for r := range plan.Ranks {
		plan.Ranks[r] = []feed.Split{{URI: fmt.Sprintf("%s://%s/spindle-push#rank=%d", scheme, advertise, r), Format: feed.FormatFlight,
			Ticket: []byte(feed.PushTicketPrefix + strconv.Itoa(r))}}
	}
	return plan, nil
}

// tap lets a call through only with the right bearer token: the feed
// token for DoGet, the producer token for everything else. It runs on
// the call's headers, before any message is read.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	method := info.FullMethodName
	want := s.cfg.ProducerToken
	if strings.HasSuffix(method, "/DoGet") {
		want = s.cfg.FeedToken
	}
	for _, v := range info.Header.Get("authorization") {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
			return ctx, nil
		}
	}
	if strings.HasSuffix(method, "/DoPut") {
		s.refuse(RefusedAuth)
	}
	s.tapRefused.Add(1)
	s.log.Warn("push endpoint: refused a call without a valid token", "method", method, "peer", peerOf(ctx))
	return nil, status.Error(codes.Unauthenticated, "the job's push endpoint needs its producer token as \"authorization: Bearer TOKEN\" (spindle submit prints the file holding it)")
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr.String()
	}
	return ""
}

// nullableSchema is s with every field nullable, so that producers whose
// columns have nulls, or say they may, match it.
func nullableSchema(s *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, s.NumFields())
	for i, f := range s.Fields() {
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: true}
	}
	return arrow.NewSchema(fields, nil)
}

// adopt checks a producer's schema against the job's, setting the job's
// from it when none is set yet, and returns where each of the job's
// columns is in the producer's batches. Errors name the column.
func (s *Server) adopt(in *arrow.Schema) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.schema == nil {
		for _, c := range s.cfg.Required {
			if len(in.FieldIndices(c)) == 0 {
				return nil, fmt.Errorf("column %q, which the job reads, is not in the stream's schema (%s)", c, strings.Join(feed.FieldNames(in), ", "))
			}
		}
		for _, f := range in.Fields() {
			if n := len(in.FieldIndices(f.Name)); n > 1 {
				return nil, fmt.Errorf("column %q appears %d times in the stream's schema", f.Name, n)
			}
		}
		s.schema = nullableSchema(in)
		close(s.schemaSet)
		s.log.Info("push endpoint: the first producer's schema is the job's", "columns", strings.Join(feed.FieldNames(in), ", "))
	}
	proj := make([]int, s.schema.NumFields())
	for i, f := range s.schema.Fields() {
		idx := in.FieldIndices(f.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("column %q (%s) of the job's schema is not in the stream's schema (%s)", f.Name, f.Type, strings.Join(feed.FieldNames(in), ", "))
		}
		if got := in.Field(idx[0]).Type; !arrow.TypeEqual(got, f.Type) {
			return nil, fmt.Errorf("column %q is %s in the stream, the job's schema says %s", f.Name, got, f.Type)
		}
		proj[i] = idx[0]
	}
	for _, f := range in.Fields() {
		if len(s.schema.FieldIndices(f.Name)) == 0 {
			return nil, fmt.Errorf("column %q of the stream is not in the job's schema (%s)", f.Name, strings.Join(feed.FieldNames(s.schema), ", "))
		}
	}
	return proj, nil
}

// DoPut takes one producer's stream. Nothing is fed before its schema
// matches the job's. Each batch is acknowledged (a PutResult whose
// app_metadata is {"batches":N,"rows":M}, the stream's totals so far, and
// for a named producer "producer_rows", its total over all its streams)
// once the endpoint has taken it: every acknowledged batch is fed, once.
// A stream whose descriptor is a path names its producer; one name has one
// stream open at a time.
func (s *Server) DoPut(stream flight.FlightService_DoPutServer) error {
	ctx := stream.Context()
	from := peerOf(ctx)
	// Every message's metadata is checked before arrow-go decodes it: a
	// schema claiming billions of fields would end the driver.
	rd, err := flight.NewRecordReader(feed.CheckedFlightStream(stream), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		s.refuse(RefusedSchema)
		return status.Errorf(codes.InvalidArgument, "read the stream's schema: %v", err)
	}
	defer rd.Release()
	proj, err := s.adopt(rd.Schema())
	if err != nil {
		s.refuse(RefusedSchema)
		s.log.Warn("push endpoint: refused a stream", "peer", from, "err", err)
		return status.Errorf(codes.InvalidArgument, "schema mismatch: %v; nothing of this stream was fed", err)
	}
	ts, name, err := s.streamInput(rd.LatestFlightDescriptor())
	if err != nil {
		return err
	}
	np, release, err := s.claim(name)
	if err != nil {
		return err
	}
	defer release()
	s.streams.Add(1)
	s.producers.Add(1)
	defer s.producers.Add(-1)
	s.log.Info("push endpoint: producer connected", "peer", from, "producer", name)
	schema := s.schema
	var batches, rows int64
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.log.Warn("push endpoint: producer stream broken; its acknowledged batches are fed, the rest dropped",
				"peer", from, "batches", batches, "rows", rows, "err", err)
			return status.Errorf(codes.Aborted, "read a batch: %v", err)
		}
		if err := feed.ValidateBatch(rec); err != nil {
			s.refuse(RefusedMalformed)
			s.log.Warn("push endpoint: refused a malformed batch; the stream ends, its acknowledged batches are fed",
				"peer", from, "batch", batches, "err", err)
			return status.Errorf(codes.InvalidArgument, "batch %d of this stream: %v; it was not fed", batches, err)
		}
		cols := make([]arrow.Array, len(proj))
		for i, j := range proj {
			cols[i] = rec.Column(j)
		}
		n := rec.NumRows()
		if err := ts.dealer.add(ctx, array.NewRecordBatch(schema, cols, n), s.cfg.Rows); err != nil {
			if errors.Is(err, errInputEnded) {
				s.refuse(RefusedEnded)
				return status.Errorf(codes.FailedPrecondition, "%v; batch %d of this stream was not fed", err, batches)
			}
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			s.refuse(RefusedEnded)
			return status.Errorf(codes.OutOfRange, "%v; batch %d of this stream was not fed", err, batches)
		}
		batches++
		rows += n
		ack := fmt.Sprintf(`{"batches":%d,"rows":%d}`, batches, rows)
		if np != nil {
			s.mu.Lock()
			np.rows += n
			np.batches++
			total := np.rows
			s.mu.Unlock()
			ack = fmt.Sprintf(`{"batches":%d,"rows":%d,"producer_rows":%d}`, batches, rows, total)
		}
		if err := stream.Send(&flight.PutResult{AppMetadata: []byte(ack)}); err != nil {
			s.log.Warn("push endpoint: producer gone before an acknowledgement; the batch is fed", "peer", from, "batches", batches, "rows", rows)
			return err
		}
	}
	s.log.Info("push endpoint: producer finished", "peer", from, "batches", batches, "rows", rows)
	return nil
}

// claim marks the named producer name (none for "") as pushing until
// release is called; it is refused while another stream of it is open.
func (s *Server) claim(name string) (np *namedProducer, release func(), err error) {
	if name == "" {
		return nil, func() {}, nil
	}
	s.mu.Lock()
	if np = s.named[name]; np == nil {
		np = &namedProducer{seq: len(s.named)}
		s.named[name] = np
	}
	busy := np.active
	if !busy {
		np.active = true
		np.streams++
	}
	s.mu.Unlock()
	if busy {
		s.refuse(RefusedBusy)
		return nil, nil, status.Errorf(codes.AlreadyExists, "producer %q is pushing on another stream already; nothing of this stream was fed", name)
	}
	return np, func() {
		s.mu.Lock()
		np.active = false
		s.mu.Unlock()
	}, nil
}

// DoAction serves end-of-input: the input is complete, and the ranks see
// the end of their data once they have had what was pushed.
func (s *Server) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if a.GetType() != ActionEndOfInput {
		return status.Errorf(codes.InvalidArgument, "unknown action %q: the push endpoint knows %q", a.GetType(), ActionEndOfInput)
	}
	n, err := s.actionTurn(a.GetBody())
	if err != nil {
		return err
	}
	ts, err := s.turnOf(n)
	if err != nil {
		return err
	}
	ts.dealer.end()
	ts.dealer.mu.Lock()
	rows := ts.dealer.rows
	ts.dealer.mu.Unlock()
	s.log.Info("push endpoint: end of input", "peer", peerOf(stream.Context()), "turn", n, "rows", rows)
	return stream.Send(&flight.Result{Body: []byte(fmt.Sprintf(`{"rows":%d}`, rows))})
}

// ListActions lists end-of-input.
func (s *Server) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	return stream.Send(&flight.ActionType{Type: ActionEndOfInput, Description: "the pushed input is complete: training sees the end of its data"})
}

// GetFlightInfo tells a producer the job's schema (once known) and rows
// taken: for a path descriptor, those taken from the producer it names
// (0 for a name not seen), with which a restarted producer resumes
// (Unavailable while a stream of that name is open, as its count may
// still grow); otherwise those of the whole job. The flight has no endpoints to read.
func (s *Server) GetFlightInfo(ctx context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	total := s.Stats().Rows
	// In turn mode a path turn/N counts that turn's rows (a descriptor
	// naming no turn, the whole job's).
	turn, name, err := s.streamTurn(d)
	if err != nil {
		turn, name = 0, ""
	}
	s.mu.Lock()
	schema := s.schema
	busy := false
	if turn > 0 && name == "" {
		total = 0
		if ts := s.turns[turn]; ts != nil {
			ts.dealer.mu.Lock()
			total = ts.dealer.rows
			ts.dealer.mu.Unlock()
		}
	}
	if name != "" {
		total = 0
		if np := s.named[name]; np != nil {
			total, busy = np.rows, np.active
		}
	}
	s.mu.Unlock()
	if busy {
		// Its count could still grow: a restarted producer would resume
		// from a stale one.
		return nil, status.Errorf(codes.Unavailable, "producer %q still has a stream open (its end has not reached the endpoint yet); ask again shortly", name)
	}
	if schema == nil {
		if name == "" {
			return nil, status.Error(codes.NotFound, "the job has no schema yet: the first producer's becomes it")
		}
		schema = arrow.NewSchema(nil, nil) // nothing taken of it yet either
	}
	return &flight.FlightInfo{Schema: flight.SerializeSchema(schema, memory.DefaultAllocator), FlightDescriptor: d,
		TotalRecords: total, TotalBytes: -1}, nil
}

// producerName is the name a stream's descriptor gives its producer: its
// path, joined with "/"; empty (an anonymous producer) for any other
// descriptor.
func producerName(d *flight.FlightDescriptor) string {
	if d.GetType() != flight.DescriptorPATH {
		return ""
	}
	return strings.Join(d.GetPath(), "/")
}

// DoGet streams one rank's share. Without a journal each rank's stream
// can be read once: pushed rows are not kept after they are sent. With
// one, a rank's stream opened again ends the one open before (its
// executor was lost) and sends the rank's rows from the start. In turn
// mode the ticket names the turn.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	r, ts, err := s.ticketTurn(t)
	if err != nil {
		return err
	}
	rs := ts.ranks[r]
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s.mu.Lock()
	again := rs.opened
	rs.opened = true
	if rs.cancel != nil {
		rs.cancel()
	}
	rs.cancel = cancel
	schema := s.schema
	s.mu.Unlock()
	if again && rs.path == "" && s.cfg.Turns && schema != nil {
		// A later epoch of a turn the executor could not keep (its job
		// stopped reading the turn's first epoch early, or the rows
		// outgrew its cache and spill) gets no rows, rather than
		// ending the warm session.
		s.log.Warn("push endpoint: a rank asked for its rows of a turn again; they were fed once and are not kept: it gets none",
			"turn", ts.n, "rank", r)
		return flight.NewRecordWriter(stream, ipc.WithSchema(schema)).Close()
	}
	if again && rs.path == "" {
		return status.Errorf(codes.FailedPrecondition, "rank %d's pushed rows were fed already: pushed input is sent once "+
			"(later epochs come from the executor's cache, spindle.feed.cacheMemory and spindle.feed.spillDisk; a restarted rank cannot have them again)", r)
	}
	if schema == nil {
		return status.Error(codes.FailedPrecondition, "the job has no schema yet")
	}
	rs.serving.Lock()
	defer rs.serving.Unlock()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	defer w.Close()
	send := func(rec arrow.RecordBatch) error {
		if err := w.Write(rec); err != nil {
			return fmt.Errorf("send rank %d a batch: %w", r, err)
		}
		return nil
	}
	if again && rs.broken != nil {
		return status.Errorf(codes.FailedPrecondition, "rank %d's pushed rows cannot be sent again: its journal lacks some (%v)", r, rs.broken)
	}
	if again {
		n, err := rs.replay(send)
		if err != nil {
			return status.Errorf(codes.Internal, "rank %d's stream: %v", r, err)
		}
		s.log.Info("rank stream opened again: its pushed rows sent again from the journal", "rank", r, "rows", n)
	}
	for {
		rec, err := ts.dealer.take(ctx, r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Unavailable, "rank %d's stream: %v", r, err)
		}
		// Kept before it is sent: an executor lost with it unread must
		// not lose it. A journal that cannot be written does not stop
		// this stream, only a later one for the rank.
		if jerr := rs.record(schema, rec); jerr != nil {
			s.log.Warn("pushed rows not journalled: the rank cannot be restarted", "rank", r, "err", jerr)
		}
		err = send(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
}

// ParseSchemaSpec parses a declared schema, comma-separated name:type
// pairs such as "id:int64,x:float32,label:float32". The types are bool,
// int8 to int64, uint8 to uint64, float32 (float), float64 (double),
// string (utf8), binary and date32.
func ParseSchemaSpec(spec string) (*arrow.Schema, error) {
	types := map[string]arrow.DataType{
		"bool": arrow.FixedWidthTypes.Boolean, "int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
		"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64, "uint8": arrow.PrimitiveTypes.Uint8,
		"uint16": arrow.PrimitiveTypes.Uint16, "uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
		"float32": arrow.PrimitiveTypes.Float32, "float": arrow.PrimitiveTypes.Float32, "float64": arrow.PrimitiveTypes.Float64,
		"double": arrow.PrimitiveTypes.Float64, "string": arrow.BinaryTypes.String, "utf8": arrow.BinaryTypes.String,
		"binary": arrow.BinaryTypes.Binary, "date32": arrow.FixedWidthTypes.Date32,
	}
	var fields []arrow.Field
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		name, typ = strings.TrimSpace(name), strings.ToLower(strings.TrimSpace(typ))
		if !ok || name == "" {
			return nil, fmt.Errorf("schema %q: %q is not name:type", spec, part)
		}
		t, ok := types[typ]
		if !ok {
			return nil, fmt.Errorf("schema %q: column %q has unknown type %q (want bool, int8-64, uint8-64, float32, float64, string, binary or date32)", spec, name, typ)
		}
		if seen[name] {
			return nil, fmt.Errorf("schema %q: column %q appears twice", spec, name)
		}
		seen[name] = true
		fields = append(fields, arrow.Field{Name: name, Type: t, Nullable: true})
	}
	return arrow.NewSchema(fields, nil), nil
}
