// Package secure holds the security settings shared by the standalone
// cluster's masters, workers, drivers and admin commands: the cluster
// secret every gRPC call is signed with (internal/auth), and optional
// mutual TLS when certificate files are configured.
package secure
