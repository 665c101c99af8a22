// Package tlsgen makes certificates for Spindle's mutual TLS.
//
// For a standalone cluster (spindle.cluster.tls.*) it writes a certificate
// authority, and certificates it signs for masters, workers and clients,
// each usable as a server and as a client, as `spindle tls ca` and
// `spindle tls cert` write them. Files are written whole or not at all,
// private keys readable by their owner only, and an existing file is
// never overwritten.
//
// For one job (spindle.job.tls.enabled) it makes a certificate authority
// in memory only (JobCA), the driver's server certificates and the
// executors' client certificate, which travels to them as a PEM bundle
// the way the job's secret does.
//
// Keys are ECDSA P-256.
package tlsgen
