package driver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
)

// TestUIBindHost: spindle.ui.bindHost puts the web UI on that address
// even when the driver's control plane listens on every interface, and
// spindle.ui.token makes it refuse a request without the token.
func TestUIBindHost(t *testing.T) {
	d := &Driver{cfg: Config{UIEnabled: true, UIPort: 0, UIBindHost: "127.0.0.1", UIToken: true, JobID: "job-1"},
		logger: slog.New(slog.DiscardHandler)}
	o := d.startObserver(context.Background())
	defer o.end(nil)
	if o.ui == nil {
		t.Fatal("no web UI")
	}
	addr := o.ui.Addr().(*net.TCPAddr)
	if !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("the web UI listens on %s, want 127.0.0.1 (spindle.ui.bindHost)", addr)
	}
	resp, err := http.Get("http://" + addr.String() + "/api/jobs")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d, want 401", resp.StatusCode)
	}
}
