package collective

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/syncbuf"
)

func TestParseLinkSpec(t *testing.T) {
	tests := []struct {
		in   string
		want LinkSpec
		bad  bool
	}{
		{in: "", want: LinkSpec{Name: "tcp"}},
		{in: "tcp", want: LinkSpec{Name: "tcp"}},
		{in: "ucx", want: LinkSpec{Name: "ucx"}},
		{in: " ucx:required ", want: LinkSpec{Name: "ucx", Required: true}},
		{in: "ucx:declined", want: LinkSpec{Name: "ucx", Declined: true}},
		{in: "ucx:forced", want: LinkSpec{Name: "ucx", Forced: true}},
		{in: "ucx:often", bad: true},
		{in: "tcp:required", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLinkSpec(tc.in)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), EnvLink) {
					t.Fatalf("got %v, %v; want an error naming %s", got, err, EnvLink)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			if back, _ := ParseLinkSpec(got.String()); back != got {
				t.Fatalf("%q does not round-trip: %+v", got.String(), back)
			}
		})
	}
}

// fakeLinker stands for a registered link kind.
type fakeLinker struct{ spec LinkSpec }

func (fakeLinker) Name() string { return "fake" }
func (f fakeLinker) Link(ctx context.Context, s LinkSetup) (Link, error) {
	return DecliningLinker{Kind: "fake", Why: "a test", TCP: f.spec.TCP}.Link(ctx, s)
}

func TestLinkFromEnv(t *testing.T) {
	RegisterLinker("fake", func(s LinkSpec) (Linker, error) { return fakeLinker{s}, nil })
	base := map[string]string{EnvRank: "0", EnvWorldSize: "1", EnvPeers: "127.0.0.1:7000"}
	tests := []struct {
		link    string
		want    string // the Linker's type; "" is nil (TCP)
		errWant string
	}{
		{link: "", want: ""},
		{link: "tcp", want: ""},
		{link: "fake:required", want: "collective.fakeLinker"},
		// A kind this program lacks negotiates without offering it, so the
		// ranks that have it still agree with this one.
		{link: "ucx", want: "collective.DecliningLinker"},
		{link: "ucx:declined", want: "collective.DecliningLinker"},
		{link: "ucx:required", errWant: EnvLink + "=ucx:required: this program has no ucx link"},
		{link: "ucx:sometimes", errWant: EnvLink},
	}
	for _, tc := range tests {
		t.Run(tc.link, func(t *testing.T) {
			env := map[string]string{EnvLink: tc.link}
			for k, v := range base {
				env[k] = v
			}
			cfg, err := configFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if tc.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errWant) {
					t.Fatalf("got %v, want an error saying %q", err, tc.errWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if cfg.Link != nil {
				got = strings.TrimPrefix(typeName(cfg.Link), "*")
			}
			if got != tc.want {
				t.Fatalf("linker %q, want %q", got, tc.want)
			}
		})
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// TestNegotiatedLinks runs operations over links that negotiated and fell
// back to TCP, alone and beside a rank that offered a kind the others
// decline.
func TestNegotiatedLinks(t *testing.T) {
	offering := offerOnly{}
	tests := []struct {
		name   string
		linker func(rank int) Linker
	}{
		{"all decline", func(int) Linker { return DecliningLinker{Kind: "ucx", Why: "test"} }},
		{"one offers", func(r int) Linker {
			if r == 1 {
				return offering
			}
			return DecliningLinker{Kind: "ucx", Why: "test"}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms := cluster(t, 3, func(r int, cfg *Config) { cfg.Link = tc.linker(r) })
			bufs := make([][]float64, 3)
			errs := onAll(t, comms, func(c *Comm) error {
				bufs[c.Rank()] = []float64{float64(c.Rank()), 1}
				return AllReduce(context.Background(), c, bufs[c.Rank()], Sum)
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if bufs[r][0] != 3 || bufs[r][1] != 3 {
					t.Fatalf("rank %d: %v, want [3 3]", r, bufs[r])
				}
			}
		})
	}
}

// offerOnly offers a kind on every stream and, when the peer declines,
// falls back to TCP, as a registered kind must.
type offerOnly struct{}

func (offerOnly) Name() string { return "ucx" }
func (offerOnly) Link(ctx context.Context, s LinkSetup) (Link, error) {
	outs, ins, err := Negotiate(ctx, s, Offer{Name: "ucx", Payload: []byte("address")})
	if err != nil {
		s.CloseStreams()
		return nil, err
	}
	for _, o := range append(outs, ins...) {
		if o.Name != "" || (o.Why != "" && o.Why != "test") {
			s.CloseStreams()
			return nil, fmt.Errorf("unexpected offer %+v", o)
		}
	}
	return TCPLinker{}.Link(ctx, s)
}

// TestDecliningLinkerSaysTCPInsteadOfKind: a rank that keeps to TCP logs
// "data link is tcp instead of ucx" with the reason, never a "selected=ucx"
// beside "tcp", which read as a contradiction.
func TestDecliningLinkerSaysTCPInsteadOfKind(t *testing.T) {
	var out syncbuf.Buffer
	comms := cluster(t, 2, func(r int, cfg *Config) {
		cfg.Link = DecliningLinker{Kind: "ucx", Why: "no usable RDMA device on this rank"}
		cfg.Logger = slog.New(slog.NewTextHandler(&out, nil))
	})
	if len(comms) != 2 {
		t.Fatalf("%d ranks", len(comms))
	}
	log := out.String()
	if n := len(regexp.MustCompile(`msg="data link is tcp instead of ucx" .*reason="no usable RDMA device on this rank"`).FindAllString(log, -1)); n != 2 {
		t.Errorf("want both ranks to say they keep to tcp instead of ucx, got %d:\n%s", n, log)
	}
	if strings.Contains(log, "selected=ucx") {
		t.Errorf("a rank says ucx was selected while it keeps to tcp:\n%s", log)
	}
}
