package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

var registeredRE = regexp.MustCompile(`msg="executor registered".* transport="([^"]+)"`)

// TestJobTLS: with spindle.job.tls.enabled a local job's executors reach
// their driver over mutual TLS with the job's certificates, which nobody
// handed them, and the job runs as without; without it they register in
// plain text.
func TestJobTLS(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 1000, 2)
	for _, tc := range []struct {
		enabled string
		want    string
	}{
		{"true", "mutual TLS 1.3 (spindle-executor)"},
		{"false", "plain text"},
	} {
		t.Run("enabled="+tc.enabled, func(t *testing.T) {
			r := spindle(t, data, submitArgs("--conf", "spindle.log.level=info", "--conf", "spindle.job.tls.enabled="+tc.enabled,
				"--num-executors", "2", "--input", data, "--batch-rows", "100", "--", feedcheckBin)...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			if got := len(parseFeedcheck(t, r.stdout)); got != 2 {
				t.Fatalf("%d ranks reported their feed, want 2:\n%s", got, r)
			}
			regs := registeredRE.FindAllStringSubmatch(r.stderr, -1)
			if len(regs) != 2 {
				t.Fatalf("%d executors registered, want 2:\n%s", len(regs), r)
			}
			for _, m := range regs {
				if m[1] != tc.want {
					t.Errorf("an executor registered over %q, want %q", m[1], tc.want)
				}
			}
			if strings.Contains(r.stderr+r.stdout, "BEGIN EC PRIVATE KEY") {
				t.Error("the executors' key appears in the job's output")
			}
		})
	}
}

// TestJobTLSRefusesStrangers: the control plane of a job with
// spindle.job.tls.enabled refuses, in the handshake, a plain-text client,
// a TLS client without a certificate and one with another job's; and an
// executor of another job does not accept this driver.
func TestJobTLSRefusesStrangers(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 200, 1)
	pids := t.TempDir()
	cmd := exec.Command(spindleBin, "submit", "--conf", "spindle.job.tls.enabled=true", "--num-executors", "1", "--input", data,
		"--", feedcheckBin, "--hang", "--pid-dir", pids)
	cmd.Dir, cmd.Env = data, testEnv()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	addrRE := regexp.MustCompile(`control plane listening".* addr=(\S+)`)
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the driver's address", func() bool { return addrRE.MatchString(out.String()) }))
	addr := addrRE.FindStringSubmatch(out.String())[1]
	// The job's own executor got in.
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the training process", func() bool { return len(readPids(t, pids)) == 1 }))

	other, err := tlsgen.NewJobCA("another-job")
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := other.ExecutorBundle()
	if err != nil {
		t.Fatal(err)
	}
	otherExecutor, err := tlsgen.ExecutorConfig(bundle)
	if err != nil {
		t.Fatal(err)
	}
	// A plain-text client is refused in the transport, before any call is
	// looked at: not the job secret's Unauthenticated.
	if err := registerWith(addr, insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Errorf("plain text: want a refused connection (Unavailable), got %v", err)
	}
	// Trusts any server, to reach the driver's check of the client, and
	// presents its certificate even though the driver asks for the job
	// CA's.
	trustAny := func(c *tls.Config) *tls.Config {
		c = c.Clone()
		c.InsecureSkipVerify = true
		cert := c.Certificates[0]
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"no client certificate", &tls.Config{InsecureSkipVerify: true}, "certificate required"},
		{"another job's certificate", trustAny(otherExecutor), "unknown certificate authority"},
		{"another job's executor", otherExecutor, "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handshake(addr, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a handshake refused with %q, got %v", tc.want, err)
			}
		})
	}
}

// handshake makes a TLS connection to addr and reads from it: with TLS
// 1.3 the server's refusal of a client certificate arrives after the
// client's side of the handshake, as an alert on the first read.
func handshake(addr string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// registerWith calls the driver's Register over creds, without the job
// secret's signature.
func registerWith(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	_, err = driverpb.NewControlClient(conn).Register(ctx, &driverpb.RegisterRequest{ExecutorId: "exec-0", Host: "127.0.0.1"})
	return err
}
