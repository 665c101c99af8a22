// Package metrics holds Spindle's Prometheus metrics: the names, units and
// labels each daemon exports at /metrics, following Prometheus's naming
// conventions (a spindle_ prefix, base units, _total on counters, labels
// with a small fixed set of values).
//
// Nothing registers itself: every constructor takes the registry it
// registers into, and the daemon that owns the registry serves it.
package metrics
