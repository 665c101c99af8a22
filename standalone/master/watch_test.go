package master

import (
	"testing"
	"time"
)

func TestWorkerGone(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const grace = time.Second
	tests := []struct {
		name       string
		down, seen time.Duration // after t0; down < 0: the connection is up
		now        time.Duration
		ready      bool
		grace      time.Duration
		want       bool
	}{
		{name: "connection up", down: -1, seen: 0, now: 10 * time.Second, grace: grace},
		{name: "down and silent past the grace", down: 0, seen: -time.Second / 2, now: grace, grace: grace, want: true},
		{name: "down within the grace", down: 0, seen: -time.Second, now: grace / 2, grace: grace},
		{name: "reconnected", down: 0, seen: -time.Second, now: 2 * grace, ready: true, grace: grace},
		{name: "down but heartbeating", down: 0, seen: 1500 * time.Millisecond, now: 2 * grace, grace: grace},
		{name: "down, heartbeat stopped later", down: 0, seen: time.Second, now: 2 * grace, grace: grace, want: true},
		{name: "turned off", down: 0, seen: -time.Hour, now: time.Hour, grace: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var down time.Time
			if tt.down >= 0 {
				down = t0.Add(tt.down)
			}
			if got := workerGone(down, t0.Add(tt.seen), t0.Add(tt.now), tt.ready, tt.grace); got != tt.want {
				t.Errorf("workerGone = %v, want %v", got, tt.want)
			}
		})
	}
}
