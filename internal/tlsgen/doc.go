// Package tlsgen makes the certificates of a standalone cluster's mutual
// TLS (spindle.cluster.tls.*): a certificate authority, and certificates
// it signs for masters, workers and clients, each usable as a server and
// as a client, as `spindle tls ca` and `spindle tls cert` write them.
//
// Keys are ECDSA P-256. Files are written whole or not at all, private
// keys readable by their owner only, and an existing file is never
// overwritten.
package tlsgen
