package push

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/feed"
)

// turnPathHead is the first element of a stream's descriptor path in
// turn mode (Config.Turns): turn/N/... names the turn the stream feeds.
const turnPathHead = "turn"

// turnState is one input of the endpoint, dealt to the ranks: the job's
// only one, or in turn mode one turn's (a warm session's job's).
type turnState struct {
	n      int
	dealer *pushDealer
	ranks  []*rankStream
	// left are the ranks that opened a later turn; guarded by Server.mu.
	left  []bool
	nLeft int
}

func (s *Server) newTurn(n int) *turnState {
	return &turnState{n: n, dealer: newPushDealer(s.cfg.Ranks, s.cfg.BatchRows, s.even, s.cfg.BufferBytes),
		ranks: newRankStreams(s.cfg.Ranks, s.cfg.JournalDir), left: make([]bool, s.cfg.Ranks)}
}

// turnOf returns turn n, made when first named. Outside turn mode only
// turn 0, the job's one input, exists; in it turns count from 1, and a
// turn every rank has gone past is gone.
func (s *Server) turnOf(n int) (*turnState, error) {
	if !s.cfg.Turns {
		if n != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "turn %d: this job's push endpoint serves one input, not turns (a warm session's)", n)
		}
		return s.base, nil
	}
	if n < 1 {
		return nil, status.Error(codes.InvalidArgument, "a warm session's push endpoint takes each job's rows as its turn: "+
			"name the stream turn/N/... (N: the session job's number, 1, 2, ...), and end-of-input's body N")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts := s.turns[n]; ts != nil {
		return ts, nil
	}
	if n < s.passed {
		return nil, status.Errorf(codes.FailedPrecondition, "turn %d has ended: every rank has gone on to turn %d or later", n, s.passed)
	}
	ts := s.newTurn(n)
	for r, at := range s.at {
		if at > n {
			ts.left[r] = true
			ts.nLeft++
			ts.dealer.leave(r)
		}
	}
	s.turns[n] = ts
	return ts, nil
}

// streamTurn returns the turn a stream's (or GetFlightInfo's) descriptor
// feeds and the producer it names ("" for an anonymous one): outside turn
// mode turn 0 and the path's name; in turn mode the descriptor must be a
// path turn/N[/NAME...], the name being the whole path, so that a
// producer's rows are counted per turn.
func (s *Server) streamTurn(d *flight.FlightDescriptor) (int, string, error) {
	if !s.cfg.Turns {
		return 0, producerName(d), nil
	}
	path := d.GetPath()
	if d.GetType() != flight.DescriptorPATH || len(path) < 2 || path[0] != turnPathHead {
		_, err := s.turnOf(0)
		return 0, "", err
	}
	n, err := strconv.Atoi(path[1])
	if err != nil || n < 1 {
		return 0, "", status.Errorf(codes.InvalidArgument, "descriptor %s: %q is no turn (1, 2, ...)", strings.Join(path, "/"), path[1])
	}
	if len(path) == 2 {
		return n, "", nil
	}
	return n, strings.Join(path, "/"), nil
}

// streamInput returns the input a DoPut stream feeds (the turn its
// descriptor names, in turn mode) and the producer it names, counting a
// refused stream.
func (s *Server) streamInput(d *flight.FlightDescriptor) (*turnState, string, error) {
	n, name, err := s.streamTurn(d)
	if err != nil {
		s.refuse(RefusedSchema)
		return nil, "", err
	}
	ts, err := s.turnOf(n)
	if err != nil {
		s.refuse(RefusedEnded)
		return nil, "", err
	}
	return ts, name, nil
}

// actionTurn is the turn an end-of-input action ends: its body, a turn
// number, in turn mode; 0 otherwise.
func (s *Server) actionTurn(body []byte) (int, error) {
	if !s.cfg.Turns {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(body)))
	if err != nil || n < 1 {
		_, err := s.turnOf(0)
		return 0, err
	}
	return n, nil
}

// ticketTurn returns the rank and turn of a DoGet ticket, and the turn.
func (s *Server) ticketTurn(t *flight.Ticket) (int, *turnState, error) {
	r, n, err := feed.ParsePushTicket(t.GetTicket())
	if err != nil || r >= s.cfg.Ranks {
		return 0, nil, status.Errorf(codes.NotFound, "no rank stream %q", t.GetTicket())
	}
	ts, err := s.turnOf(n)
	if err != nil {
		return 0, nil, err
	}
	if s.cfg.Turns {
		s.enter(r, n)
	}
	return r, ts, nil
}

// enter records that rank r opened turn n: it leaves every earlier turn,
// whose rows for it are dropped, and a turn every rank has left is
// closed, its counts kept in the endpoint's totals.
func (s *Server) enter(r, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at[r] = max(s.at[r], n)
	for t, ts := range s.turns {
		if t >= n || ts.left[r] {
			continue
		}
		ts.left[r] = true
		ts.nLeft++
		ts.dealer.leave(r)
		if ts.nLeft == s.cfg.Ranks {
			s.retireLocked(ts)
		}
	}
	s.passed = s.at[0]
	for _, at := range s.at {
		s.passed = min(s.passed, at)
	}
}

// retireLocked closes a turn every rank has left and forgets its named
// producers; what it took stays in the totals. s.mu is held.
func (s *Server) retireLocked(ts *turnState) {
	d := ts.dealer
	d.mu.Lock()
	s.retired.rows += d.rows
	s.retired.batches += d.batches
	s.retired.bytes += d.bytes
	s.retired.waited += d.waited
	for r, n := range d.fed {
		s.retired.fed[r] += n
	}
	d.mu.Unlock()
	d.close()
	for r, rs := range ts.ranks {
		if err := rs.close(); err != nil {
			s.log.Warn("push endpoint: close a rank's stream of an ended turn", "turn", ts.n, "rank", r, "err", err)
		}
	}
	delete(s.turns, ts.n)
	prefix := fmt.Sprintf("%s/%d/", turnPathHead, ts.n)
	for name := range s.named {
		if strings.HasPrefix(name, prefix) {
			delete(s.named, name)
		}
	}
	// Named producers keep their order (Stats.Named) among those left.
	seq := 0
	for _, np := range s.sortedNamed() {
		np.seq = seq
		seq++
	}
}

// sortedNamed returns the named producers in the order they first
// pushed. s.mu is held.
func (s *Server) sortedNamed() []*namedProducer {
	out := make([]*namedProducer, 0, len(s.named))
	for _, np := range s.named {
		out = append(out, np)
	}
	slices.SortFunc(out, func(a, b *namedProducer) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// allTurnsLocked returns the turns held now. s.mu is held.
func (s *Server) allTurnsLocked() []*turnState {
	if !s.cfg.Turns {
		return []*turnState{s.base}
	}
	out := make([]*turnState, 0, len(s.turns))
	for _, ts := range s.turns {
		out = append(out, ts)
	}
	return out
}

// retiredTotals is what the endpoint's closed turns took.
type retiredTotals struct {
	rows, batches, bytes int64
	waited               time.Duration
	fed                  []int64
}
