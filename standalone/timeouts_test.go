package standalone

import (
	"testing"
	"time"
)

// TestClientTimeoutsDefaults: the driver's bounds on its calls to the
// cluster default to the values they had as literals, in
// DefaultClientConfig and for the zero fields of a ClientConfig built
// field by field, and set ones stay.
func TestClientTimeoutsDefaults(t *testing.T) {
	want := ClientTimeouts{Register: 30 * time.Second, Release: 30 * time.Second, LastOutput: 5 * time.Second,
		LogRead: 5 * time.Second, Close: 15 * time.Second}
	if got := DefaultClientConfig().Timeouts; got != want {
		t.Fatalf("DefaultClientConfig: %+v, want %+v", got, want)
	}
	if got := (ClientTimeouts{}).withDefaults(); got != want {
		t.Fatalf("zero: %+v, want %+v", got, want)
	}
	set := ClientTimeouts{Register: time.Second, Release: 2 * time.Second, LastOutput: 3 * time.Second, LogRead: 4 * time.Second, Close: 5 * time.Second}
	if got := set.withDefaults(); got != set {
		t.Fatalf("set: %+v, want %+v", got, set)
	}
}
