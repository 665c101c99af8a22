package feed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// FormatFlight is an Arrow Flight stream: an endpoint of a flight that
// --input grpc://host:port/path names.
const FormatFlight Format = "flight"

// FlightOptions say how to reach Arrow Flight servers.
type FlightOptions struct {
	// Token is sent as "authorization: Bearer TOKEN" with every call
	// (spindle.flight.token) to the hosts the inputs name, and to
	// TokenHosts; empty sends none.
	Token string
	// TokenHosts are further hosts a flight's endpoints may name that get
	// Token too (spindle.flight.tokenHosts); "*" is every host.
	TokenHosts []string
	// PushToken is sent instead of Token when reading a rank's share of
	// pushed input from the driver (a flight-put: input).
	PushToken string
	// CAFile verifies a grpc+tls:// server's certificate; empty uses the
	// system's roots.
	CAFile string
	// PushTLS, when set, is how a rank reaches a driver's push endpoint
	// served with TLS (spindle.job.tls.enabled): the job's CA and the
	// executors' client certificate.
	PushTLS *tls.Config

	// tls, when set, replaces CAFile for one dial.
	tls *tls.Config
	// calls are the logger and metrics of the clients' interceptor chain
	// (zero: slog.Default(), no metrics).
	calls rpc.ClientConfig
}

// IsFlightURI reports whether an input names an Arrow Flight service.
func IsFlightURI(s string) bool {
	return strings.HasPrefix(s, "grpc://") || strings.HasPrefix(s, "grpc+tls://") || strings.HasPrefix(s, "grpc+tcp://")
}

// flightTarget is a parsed Flight input: where the service is and which
// flight (a path descriptor) it asks for.
type flightTarget struct {
	addr string
	tls  bool
	path []string
}

func parseFlightURI(s string) (flightTarget, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return flightTarget{}, fmt.Errorf("%w: input %s: want grpc://host:port/path (an Arrow Flight service and the flight's path)", ErrInput, s)
	}
	t := flightTarget{addr: u.Host, tls: u.Scheme == "grpc+tls"}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		return flightTarget{}, fmt.Errorf("%w: input %s: the Flight service needs a port (grpc://host:port/path)", ErrInput, s)
	}
	for _, seg := range strings.Split(strings.Trim(u.Path, "/"), "/") {
		if seg != "" {
			t.path = append(t.path, seg)
		}
	}
	if len(t.path) == 0 {
		return flightTarget{}, fmt.Errorf("%w: input %s names no flight: give its path, as in grpc://host:port/clicks/2026-11-24", ErrInput, s)
	}
	return t, nil
}

// flightEndpointURI names one endpoint of a flight in splits and errors.
// An endpoint on a host the token may not go to says so in its fragment
// (noTokenMark), which the rank reading it honours.
func flightEndpointURI(t flightTarget, addr string, i int, o FlightOptions) string {
	scheme := "grpc"
	if t.tls {
		scheme = "grpc+tls"
	}
	uri := fmt.Sprintf("%s://%s/%s#endpoint=%d", scheme, addr, strings.Join(t.path, "/"), i)
	if o.Token != "" && !tokenMayGo(t.addr, addr, o.TokenHosts) {
		uri += noTokenMark
	}
	return uri
}

// noTokenMark ends the URI of an endpoint that is read without the token.
const noTokenMark = "&token=none"

// tokenMayGo says whether spindle.flight.token may be sent to the
// endpoint at addr of the input the user named at named: the same host,
// or one spindle.flight.tokenHosts lists. A FlightInfo is the service's
// word, not the user's: its endpoints may name any host.
func tokenMayGo(named, addr string, hosts []string) bool {
	host := func(a string) string {
		if h, _, err := net.SplitHostPort(a); err == nil {
			return strings.ToLower(h)
		}
		return strings.ToLower(a)
	}
	h := host(addr)
	if h == host(named) {
		return true
	}
	for _, allowed := range hosts {
		if allowed == "*" || strings.ToLower(strings.TrimSpace(allowed)) == h {
			return true
		}
	}
	return false
}

// optionsFor returns o without its token when uri is an endpoint's that
// the token may not go to.
func optionsFor(uri string, o FlightOptions) FlightOptions {
	if strings.HasSuffix(uri, noTokenMark) {
		o.Token = ""
	}
	return o
}

// MaxFlightMessage bounds one Flight message (a record batch) either way,
// far above gRPC's default of 4 MiB: producers and services choose their
// batch sizes, and pyarrow's are often larger.
const MaxFlightMessage = 512 << 20

