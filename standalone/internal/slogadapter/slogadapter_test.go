package slogadapter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := New(l, "raft").With("id", "m1").Named("net")
	h.Info("entering follower state", "term", 3)
	h.Debug("hidden")
	h.Warn("heartbeat timeout reached")
	h.Info("initial configuration", "servers", hclog.Fmt("%+v", []int{1, 2}))
	h.StandardLogger(nil).Print("from std logger")
	out := buf.String()
	for _, want := range []string{
		"level=INFO msg=\"entering follower state\" id=m1 logger=raft.net term=3",
		"level=WARN msg=\"heartbeat timeout reached\"",
		"from std logger",
		`servers="[1 2]"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug message emitted at info level:\n%s", out)
	}
	if h.IsDebug() || !h.IsInfo() || h.GetLevel() != hclog.Info {
		t.Errorf("levels: debug %v info %v level %v", h.IsDebug(), h.IsInfo(), h.GetLevel())
	}
	if got := h.ImpliedArgs(); len(got) != 2 || got[0] != "id" {
		t.Errorf("implied args %v", got)
	}
}
