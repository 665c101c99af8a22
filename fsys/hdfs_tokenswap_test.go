package fsys

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestTokenSwap: a process reading HDFS with a delegation token from its
// credentials file takes a fresh token written over the file (atomically,
// as an executor does) without a restart: its next call opens a new
// namenode connection with the fresh token, so the old token can be
// cancelled at once, while a file it opened before the swap reads on to
// its end over the old connection. A token that was not replaced stops
// working as soon as a new connection is needed after it was cancelled,
// and the error names the token.
func TestTokenSwap(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	nnKeytab := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKeytab := kdc.AddPrincipal("alice")
	_, conf := startHDFS(t, hdfstest.Config{
		SASL:              hadooprpc.KerberosServer{Keytab: nnKeytab, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm, Superuser: "alice", TokenRenewInterval: time.Hour,
		BlockSize: 64 << 10,
	})
	ctx := testCtx(t)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	gateway := NewResolver(Options{HadoopConfDir: conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKeytab})
	defer gateway.Close()
	gfs, _, err := gateway.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 16<<10) // 256 KiB: four blocks
	writeFile(t, gfs, "/user/alice/big.txt", big)
	writeFile(t, gfs, "/user/alice/small.txt", "small")
	newToken := func() hadooprpc.Token {
		tok, err := gateway.DelegationToken(ctx, "hdfs:///", "alice")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tokFile := filepath.Join(t.TempDir(), "container_tokens")
	writeTokens := func(tok hadooprpc.Token) {
		creds := hadooprpc.NewCredentials()
		creds.Tokens[tok.Service] = tok
		creds.Secrets["kept"] = []byte("x")
		b, err := creds.Marshal(hadooprpc.CredentialsWritable)
		if err != nil {
			t.Fatal(err)
		}
		tmp := tokFile + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, tokFile); err != nil {
			t.Fatal(err)
		}
	}
	first := newToken()
	writeTokens(first)

	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket-cache"))
	exec := NewResolver(Options{HadoopConfDir: conf, TokenFile: tokFile})
	defer exec.Close()
	efs, _, err := exec.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	// A file open before the swap, part read.
	open, err := efs.Open(ctx, "/user/alice/big.txt")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1000)
	if _, err := io.ReadFull(open, head); err != nil {
		t.Fatal(err)
	}

	second := newToken()
	writeTokens(second)
	if err := gateway.CancelDelegationToken(ctx, "hdfs:///", first); err != nil {
		t.Fatal(err)
	}
	// The next call opens a new connection: the first token would be
	// refused now.
	if got := readFile(t, efs, "/user/alice/small.txt"); got != "small" {
		t.Fatalf("after the swap read %q", got)
	}
	rest, err := io.ReadAll(open)
	if err != nil || string(head)+string(rest) != big {
		t.Fatalf("the file open before the swap: %d bytes, %v", len(head)+len(rest), err)
	}
	open.Close()
	if hosts, err := efs.Locations(ctx, "/user/alice/big.txt", 0, 1); err != nil || len(hosts) == 0 {
		t.Fatalf("locations after the swap: %v, %v", hosts, err)
	}

	// The second token cancelled and not replaced: the next connection,
	// opened once the client sat idle longer than
	// ipc.client.connection.maxidletime (shortened here), is refused.
	if err := gateway.CancelDelegationToken(ctx, "hdfs:///", second); err != nil {
		t.Fatal(err)
	}
	efs.(*hdfsFS).cluster.maxIdle = time.Nanosecond
	_, err = efs.Stat(ctx, "/user/alice/small.txt")
	id, _ := hadooprpc.ParseDelegationTokenIdentifier(second.Identifier)
	if err == nil || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("with the cancelled token: %v; want an error naming %s", err, id)
	}
}
