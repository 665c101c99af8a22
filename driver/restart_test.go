package driver

import (
	"slices"
	"testing"
)

// TestHostExclusion: a host is kept out once the job failed there max
// times; blameless losses, unknown hosts and max 0 never count.
func TestHostExclusion(t *testing.T) {
	bad := func(host string) *lossError { return &lossError{msg: "x", host: host} }
	tests := []struct {
		name   string
		max    int
		losses []*lossError
		want   []string
	}{
		{"twice on one host", 2, []*lossError{bad("w1"), bad("w2"), bad("w1")}, []string{"w1"}},
		{"once is not enough", 2, []*lossError{bad("w1"), bad("w2")}, nil},
		{"blameless losses do not count", 1, []*lossError{{host: "w1", blameless: true}}, nil},
		{"no host", 1, []*lossError{bad(""), nil}, nil},
		{"off", 0, []*lossError{bad("w1"), bad("w1")}, nil},
		{"listed once", 1, []*lossError{bad("w1"), bad("w1")}, []string{"w1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := restartCounts{hostFailures: map[string]int{}}
			for _, l := range tt.losses {
				rc.failedOn(l, tt.max)
			}
			if !slices.Equal(rc.excluded, tt.want) {
				t.Fatalf("excluded %v, want %v", rc.excluded, tt.want)
			}
		})
	}
}
