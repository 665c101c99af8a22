package standalone

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// ClientConfigFromProperties builds a driver's ClientConfig from a job's
// configuration and the masters of its --master spindle:// URL: the
// cluster secret (spindle.cluster.secretFile, spindle.cluster.secret,
// $SPINDLE_CLUSTER_SECRET), TLS files, the gang timeout, the application
// name and driver host.
func ClientConfigFromProperties(p *config.Properties, masters []string) (ClientConfig, error) {
	cfg := DefaultClientConfig()
	cfg.Masters = masters
	secret, err := SecretFromProperties(p)
	if err != nil {
		return cfg, fmt.Errorf("standalone masters %v: %w", masters, err)
	}
	cfg.Secret = secret
	cfg.CertFile, cfg.KeyFile, cfg.CAFile = TLSFilesFromProperties(p)
	cfg.GangTimeout = p.Duration(config.KeyStandaloneGangTimeout)
	cfg.AppName = p.String(config.KeyAppName)
	cfg.DriverHost = p.String(config.KeyDriverHost)
	cfg.HadoopConfDir = p.String(config.KeyHadoopConfDir)
	cfg.KerberosPrincipal = p.String(config.KeyKerberosPrincipal)
	cfg.KerberosKeytab = p.String(config.KeyKerberosKeytab)
	cfg.RenewTokens = p.Bool(config.KeyTokensRenew)
	cfg.PlaintextSecrets = p.Bool(config.KeyClusterPlaintextSecrets)
	cfg.JobTLS = p.Bool(config.KeyJobTLS)
	return cfg, nil
}

// TLSFilesFromProperties returns the certificate, key and CA files of the
// cluster's mutual TLS (spindle.cluster.tls.*); all empty when it is off.
func TLSFilesFromProperties(p *config.Properties) (cert, key, ca string) {
	return p.String(config.KeyClusterTLSCert), p.String(config.KeyClusterTLSKey), p.String(config.KeyClusterTLSCA)
}

// ErrSecretOnCommandLine is returned when the cluster secret was given
// with --conf, where every user of the machine can read it.
var ErrSecretOnCommandLine = errors.New("standalone: the cluster secret must not be given on the command line")

// SecretFromProperties returns the cluster secret from
// spindle.cluster.secretFile, spindle.cluster.secret (from a properties
// file, never --conf) or $SPINDLE_CLUSTER_SECRET.
func SecretFromProperties(p *config.Properties) (string, error) {
	if strings.HasPrefix(p.Source(config.KeyClusterSecret), "--") {
		return "", fmt.Errorf("%w (%s %s shows in process listings); use spindle.cluster.secretFile or $%s",
			ErrSecretOnCommandLine, p.Source(config.KeyClusterSecret), config.KeyClusterSecret, secure.EnvSecret)
	}
	return secure.ResolveSecret(secure.SecretSources{
		File:  p.String(config.KeyClusterSecretFile),
		Value: p.String(config.KeyClusterSecret),
	})
}
