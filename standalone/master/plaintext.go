package master

import (
	"fmt"
	"net"

	"github.com/spindle-ml/spindle/internal/secretfd"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
)

// checkLaunchChannel refuses to send a launch that carries a job's
// secrets (its secret, its TLS bundle) to a worker on another host in
// plain text: without cluster TLS, only loopback workers, or
// PlaintextSecrets, may get them.
func (m *Master) checkLaunchChannel(addr, worker string, env map[string]string) error {
	if secrets, _ := secretfd.Split(env); len(secrets) == 0 || m.cfg.TLS.Enabled() || m.cfg.PlaintextSecrets {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("%w: worker %s at %s is reached in plain text and the launch carries the job's secrets: turn on cluster TLS (spindle.cluster.tls.*) or set spindle.cluster.plaintextSecrets=true on the masters",
		apierr.ErrLaunch, worker, addr)
}
