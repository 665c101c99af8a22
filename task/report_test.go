package task

import (
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
)

func TestReport(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "report.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	t.Setenv(EnvReportSocket, "")
	if err := Report(1, map[string]float64{"loss": 1}); !errors.Is(err, ErrNotSpindle) {
		t.Fatalf("outside spindle: %v, want ErrNotSpindle", err)
	}
	t.Setenv(EnvReportSocket, sock)
	if err := Report(7, map[string]float64{"loss": 0.5, "acc": 0.75}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Step   int64              `json:"step"`
		Values map[string]float64 `json:"values"`
		Time   float64            `json:"time"`
	}
	if err := json.Unmarshal(buf[:n], &got); err != nil {
		t.Fatal(err)
	}
	if got.Step != 7 || got.Values["loss"] != 0.5 || got.Values["acc"] != 0.75 || got.Time <= 0 {
		t.Fatalf("sent %s", buf[:n])
	}

	// A queue nobody reads fills up: reports are dropped, never waited on.
	var dropped bool
	for i := 0; i < 100000 && !dropped; i++ {
		err := Report(int64(i), map[string]float64{"loss": 1})
		switch {
		case errors.Is(err, ErrReportDropped):
			dropped = true
		case err != nil:
			t.Fatal(err)
		}
	}
	if !dropped {
		t.Fatal("a full queue never dropped a report")
	}
}
