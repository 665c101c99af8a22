package yarn

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// How the ApplicationMaster's API is protected: every request is signed
// with the AM secret (auth.Signer over the method, path, query, body, time
// and a nonce, each token good once), so a captured request can neither
// be replayed nor carry another body; with job TLS the API is served over
// HTTPS with a certificate made for the application at submit, which the
// gateway alone trusts. Both the secret and the certificate's key travel
// in the AM's launch credentials (the Plan), never on the wire.

// amTLSName is the name the AM's certificate carries and the gateway
// verifies: the AM runs on whichever node YARN picks.
const amTLSName = "spindle-am"

// amMaxBody bounds a request's body, read before its signature is
// checked (a request without a token, or with one malformed, expired or
// older than the AM, is refused before any is read).
const amMaxBody = 64 << 20

// newAMTLS makes the AM's TLS bundle for application appID: a CA of its
// own, and a server certificate named amTLSName with its key.
func newAMTLS(appID string) (string, error) {
	ca, err := tlsgen.NewJobCA("am " + appID)
	if err != nil {
		return "", fmt.Errorf("spindle.job.tls.enabled: the ApplicationMaster's certificate: %w", err)
	}
	b, err := ca.ServerBundle(amTLSName)
	if err != nil {
		return "", fmt.Errorf("spindle.job.tls.enabled: the ApplicationMaster's certificate: %w", err)
	}
	return b, nil
}

// settingsJobTLS reports whether a cluster-mode job's settings turn job
// TLS on (the last setting of the key wins, as when they were merged).
func settingsJobTLS(settings []string) bool {
	on := false
	for _, kv := range settings {
		if v, ok := strings.CutPrefix(kv, config.KeyJobTLS+"="); ok {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			on = err == nil && b
		}
	}
	return on
}

// amServerTLS returns the AM's TLS settings, nil without job TLS.
func amServerTLS(plan Plan) (*tls.Config, error) {
	if plan.AMTLS == "" {
		return nil, nil
	}
	cfg, err := tlsgen.BundleServerConfig(plan.AMTLS)
	if err != nil {
		return nil, fmt.Errorf("the ApplicationMaster's TLS bundle: %w", err)
	}
	return cfg, nil
}

// newAMClient returns a client of the AM at host:port of the application
// plan describes: over HTTPS, verifying the AM's certificate, when the
// plan has a TLS bundle; timeout bounds each call (0: none).
func newAMClient(plan Plan, host string, port int, timeout time.Duration) (*amClient, error) {
	signer, err := auth.NewSigner(plan.AMSecret)
	if err != nil {
		return nil, fmt.Errorf("the ApplicationMaster's secret: %w", err)
	}
	tr := http.DefaultTransport
	if plan.AMTLS != "" {
		cfg, err := tlsgen.BundleClientConfig(plan.AMTLS, amTLSName)
		if err != nil {
			return nil, fmt.Errorf("the ApplicationMaster's TLS bundle: %w", err)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg
		tr = t
	}
	return &amClient{
		base:   amBase(plan, host, port),
		signer: signer.For(amAudience(plan)),
		http:   &http.Client{Timeout: timeout, Transport: tr},
	}, nil
}

// amAudience is the audience of the AM API's tokens: its application.
func amAudience(plan Plan) string { return "yarn-am " + plan.AppID }

// amBase is the URL of the API of the AM at host:port: https:// with job
// TLS.
func amBase(plan Plan, host string, port int) string {
	scheme := "http"
	if plan.AMTLS != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// listenAM binds the AM's API to host, the address the AM registers with
// the ResourceManager (not every interface), on a free port, with TLS
// when the plan has a bundle.
func listenAM(plan Plan, host string) (net.Listener, error) {
	cfg, err := amServerTLS(plan)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for the driver on %s: %w", host, err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return ln, nil
}
