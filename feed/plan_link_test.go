package feed_test

import (
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/plan"
)

// The feed's tests plan their inputs as the driver does (feed.Plan in
// helpers_test.go).
func init() { feed.Plan = plan.Plan }
