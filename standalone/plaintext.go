package standalone

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
)

// checkSecretsChannel refuses to send a job's key material (its secret,
// its TLS bundle with the executors' private key, delegation tokens) to
// masters on other hosts over plain text, unless PlaintextSecrets allows
// it, in which case it warns once. Masters on loopback are reached
// without crossing the network; cluster TLS protects every other link.
func checkSecretsChannel(cfg ClientConfig, logger *slog.Logger) error {
	var remote []string
	for _, m := range cfg.Masters {
		if !loopback(m) {
			remote = append(remote, m)
		}
	}
	if len(remote) == 0 {
		return nil
	}
	// Executors on the masters' hosts get delegation tokens from the
	// driver as they register, over job TLS or nothing.
	if cfg.RenewTokens && !cfg.JobTLS {
		if !cfg.PlaintextSecrets {
			return fmt.Errorf("%w: spindle.security.tokens.renew hands the job's delegation tokens to executors on other hosts, in plain text without job TLS: set spindle.job.tls.enabled=true or accept the risk with spindle.cluster.plaintextSecrets=true", ErrConfig)
		}
		logger.Warn("the job's delegation tokens reach its executors in plain text: job TLS is off (spindle.cluster.plaintextSecrets=true)")
	}
	if cfg.CertFile != "" && cfg.KeyFile != "" && cfg.CAFile != "" {
		return nil
	}
	if !cfg.PlaintextSecrets {
		return fmt.Errorf("%w: cluster TLS (spindle.cluster.tls.*) is off, so the job's secret, TLS bundle and delegation tokens would cross the network to the masters %s in plain text: turn it on (spindle tls makes the certificates) or accept the risk with spindle.cluster.plaintextSecrets=true",
			ErrConfig, strings.Join(remote, ","))
	}
	logger.Warn("the job's secret, TLS bundle and delegation tokens cross the network in plain text: cluster TLS is off (spindle.cluster.plaintextSecrets=true)",
		"masters", strings.Join(remote, ","))
	return nil
}

// loopback says whether the master address addr (host:port) is on this
// host's loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
