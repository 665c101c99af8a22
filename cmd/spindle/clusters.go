package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/standalone"
)

// newClusterManager builds the cluster manager a master URL names.
func newClusterManager(ctx context.Context, m driver.Master, p *config.Properties, cfg driver.Config, logger *slog.Logger) (driver.ClusterManager, error) {
	switch m.Kind {
	case driver.MasterLocal:
		return driver.NewLocal(driver.LocalConfig{Console: cfg.Console, StopGrace: cfg.StopGrace, Logger: logger, Slots: cfg.NumExecutors})
	case driver.MasterStandalone:
		cc, err := standalone.ClientConfigFromProperties(p, m.Addrs)
		if err != nil {
			return nil, err
		}
		cc.Console = cfg.Console
		cc.Logger = logger
		return standalone.NewClusterManager(ctx, cc)
	case driver.MasterYARN:
		return newYARNClusterManager(ctx, p, logger)
	}
	return nil, errors.New("unknown master kind " + string(m.Kind))
}
