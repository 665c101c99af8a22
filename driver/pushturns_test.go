package driver

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateTurns: a warm session's pushed input is refused, naming
// spindle.flight.put.turnEpochs, with what it cannot go with.
func TestValidateTurns(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"pushed", func(c *Config) {}, ""},
		{"files", func(c *Config) { c.Inputs = []string{"data/x.parquet"} }, "(--input flight-put:), which this job does not have"},
		{"rows", func(c *Config) { c.FlightPut.Rows = 100 }, "drop spindle.flight.put.rows"},
		{"restart", func(c *Config) { c.FailurePolicy = PolicyRestart }, "spindle.failure.policy=fail"},
		{"part turn", func(c *Config) { c.Epochs = 7 }, "not whole turns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Inputs, c.Epochs, c.FlightPut.TurnEpochs = []string{"flight-put:"}, 6, 3
			tc.edit(&c)
			err := c.validateTurns()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "spindle.flight.put.turnEpochs") {
				t.Fatalf("got %v, want an ErrConfig naming spindle.flight.put.turnEpochs and %q", err, tc.want)
			}
		})
	}
}