// dialFlight connects to a Flight service.
func dialFlight(addr string, useTLS bool, o FlightOptions) (flight.Client, error) {
	creds := insecure.NewCredentials()
	switch {
	case useTLS && o.tls != nil:
		creds = credentials.NewTLS(o.tls.Clone())
	case useTLS:
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: spindle.flight.tls.caFile: %w", ErrInput, err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: spindle.flight.tls.caFile %s holds no PEM certificate", ErrInput, o.CAFile)
			}
		}
		creds = credentials.NewTLS(cfg)
	}
	cc := o.calls
	cc.Options = []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxFlightMessage))}
	conn, err := rpc.NewClient(addr, cc)
	if err != nil {
		return nil, fmt.Errorf("connect to Arrow Flight service %s: %w", addr, err)
	}
	// The client closes conn with itself.
	return flight.NewClientFromConn(conn, nil), nil
}

// withToken adds the bearer token to a call's context.
func withToken(ctx context.Context, o FlightOptions) context.Context {
	if o.Token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+o.Token)
}

// flightError turns a Flight call's failure into the feed's errors: a
// refusal or a missing flight is bad input, an unreachable service is
// unavailable (planning retries it), naming the service and the flight.
func flightError(what, where string, err error) error {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return fmt.Errorf("%w: %s: Arrow Flight service %s refused the call (spindle.flight.token): %v", ErrInput, what, where, status.Convert(err).Message())
	case codes.NotFound, codes.InvalidArgument:
		return fmt.Errorf("%w: %s: %s: %v", ErrInput, what, where, status.Convert(err).Message())
	case codes.Unavailable, codes.DeadlineExceeded:
		return fmt.Errorf("%w: %s: Arrow Flight service %s: %v", ErrUnavailable, what, where, status.Convert(err).Message())
	}
	return fmt.Errorf("%s: %s: %w", what, where, err)
}

// FlightEndpoint is one endpoint of a flight, as planning deals it: the
// URI splits name it by, the address to fetch it from, the flight's
// schema, its ticket, whether its service speaks TLS, the hosts it names,
// and its rows (-1: unknown).
type FlightEndpoint struct {
	URI    string
	Addr   string
	Schema *arrow.Schema
	Ticket []byte
	TLS    bool
	Hosts  []string
	Rows   int64
}

// flightCountParallelism bounds the endpoints counted at once.
const flightCountParallelism = 4

// InspectFlights asks each Flight input for its flight and returns its
// endpoints, in input order, and the URIs of each input's endpoints: the
// flight's schema, and the endpoint's rows (from the flight's record
// count when it has one endpoint, else, when count is set, counted by
// reading the endpoint once, and otherwise left unknown).
func InspectFlights(ctx context.Context, inputs []string, o FlightOptions, count bool) ([]*FlightEndpoint, [][]string, error) {
	var all []*FlightEndpoint
	perInput := make([][]string, len(inputs))
	for i, in := range inputs {
		found, err := inspectFlight(ctx, in, o, count)
		if err != nil {
			return nil, nil, err
		}
		for _, ep := range found {
			perInput[i] = append(perInput[i], ep.URI)
		}
		all = append(all, found...)
	}
	return all, perInput, nil
}

