package flighttest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Flight is one flight: its schema and its endpoints' batches.
type Flight struct {
	Schema    *arrow.Schema
	Endpoints [][]arrow.RecordBatch
	// Unsized leaves the flight's record count out (-1), as many servers
	// do, so clients must count.
	Unsized bool
	// Location, when set, is the URI every endpoint is served at (another
	// server's), instead of this server's.
	Location string
	// ReadOnce serves each endpoint's stream once, as a service that
	// hands out a result set and forgets it does: a second DoGet of an
	// endpoint answers FailedPrecondition.
	ReadOnce bool
	// RawSchema, when set, is the FlightInfo's schema as sent, instead of
	// Schema's encoding: what a hostile service sends.
	RawSchema []byte
}

// Server is a running Flight server.
type Server struct {
	flight.BaseFlightServer
	flights map[string]Flight
	token   string
	addr    string
	// Gets counts DoGet calls.
	Gets atomic.Int64
	// TokenCalls counts calls that carried an authorization header.
	TokenCalls atomic.Int64

	mu sync.Mutex
	// gets counts DoGet calls per ticket ("path#endpoint").
	gets map[string]int64
}

// Start serves flights (by path, "a/b" for grpc://host:port/a/b) on a
// loopback port until the test ends; a non-empty token is required as
// "authorization: Bearer TOKEN".
func Start(t testing.TB, token string, flights map[string]Flight) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1", token, flights)
}

// StartOn is Start on the loopback address host (127.0.0.2 is another
// host to a client that compares names).
func StartOn(t testing.TB, host, token string, flights map[string]Flight) *Server {
	t.Helper()
	s := &Server{flights: flights, token: token, gets: map[string]int64{}}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := s.check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := s.check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	flight.RegisterFlightServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URI is the input naming flight path.
func (s *Server) URI(path string) string { return "grpc://" + s.addr + "/" + path }

func (s *Server) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if len(md.Get("authorization")) > 0 {
		s.TokenCalls.Add(1)
	}
	if s.token == "" {
		return nil
	}
	for _, v := range md.Get("authorization") {
		if v == "Bearer "+s.token {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "a valid bearer token is required")
}

// GetFlightInfo describes a flight: one endpoint per list of batches,
// each with a ticket naming the flight and the endpoint.
func (s *Server) GetFlightInfo(_ context.Context, d *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	path := strings.Join(d.GetPath(), "/")
	f, ok := s.flights[path]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no flight %q", path)
	}
	info := &flight.FlightInfo{Schema: f.RawSchema, FlightDescriptor: d, TotalRecords: -1, TotalBytes: -1}
	if info.Schema == nil {
		info.Schema = flight.SerializeSchema(f.Schema, memory.DefaultAllocator)
	}
	var total int64
	for i, batches := range f.Endpoints {
		for _, b := range batches {
			total += b.NumRows()
		}
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{
			Ticket:   &flight.Ticket{Ticket: []byte(path + "#" + strconv.Itoa(i))},
			Location: []*flight.Location{{Uri: cmp.Or(f.Location, "grpc+tcp://"+s.addr)}},
		})
	}
	if !f.Unsized {
		info.TotalRecords = total
	}
	return info, nil
}

// EndpointGets returns how many DoGet calls asked for endpoint i of the
// flight at path.
func (s *Server) EndpointGets(path string, i int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[path+"#"+strconv.Itoa(i)]
}

// DoGet streams one endpoint's batches.
func (s *Server) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	s.Gets.Add(1)
	ticket := string(t.GetTicket())
	path, idx, ok := strings.Cut(ticket, "#")
	f, found := s.flights[path]
	i, err := strconv.Atoi(idx)
	if !ok || !found || err != nil || i < 0 || i >= len(f.Endpoints) {
		return status.Errorf(codes.NotFound, "no endpoint %q", t.GetTicket())
	}
	s.mu.Lock()
	s.gets[ticket]++
	again := s.gets[ticket] > 1
	s.mu.Unlock()
	if again && f.ReadOnce {
		return status.Errorf(codes.FailedPrecondition, "endpoint %q was read already: its stream can be read once", ticket)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(f.Schema))
	defer w.Close()
	for _, b := range f.Endpoints[i] {
		if err := w.Write(b); err != nil {
			return fmt.Errorf("send a batch: %w", err)
		}
	}
	return nil
}
