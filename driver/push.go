package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/push"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/observe/metrics"
)

// pushInput is the running endpoint of a flight-put: input.
type pushInput struct {
	srv       *push.Server
	uri       string // grpc://host:port (grpc+tls:// with job TLS), as producers dial it
	advertise string // host:port of uri, which executors dial too
	tokenFile string
	// caFile holds the job CA's certificate producers verify the
	// endpoint with (job TLS only).
	caFile string
	// journal is the directory of the ranks' journals (restart policy
	// only), removed with the endpoint.
	journal string
}

// isPush reports whether the job's input is pushed.
func (c *Config) isPush() bool { return len(c.Inputs) == 1 && feed.IsFlightPutURI(c.Inputs[0]) }

// planPush waits for the job's schema (declared, or the first
// producer's) and plans one stream per rank, starting the job's push
// endpoint first unless run has.
func (d *Driver) planPush(ctx context.Context) (*feed.JobPlan, error) {
	if d.push == nil {
		if err := d.startPush(); err != nil {
			return nil, err
		}
	}
	return d.push.srv.Plan(ctx, d.push.advertise, d.cfg.Columns, d.cfg.LabelColumn)
}

// startPush starts the job's push endpoint (d.push), writes the
// producers' token file and says where producers push.
func (d *Driver) startPush() error {
	c := d.cfg
	listen, err := feed.ParseFlightPutURI(c.Inputs[0])
	if err != nil {
		return err
	}
	host, port := c.ListenHost, "0"
	given := ""
	if listen != "" {
		given, port, _ = net.SplitHostPort(listen)
		if given != "" {
			host = given
		}
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return fmt.Errorf("%w: --input %s: listen for producers on %s: %v", feed.ErrInput, c.Inputs[0], net.JoinHostPort(host, port), err)
	}
	var required []string
	if c.LabelColumn != "" {
		required = append(required, c.LabelColumn)
	}
	required = append(required, c.Columns...)
	// Producers and executors dial the host the input names, or the
	// driver's advertised one.
	tcp := lis.Addr().(*net.TCPAddr)
	adv := net.JoinHostPort(given, strconv.Itoa(tcp.Port))
	if given == "" || tcp.IP.IsUnspecified() {
		if adv, err = advertiseAddr(c.AdvertiseHost, tcp); err != nil {
			lis.Close()
			return err
		}
	}
	var serverTLS *tls.Config
	if d.tls != nil {
		if serverTLS, err = d.tls.pushServerConfig(adv, given); err != nil {
			lis.Close()
			return err
		}
	}
	journal, err := d.pushJournalDir()
	if err != nil {
		lis.Close()
		return err
	}
	producerToken := push.ProducerToken(d.secret, c.JobID)
	srv, err := push.Start(lis, push.Config{
		JournalDir: journal,
		Ranks:      c.NumExecutors, BatchRows: c.BatchRows, EvenBatches: c.EvenBatches,
		Schema: c.FlightPut.Schema, Required: required, Rows: c.FlightPut.Rows, BufferBytes: c.FlightPut.BufferBytes,
		ProducerToken: producerToken, FeedToken: feed.PushFeedToken(d.secret, c.JobID), TLS: serverTLS,
		Logger: d.logger, Turns: c.FlightPut.TurnEpochs > 0,
	})
	if err != nil {
		lis.Close()
		d.removeJournalDir(journal)
		return err
	}
	p := &pushInput{srv: srv, advertise: adv, journal: journal}
	d.push = p
	p.uri = "grpc://" + adv
	if serverTLS != nil {
		p.uri = "grpc+tls://" + adv
	}
	p.tokenFile = c.FlightPut.TokenFile
	if p.tokenFile == "" {
		p.tokenFile = filepath.Join(os.TempDir(), "spindle-"+c.JobID+".flight-put.token")
	}
	var caPEM []byte
	verify := ""
	if serverTLS != nil {
		p.caFile, caPEM = caFileBeside(p.tokenFile), d.tls.ca.CertPEM()
		verify = ", verifying its certificate with the job's CA in " + p.caFile
	}
	if err := writeProducerFiles(p.tokenFile, producerToken, p.caFile, caPEM); err != nil {
		p.tokenFile, p.caFile = "", ""
		return err
	}
	what := "the first producer's schema becomes the job's"
	if c.FlightPut.Schema != nil {
		what = "schema " + schemaSpec(c.FlightPut.Schema)
	}
	end := "DoAction \"" + push.ActionEndOfInput + "\" ends the input"
	if c.FlightPut.TurnEpochs > 0 {
		end = "each session job's rows are its turn T: name the streams turn/T/..., and DoAction \"" + push.ActionEndOfInput + "\" with body T ends it"
	}
	if c.FlightPut.Rows > 0 {
		end = "the input ends after " + strconv.FormatInt(c.FlightPut.Rows, 10) + " rows, or with DoAction \"" + push.ActionEndOfInput + "\""
	}
	msg := fmt.Sprintf("pushed input: producers DoPut Arrow record batches to %s%s (%s), sending \"authorization: Bearer TOKEN\" with the token in %s; %s",
		p.uri, verify, what, p.tokenFile, end)
	if c.Console != nil {
		c.Console.Eprintln(msg)
	}
	d.logger.Info("push endpoint listening", "uri", p.uri, "token_file", p.tokenFile, "ca_file", p.caFile)
	if s, ok := d.cm.(InputShower); ok {
		s.ShowInput(p.uri)
	}
	return nil
}

