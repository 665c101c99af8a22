package plan

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"

	"github.com/spindle-ml/spindle/feed"

	"github.com/spindle-ml/spindle/feed/internal/feedtest"
)

// A namenode that cannot be reached is not bad input: planning retries
// within its bound and then reports ErrUnavailable, never ErrInput.
func TestPlanNamenodeDownIsUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused

	t.Setenv("HADOOP_CONF_DIR", "")
	res := fsys.NewResolver(fsys.Options{User: "tester"})
	defer res.Close()
	_, err = Plan(context.Background(), res, feed.PlanRequest{Inputs: []string{"hdfs://" + addr + "/data"}, Ranks: 1,
		RetryUnavailable: time.Second})
	if !errors.Is(err, feed.ErrUnavailable) || errors.Is(err, feed.ErrInput) {
		t.Fatalf("err = %v, want ErrUnavailable and not ErrInput", err)
	}
}

// A namenode down for a moment while planning starts: planning retries
// and succeeds once it is back.
func TestPlanRetriesABriefOutage(t *testing.T) {
	c, _, hfs := newTestHDFS(t)
	ctx := context.Background()

	// Write the input through the namenode itself.
	local := feedtest.WriteParquet(t, filepath.Join(t.TempDir(), "a.parquet"), feedtest.Schema, 0, 100, 10)
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	upload(t, hfs, "/in/a.parquet", data)

	// The job names the namenode by an address that refuses connections
	// for a while, then forwards to it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front := ln.Addr().String()
	ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := make(chan struct{})
	defer close(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-stop:
			return
		case <-time.After(1500 * time.Millisecond):
		}
		forward(t, front, c.Addr(), stop, &wg)
	}()

	planRes := fsys.NewResolver(fsys.Options{})
	defer planRes.Close()
	plan, err := Plan(ctx, planRes, feed.PlanRequest{Inputs: []string{"hdfs://" + front + "/in"}, Ranks: 2, RetryUnavailable: 30 * time.Second})
	if err != nil {
		t.Fatalf("planning through a brief outage: %v", err)
	}
	if plan.TotalRows != 100 {
		t.Fatalf("planned %d rows, want 100", plan.TotalRows)
	}
}

// forward listens on addr and copies every connection to and from to,
// until stop closes.
func forward(t *testing.T, addr, to string, stop chan struct{}, wg *sync.WaitGroup) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("listen on %s again: %v", addr, err)
		return
	}
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-stop
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", to)
		if err != nil {
			in.Close()
			continue
		}
		mu.Lock()
		conns = append(conns, in, out)
		mu.Unlock()
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
		go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
	}
}

// newTestHDFS starts the protocol-level HDFS for tb, reached as its
// superuser without a Hadoop configuration, and returns it, a resolver
// closed with tb, and the file system at its root.
func newTestHDFS(tb testing.TB) (*hdfstest.Cluster, *fsys.Resolver, fsys.FS) {
	tb.Helper()
	c := hdfstest.NewTestCluster(tb, hdfstest.Config{})
	tb.Setenv("HADOOP_CONF_DIR", "")
	tb.Setenv("HADOOP_USER_NAME", c.Superuser())
	res := fsys.NewResolver(fsys.Options{})
	tb.Cleanup(func() { res.Close() })
	hfs, _, err := res.Resolve(context.Background(), "hdfs://"+c.Addr()+"/")
	if err != nil {
		tb.Fatal(err)
	}
	return c, res, hfs
}

// upload writes data to name on an HDFS file system.
func upload(t testing.TB, hfs fsys.FS, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	if err := hfs.MkdirAll(ctx, filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	w, err := hfs.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// Recursive listing of partition directories and brace globs work on
// HDFS as on local files.
func TestPlanHDFSPartitionsAndBraces(t *testing.T) {
	c, res, hfs := newTestHDFS(t)
	root := "hdfs://" + c.Addr()
	upload(t, hfs, "/t/dt=1/part-0.csv", []byte(feedtest.CSVText(0, 10, true)))
	upload(t, hfs, "/t/dt=2/part-1.csv", []byte(feedtest.CSVText(10, 10, true)))
	upload(t, hfs, "/t/_temporary/part-2.csv", []byte(feedtest.CSVText(20, 10, true)))
	for _, in := range []string{root + "/t", root + "/t/dt={1,2}/part-*.csv", root + "/t/dt=*/part-{0,1}.csv"} {
		plan, err := Plan(context.Background(), res, feed.PlanRequest{Inputs: []string{in}, Ranks: 2})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if len(plan.Files) != 2 || plan.TotalRows != 20 {
			t.Fatalf("%s: planned %v, want the 2 partition files", in, plan.Files)
		}
	}
}

// A namenode that requires more hadoop.rpc.protection than the client is
// configured for is bad input (exit 2 at submit), not an outage to retry.
func TestPlanProtectionMismatchIsInput(t *testing.T) {
	id := hadooprpc.DelegationTokenIdentifier{Owner: "alice", Renewer: "yarn", IssueDate: time.Now(), MaxDate: time.Now().Add(time.Hour), SequenceNumber: 1}.Marshal()
	tok := hadooprpc.Token{Identifier: id, Password: []byte("pw"), Kind: hadooprpc.KindHDFSDelegationToken}
	c := hdfstest.NewTestCluster(t, hdfstest.Config{SASL: hadooprpc.TokenServer{
		Lookup: func([]byte) ([]byte, string, error) { return tok.Password, "alice", nil }, Protection: "privacy"}})
	tok.Service = c.Addr()
	creds := hadooprpc.NewCredentials()
	creds.Tokens[tok.Service] = tok
	b, err := creds.Marshal(hadooprpc.CredentialsProtobuf)
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", "")
	res := fsys.NewResolver(fsys.Options{TokenFile: tokFile})
	defer res.Close()
	_, err = Plan(context.Background(), res, feed.PlanRequest{Inputs: []string{"hdfs://" + c.Addr() + "/data"}, Ranks: 1, RetryUnavailable: time.Minute})
	if !errors.Is(err, feed.ErrInput) || errors.Is(err, feed.ErrUnavailable) || !strings.Contains(err.Error(), "requires hadoop.rpc.protection privacy") {
		t.Fatalf("err = %v, want ErrInput naming hadoop.rpc.protection", err)
	}
}
