package main

import (
	"slices"
	"testing"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/standalone"
	"github.com/spindle-ml/spindle/yarn"
	"github.com/spindle-ml/spindle/yarn/am"
)

// TestClusterManagerCapabilities lists which cluster manager offers which
// optional capability to the driver. A manager that loses one (a method
// renamed, a signature changed) fails here rather than silently running
// jobs without it: an elastic job that never grows, a tracking URL YARN
// never shows. docs/architecture.md draws the same table.
func TestClusterManagerCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		cm   driver.ClusterManager
		want []driver.Capability
	}{
		{"local", &driver.Local{}, []driver.Capability{driver.CapRoom, driver.CapFileSharing, driver.CapOutput}},
		{"standalone", (*standalone.ClusterManager)(nil), []driver.Capability{
			driver.CapRoom, driver.CapOutput, driver.CapInput, driver.CapLocalizing, driver.CapNodeNames, driver.CapCredentials, driver.CapJobID}},
		{"yarn client mode", (*yarn.ClusterManager)(nil), []driver.Capability{
			driver.CapRoom, driver.CapTrackingURL, driver.CapProgress, driver.CapCredentials, driver.CapJobID}},
		{"yarn cluster mode (the AM's allocator)", (*am.Allocator)(nil), []driver.Capability{
			driver.CapRoom, driver.CapTrackingURL, driver.CapProgress}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := driver.Capabilities(tc.cm); !slices.Equal(got, tc.want) {
				t.Errorf("capabilities:\n got  %v\n want %v", got, tc.want)
			}
		})
	}
}