// validateTurns checks spindle.flight.put.turnEpochs: a warm session's
// pushed input, which neither ends at a row count nor keeps journals.
func (c *Config) validateTurns() error {
	n := c.FlightPut.TurnEpochs
	switch {
	case n == 0:
		return nil
	case !c.isPush():
		return fmt.Errorf("%w: %s=%d: turns are of pushed input (--input flight-put:), which this job does not have", ErrConfig, config.KeyFlightPutTurns, n)
	case c.FlightPut.Rows > 0:
		return fmt.Errorf("%w: %s=%d: each turn ends with its own end-of-input; drop %s", ErrConfig, config.KeyFlightPutTurns, n, config.KeyFlightPutRows)
	case c.FailurePolicy == PolicyRestart:
		return fmt.Errorf("%w: %s=%d: a warm session's pushed rows are not journalled, so its ranks cannot restart; set spindle.failure.policy=fail",
			ErrConfig, config.KeyFlightPutTurns, n)
	case c.Epochs%n != 0:
		return fmt.Errorf("%w: %s=%d: the job's %d epochs are not whole turns", ErrConfig, config.KeyFlightPutTurns, n, c.Epochs)
	}
	return nil
}

// pushTotals are the push endpoint's totals for /metrics.
func (d *Driver) pushTotals() metrics.Push {
	st := d.push.srv.Stats()
	named := make([]metrics.NamedProducer, len(st.Named))
	for i, np := range st.Named {
		named[i] = metrics.NamedProducer{Name: np.Name, Rows: np.Rows, Batches: np.Batches, Open: np.Open}
	}
	return metrics.Push{Rows: st.Rows, Batches: st.Batches, Bytes: st.Bytes, Producers: st.Producers,
		BufferedBytes: st.BufferedBytes, BackpressureSeconds: st.BackpressureWait.Seconds(), Refused: st.RefusedBy,
		Named: named}
}

// stopPush stops the push endpoint, if any, and removes the token file.
func (d *Driver) stopPush() {
	p := d.push
	if p == nil {
		return
	}
	st := p.srv.Stats()
	d.logger.Info("push endpoint closed", "streams", st.Streams, "refused", st.Refused, "rows", st.Rows,
		"ended", st.Ended, "peak_buffered_bytes", st.PeakBufferedBytes)
	if err := p.srv.Close(); err != nil {
		d.logger.Warn("close the push endpoint", "err", err)
	}
	d.removeJournalDir(p.journal)
	if p.tokenFile != "" {
		if err := os.Remove(p.tokenFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.logger.Warn("remove the producers' token file", "path", p.tokenFile, "err", err)
		}
	}
	if p.caFile != "" {
		if err := os.Remove(p.caFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.logger.Warn("remove the producers' CA file", "path", p.caFile, "err", err)
		}
	}
}

// pushJournalDir makes the directory where, under the restart policy,
// the push endpoint keeps every batch sent to each rank (on the driver's
// disk, which outlives the executors): a new generation's executors are
// sent their rank's rows again from there, since producers never send a
// row twice. Other policies keep none ("").
func (d *Driver) pushJournalDir() (string, error) {
	if d.cfg.FailurePolicy != PolicyRestart {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "spindle-"+d.cfg.JobID+".flight-put.journal-")
	if err != nil {
		return "", fmt.Errorf("make the directory for the ranks' journals of pushed rows: %w", err)
	}
	return dir, nil
}

// removeJournalDir removes the ranks' journal directory, if any.
func (d *Driver) removeJournalDir(dir string) {
	if dir == "" {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		d.logger.Warn("remove the ranks' journals of pushed rows", "path", dir, "err", err)
	}
}

// caFileBeside names the CA file beside a token file: NAME.ca.pem for
// NAME.token, else the token file's name with .ca.pem added.
func caFileBeside(tokenFile string) string {
	return strings.TrimSuffix(tokenFile, ".token") + ".ca.pem"
}

// writeProducerFiles writes the CA file (when caFile is set) and then
// the token file. Producers wait for the token file, so by the time it
// appears the CA file beside it is whole: written the other way round, a
// producer (TestFlightPutTLS under load) read the CA file empty. Neither
// file is left when either cannot be written.
func writeProducerFiles(tokenFile, token, caFile string, caPEM []byte) error {
	if caFile != "" {
		if err := writeCAFile(caFile, caPEM); err != nil {
			return err
		}
	}
	if err := writeTokenFile(tokenFile, token); err != nil {
		if caFile != "" {
			os.Remove(caFile)
		}
		return err
	}
	return nil
}

// writeCAFile writes the job CA's certificate to a new file anyone may
// read: it is public, and producers run as other users.
func writeCAFile(path string, pem []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%w: spindle.job.tls.enabled: write the producers' CA file beside spindle.flight.put.tokenFile: %v", ErrConfig, err)
	}
	_, err = f.Write(pem)
	if err == nil {
		// Whatever the umask: producers may run as other users.
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write the producers' CA file %s: %w", path, err)
	}
	return nil
}

// schemaSpec writes a schema as spindle.flight.put.schema takes it.
func schemaSpec(s *arrow.Schema) string {
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + ":" + f.Type.String()
	}
	return strings.Join(parts, ",")
}

// writeTokenFile writes a token to a new file only its owner can read.
func writeTokenFile(path, token string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: spindle.flight.put.tokenFile: write the producers' token: %v", ErrConfig, err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write the producers' token to %s: %w", path, err)
	}
	return nil
}
