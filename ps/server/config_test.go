package server

import (
	"testing"
	"time"

	"github.com/spindle-ml/spindle/ps"
)

// TestConfigTimeouts: the server's timeouts are its configuration's, with
// the documented defaults for zero.
func TestConfigTimeouts(t *testing.T) {
	ring, err := ps.NewRing(1, []string{"127.0.0.1:1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                string
		in                  Config
		wait, rejoin, probe time.Duration
	}{
		{"defaults", Config{}, 10 * time.Minute, 2 * time.Minute, time.Second},
		{"set", Config{WaitTimeout: time.Minute, RejoinTimeout: 3 * time.Second, ProbeTimeout: 50 * time.Millisecond},
			time.Minute, 3 * time.Second, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.in
			cfg.Ring, cfg.Workers = ring, 1
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.CloseDataLink()
			if c := s.cfg; c.WaitTimeout != tc.wait || c.RejoinTimeout != tc.rejoin || c.ProbeTimeout != tc.probe {
				t.Fatalf("wait %v, rejoin %v, probe %v; want %v, %v, %v", c.WaitTimeout, c.RejoinTimeout, c.ProbeTimeout, tc.wait, tc.rejoin, tc.probe)
			}
		})
	}
}
