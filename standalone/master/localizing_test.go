package master

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// TestStatusShowsLocalizingRanks: the ranks a driver's heartbeat says are
// still localizing their files show in spindle status beside their
// application, and go once a heartbeat says none are.
func TestStatusShowsLocalizingRanks(t *testing.T) {
	g := startGroup(t, 1, true, nil)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	c := g.client()
	id, err := registerApp(ctx, c, "localizing")
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	heartbeat := func(lines ...string) {
		t.Helper()
		if err := c.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
			_, err := m.AppHeartbeat(ctx, &pb.AppHeartbeatRequest{AppId: id, Localizing: lines})
			return err
		}); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	status := func() (*pb.AppInfo, string) {
		t.Helper()
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		var text bytes.Buffer
		if err := st.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		for _, a := range st.Cluster.GetApps() {
			if a.GetId() == id {
				return a, text.String()
			}
		}
		t.Fatalf("no application %s in status:\n%s", id, text.String())
		return nil, ""
	}

	line := "rank 1 on host-b: localizing: 1048576 of 31457280 bytes"
	heartbeat(line)
	app, text := status()
	if !slices.Equal(app.GetLocalizing(), []string{line}) {
		t.Errorf("status says localizing %q, want %q", app.GetLocalizing(), line)
	}
	if !strings.Contains(text, line) {
		t.Errorf("spindle status does not show %q:\n%s", line, text)
	}

	heartbeat()
	if app, text := status(); len(app.GetLocalizing()) != 0 || strings.Contains(text, "localizing:") {
		t.Errorf("status still shows ranks localizing after a heartbeat with none: %q\n%s", app.GetLocalizing(), text)
	}
}
