package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spindle-ml/spindle/driver"
)

// newClusterManager builds the cluster manager a non-local master URL names.
func newClusterManager(ctx context.Context, m driver.Master, cfg driver.Config, logger *slog.Logger) (driver.ClusterManager, error) {
	switch m.Kind {
	case driver.MasterYARN:
		return nil, fmt.Errorf("master yarn: YARN support is not built yet; use local[N] or spindle://")
	}
	return nil, fmt.Errorf("master %s: not supported yet", m.Kind)
}
