// Package flighttest serves Arrow record batches over Arrow Flight on
// loopback, for tests of Spindle's Flight inputs: each flight (by path) is
// a list of endpoints, each endpoint a list of batches, behind an optional
// bearer token. It is a real Flight server (arrow-go's), so any Flight
// client reads it.
package flighttest