// inspectFlight returns the endpoints of the flight input in
// (InspectFlights).
func inspectFlight(ctx context.Context, in string, o FlightOptions, count bool) ([]*FlightEndpoint, error) {
	t, err := parseFlightURI(in)
	if err != nil {
		return nil, err
	}
	c, err := dialFlight(t.addr, t.tls, o)
	if err != nil {
		return nil, err
	}
	info, err := c.GetFlightInfo(withToken(ctx, o), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: t.path})
	c.Close()
	if err != nil {
		return nil, flightError("input "+in, t.addr, err)
	}
	if err := checkEncapsulated(info.GetSchema()); err != nil {
		return nil, fmt.Errorf("%w: input %s: the flight's schema: %w", ErrInput, in, err)
	}
	schema, err := flight.DeserializeSchema(info.GetSchema(), memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%w: input %s: the flight's schema: %w", ErrInput, in, err)
	}
	eps := info.GetEndpoint()
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: input %s: the flight has no endpoints", ErrInput, in)
	}
	found := make([]*FlightEndpoint, len(eps))
	for j, ep := range eps {
		addr := t.addr
		if locs := ep.GetLocation(); len(locs) > 0 {
			if u, err := url.Parse(locs[0].GetUri()); err == nil && u.Host != "" {
				addr = u.Host
			}
		}
		host, _, _ := net.SplitHostPort(addr)
		found[j] = &FlightEndpoint{URI: flightEndpointURI(t, addr, j, o), Addr: addr, Schema: schema,
			Ticket: ep.GetTicket().GetTicket(), TLS: t.tls, Hosts: []string{host}}
	}
	switch total := info.GetTotalRecords(); {
	case len(eps) == 1 && total >= 0:
		found[0].Rows = total
	case !count:
		for _, f := range found {
			f.Rows = -1
		}
	default:
		if err := countFlightRows(ctx, found, o); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// countFlightRows reads each endpoint once to count its rows, as dealing
// rows evenly needs them and a flight of several endpoints does not say.
func countFlightRows(ctx context.Context, eps []*FlightEndpoint, o FlightOptions) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(flightCountParallelism)
	for _, ep := range eps {
		g.Go(func() error {
			src, err := openFlightStream(gctx, ep.Addr, ep.TLS, ep.Ticket, ep.URI, o)
			if err != nil {
				return err
			}
			defer src.close()
			for {
				rec, err := src.rd.Read()
				if err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return flightError("count the rows of "+ep.URI, ep.Addr, err)
				}
				ep.Rows += rec.NumRows()
			}
		})
	}
	return g.Wait()
}

// flightSource reads one endpoint's stream, skipping the split's first
// rows and cutting batches to batchRows.
type flightSource struct {
	uri    string
	client flight.Client
	cancel context.CancelFunc
	rd     *flight.Reader
	cut    batchCutter
}

func openFlightStream(ctx context.Context, addr string, useTLS bool, ticket []byte, uri string, o FlightOptions) (*flightSource, error) {
	o = optionsFor(uri, o)
	c, err := dialFlight(addr, useTLS, o)
	if err != nil {
		return nil, err
	}
	// The stream outlives this call: it ends with the source.
	sctx, cancel := context.WithCancel(withToken(context.WithoutCancel(ctx), o))
	stop := context.AfterFunc(ctx, cancel)
	stream, err := c.DoGet(sctx, &flight.Ticket{Ticket: ticket})
	if err == nil {
		var rd *flight.Reader
		if rd, err = flight.NewRecordReader(CheckedFlightStream(stream)); err == nil {
			stop()
			return &flightSource{uri: uri, client: c, cancel: cancel, rd: rd}, nil
		}
	}
	stop()
	cancel()
	c.Close()
	return nil, flightError("read "+uri, addr, err)
}

// openFlight opens a Flight split: its endpoint's stream, starting
// RowOffset rows in.
func openFlight(ctx context.Context, s Split, opts ReadOptions) (*opened, error) {
	u, err := url.Parse(s.URI)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: split %s does not name a Flight endpoint", ErrInput, s.URI)
	}
	fo := opts.Flight
	if strings.HasPrefix(string(s.Ticket), PushTicketPrefix) {
		fo.Token, fo.tls = fo.PushToken, fo.PushTLS
	}
	src, err := openFlightStream(ctx, u.Host, u.Scheme == "grpc+tls", s.Ticket, s.URI, fo)
	if err != nil {
		return nil, err
	}
	src.cut = batchCutter{skip: s.RowOffset, batchRows: int64(opts.BatchRows)}
	streamSchema := src.rd.Schema()
	sel, err := SelectColumns(FieldNames(streamSchema), opts.Columns, opts.LabelColumn, s.URI)
	if err != nil {
		src.close()
		return nil, err
	}
	out := ProjectSchema(streamSchema, sel)
	if opts.Schema != nil {
		if err := checkPlanned(opts.Schema, out, s.URI); err != nil {
			src.close()
			return nil, err
		}
		out = opts.Schema
	}
	proj := make([]int, len(sel))
	for i, name := range sel {
		proj[i] = streamSchema.FieldIndices(name)[0]
	}
	return &opened{src: src, schema: out, proj: proj}, nil
}

func (s *flightSource) next(ctx context.Context) (arrow.RecordBatch, error) {
	return s.cut.next(ctx, func() (arrow.RecordBatch, error) {
		rec, err := s.rd.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, flightError("read", s.uri, err)
		}
		if err := ValidateBatch(rec); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInput, s.uri, err)
		}
		// The reader reuses its batch on the next Read: keep our own.
		rec.Retain()
		return rec, nil
	})
}

func (s *flightSource) close() error {
	s.cut.release()
	s.rd.Release()
	s.cancel()
	return s.client.Close()
}
