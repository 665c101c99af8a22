package liveness

import (
	"testing"
	"time"
)

func TestHeldUp(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const period = 500 * time.Millisecond
	for _, c := range []struct {
		gap, want time.Duration
	}{
		{0, 0}, {period, 0}, {2 * period, 0}, {2100 * time.Millisecond, 1100 * time.Millisecond},
	} {
		if got := HeldUp(t0, t0.Add(c.gap), period); got != c.want {
			t.Errorf("checks %v apart: held up %v, want %v", c.gap, got, c.want)
		}
	}
}

func TestForgive(t *testing.T) {
	now := time.Unix(1000, 0)
	if got := Forgive(now.Add(-2*time.Second), 1100*time.Millisecond, now); now.Sub(got) != 900*time.Millisecond {
		t.Errorf("silent for %v after 1.1 s is forgiven, want 900ms", now.Sub(got))
	}
	if got := Forgive(now.Add(-100*time.Millisecond), time.Second, now); !got.Equal(now) {
		t.Errorf("heard at %v after forgiving, want now (%v) at the latest", got, now)
	}
}
