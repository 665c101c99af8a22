package driver

import (
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/config"
)

func TestDefaultConfigFollowsKeyTable(t *testing.T) {
	c := DefaultConfig()
	if c.NumExecutors != 2 || c.BatchRows != 1024 || c.MemoryBudget != 256<<20 || c.EvenBatches != feed.EvenPad ||
		c.HeartbeatTimeout != 6*time.Second || c.ListenHost != "127.0.0.1" || c.CSV.Delimiter != 0 || !c.CSV.Header {
		t.Fatalf("DefaultConfig = %+v", c)
	}
}

func TestConfigFromProperties(t *testing.T) {
	load := func(conf ...string) *config.Properties {
		p, _, err := config.Load(config.Sources{Overrides: conf})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, m, err := ConfigFromProperties(load("spindle.master=local[3]", "spindle.feed.memoryBudget=64m"))
	if err != nil || m.Kind != MasterLocal || c.NumExecutors != 3 || c.MemoryBudget != 64<<20 {
		t.Fatalf("got %+v %+v %v", c, m, err)
	}
	c, _, err = ConfigFromProperties(load("spindle.master=spindle://m1:7077"))
	if err != nil || c.ListenHost != "0.0.0.0" {
		t.Fatalf("a cluster driver listens on %q (%v)", c.ListenHost, err)
	}
	for conf, want := range map[string]string{
		"spindle.input.csv.delimiter=;;": "must be one character",
		"spindle.master=mesos://x":       "unknown master URL",
		"spindle.executor.instances=4":   "disagree on the number of executors",
	} {
		overrides := []string{conf}
		if strings.HasPrefix(conf, "spindle.executor") {
			overrides = append(overrides, "spindle.master=local[2]")
		}
		if _, _, err := ConfigFromProperties(load(overrides...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", conf, err, want)
		}
	}
}
