package tlsgen

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// serveOnce accepts connections on a TLS listener with cfg until it is
// closed, writing "hello" on each that completes its handshake.
func serveOnce(t *testing.T, cfg *tls.Config) (addr string) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			if err := c.(*tls.Conn).Handshake(); err == nil {
				_, _ = c.Write([]byte("hello"))
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { lis.Close(); wg.Wait() })
	return lis.Addr().String()
}

// dial completes a handshake and reads the server's greeting: with TLS
// 1.3 a refused client certificate shows only on the first read.
func dial(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != "hello" {
		return errors.New("no greeting: " + string(b))
	}
	return nil
}

// TestJobMutualTLS: a job's executor bundle carries a real mutual TLS
// handshake with its driver's server; clients without the job's
// certificate, or with another job's, are refused, and an executor does
// not accept another job's driver.
func TestJobMutualTLS(t *testing.T) {
	ca, err := NewJobCA("job-1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewJobCA("job-2")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerConfig(nil, tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOnce(t, server)
	otherServer, err := other.ServerConfig(nil, tls.RequireAndVerifyClientCert)
	if err != nil {
		t.Fatal(err)
	}
	otherAddr := serveOnce(t, otherServer)

	bundle, err := ca.ExecutorBundle()
	if err != nil {
		t.Fatal(err)
	}
	exec, err := ExecutorConfig(bundle)
	if err != nil {
		t.Fatal(err)
	}
	otherBundle, _ := other.ExecutorBundle()
	otherExec, err := ExecutorConfig(otherBundle)
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: ca.Pool(), ServerName: DriverName, MinVersion: tls.VersionTLS13}
	for _, tc := range []struct {
		name string
		addr string
		cfg  *tls.Config
		want string // "" accepted, else part of the error
	}{
		{"executor of the job", addr, exec, ""},
		{"no client certificate", addr, noCert, "certificate required"},
		{"another job's executor", addr, otherExec, "certificate"},
		{"another job's driver", otherAddr, exec, "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dial(tc.addr, tc.cfg.Clone())
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("accepted")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestExecutorBundleRefusesBadInput: a bundle missing a part, or whose
// certificate another CA signed, is refused with ErrBadBundle.
func TestExecutorBundleRefusesBadInput(t *testing.T) {
	ca, _ := NewJobCA("job-1")
	other, _ := NewJobCA("job-2")
	good, _ := ca.ExecutorBundle()
	otherGood, _ := other.ExecutorBundle()
	blocks := strings.SplitAfter(good, "-----END CERTIFICATE-----\n")
	otherBlocks := strings.SplitAfter(otherGood, "-----END CERTIFICATE-----\n")
	for name, b := range map[string]string{
		"empty":          "",
		"no key":         blocks[0] + blocks[1],
		"no CA":          blocks[1] + blocks[2],
		"mixed CAs":      blocks[0] + otherBlocks[1] + otherBlocks[2],
		"not PEM at all": "secret",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ExecutorConfig(b); !errors.Is(err, ErrBadBundle) {
				t.Fatalf("got %v, want ErrBadBundle", err)
			}
		})
	}
}

// TestServerNamesHosts: a server certificate names the hosts producers
// dial besides DriverName, and is for servers only.
func TestServerNamesHosts(t *testing.T) {
	ca, _ := NewJobCA("job-1")
	cfg, err := ca.ServerConfig([]string{"127.0.0.1", "gw.example"}, tls.NoClientCert)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cfg.Certificates[0]
	c, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{DriverName, "gw.example", "127.0.0.1"} {
		if err := c.VerifyHostname(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("server certificate usage %v, want server auth only", c.ExtKeyUsage)
	}
}
