//go:build cgo && linux

package ucx

import (
	"os"
	"testing"
)

// TestRendezvousThreshold checks who changes UCX's rendezvous threshold:
// only the parameter server's sessions over UCX's TCP transport alone,
// never the collectives' link (whose in-place receive moves more with
// UCX's own threshold), and nobody when the user set one.
func TestRendezvousThreshold(t *testing.T) {
	tests := []struct {
		tls, userThresh string
		eagerTCP        bool
		want            string
	}{
		{tls: "tcp", eagerTCP: false, want: ""},
		{tls: "tcp", eagerTCP: true, want: tcpRndvThresh},
		{tls: "sm", eagerTCP: true, want: ""},
		{tls: "tcp,sm", eagerTCP: true, want: ""},
		{tls: "tcp", userThresh: "64k", eagerTCP: true, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.tls+"/"+tc.userThresh, func(t *testing.T) {
			t.Setenv("UCX_TLS", tc.tls)
			t.Setenv("UCX_RNDV_THRESH", tc.userThresh)
			if tc.userThresh == "" {
				os.Unsetenv("UCX_RNDV_THRESH") // t.Setenv restores it
			}
			if got := rndvThresh(tc.eagerTCP); got != tc.want {
				t.Errorf("UCX_TLS=%s UCX_RNDV_THRESH=%q, parameter server %v: threshold %q, want %q",
					tc.tls, tc.userThresh, tc.eagerTCP, got, tc.want)
			}
		})
	}
}
