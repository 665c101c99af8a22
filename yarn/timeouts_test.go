package yarn

import (
	"testing"
	"time"
)

// TestTimeoutsDefaults: the gateway's bounds default to the values they
// had as literals, in DefaultConfig and for the zero fields of a Config
// built field by field, and set ones stay.
func TestTimeoutsDefaults(t *testing.T) {
	want := Timeouts{Connect: 30 * time.Second, RMCall: 10 * time.Second, TokenFetch: 30 * time.Second,
		TokenCancel: 10 * time.Second, Close: time.Minute, AMCall: 10 * time.Second, Follow: 15 * time.Second, Interrupt: 2 * time.Minute}
	if got := DefaultConfig().Timeouts; got != want {
		t.Fatalf("DefaultConfig: %+v, want %+v", got, want)
	}
	if got := (Timeouts{}).withDefaults(); got != want {
		t.Fatalf("zero: %+v, want %+v", got, want)
	}
	set := Timeouts{Connect: time.Second, RMCall: 2 * time.Second, TokenFetch: 3 * time.Second,
		TokenCancel: 4 * time.Second, Close: 5 * time.Second, AMCall: 6 * time.Second, Follow: 7 * time.Second, Interrupt: 8 * time.Second}
	if got := set.withDefaults(); got != set {
		t.Fatalf("set: %+v, want %+v", got, set)
	}
}
