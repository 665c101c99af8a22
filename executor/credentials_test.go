package executor

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/syncbuf"
)

func testToken(seq int32, service string) hadooprpc.Token {
	id := hadooprpc.DelegationTokenIdentifier{Owner: "alice", Renewer: "alice", IssueDate: time.Unix(100, 0), MaxDate: time.Unix(200, 0), SequenceNumber: seq}
	return hadooprpc.Token{Identifier: id.Marshal(), Password: []byte("pw-" + service), Kind: hadooprpc.KindHDFSDelegationToken, Service: service}
}

func credsBlob(t *testing.T, version byte, tokens ...hadooprpc.Token) []byte {
	t.Helper()
	c := hadooprpc.NewCredentials()
	for _, tok := range tokens {
		c.Tokens[tok.Service] = tok
	}
	b, err := c.Marshal(version)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestApplyCredentials: fresh tokens from the driver replace the tokens
// for the same services in the executor's credentials file, which keeps
// its other tokens, its secrets, its layout and its mode; the file is
// replaced whole (no temporary file left), an older or equal generation
// changes nothing, and the log names services, never passwords.
func TestApplyCredentials(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version byte
		preset  bool // the container's file exists ($HADOOP_TOKEN_FILE_LOCATION)
	}{
		{"writable file", hadooprpc.CredentialsWritable, true},
		{"protobuf file", hadooprpc.CredentialsProtobuf, true},
		{"no file", hadooprpc.CredentialsWritable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "container_tokens")
			if tc.preset {
				c := hadooprpc.NewCredentials()
				c.Tokens["10.0.0.1:8020"] = testToken(1, "10.0.0.1:8020")
				c.Tokens["10.0.0.2:8020"] = testToken(2, "10.0.0.2:8020")
				c.Secrets["SPINDLE_ENV_SPINDLE_JOB_SECRET"] = []byte("job-secret")
				b, err := c.Marshal(tc.version)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, b, 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv(hadooprpc.EnvTokenFile, path)
			} else {
				t.Setenv(hadooprpc.EnvTokenFile, "")
				t.Chdir(dir)
				path = filepath.Join(dir, ".spindle", tokenFileName)
			}
			var logs syncbuf.Buffer
			e := &Executor{logger: slog.New(slog.NewTextHandler(&logs, nil))}
			e.takeCredentials(&driverpb.Credentials{Generation: 2, File: credsBlob(t, hadooprpc.CredentialsWritable, testToken(7, "10.0.0.1:8020"))})
			if got := e.credGen.Load(); got != 2 {
				t.Fatalf("generation %d after the update, want 2:\n%s", got, logs.String())
			}
			if got := os.Getenv(hadooprpc.EnvTokenFile); got != path {
				t.Fatalf("%s is %q, want %q", hadooprpc.EnvTokenFile, got, path)
			}
			creds, err := hadooprpc.ReadCredentialsFile(path)
			if err != nil {
				t.Fatal(err)
			}
			id, _ := hadooprpc.ParseDelegationTokenIdentifier(creds.Tokens["10.0.0.1:8020"].Identifier)
			if id.SequenceNumber != 7 {
				t.Errorf("the token for 10.0.0.1:8020 is %s, want the fresh one (7)", id)
			}
			if tc.preset {
				if _, ok := creds.Tokens["10.0.0.2:8020"]; !ok {
					t.Errorf("the token of another cluster went")
				}
				if string(creds.Secrets["SPINDLE_ENV_SPINDLE_JOB_SECRET"]) != "job-secret" {
					t.Errorf("the job's secret went")
				}
				b, _ := os.ReadFile(path)
				if b[4] != tc.version {
					t.Errorf("layout %d, want %d", b[4], tc.version)
				}
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
			// An older generation is ignored.
			e.takeCredentials(&driverpb.Credentials{Generation: 1, File: credsBlob(t, hadooprpc.CredentialsWritable, testToken(3, "10.0.0.1:8020"))})
			creds, _ = hadooprpc.ReadCredentialsFile(path)
			if id, _ := hadooprpc.ParseDelegationTokenIdentifier(creds.Tokens["10.0.0.1:8020"].Identifier); id.SequenceNumber != 7 || e.credGen.Load() != 2 {
				t.Errorf("an older generation replaced the token: %s, generation %d", id, e.credGen.Load())
			}
			// A blob that does not parse leaves everything as it was.
			e.takeCredentials(&driverpb.Credentials{Generation: 3, File: []byte("garbage")})
			if e.credGen.Load() != 2 || !strings.Contains(logs.String(), "not applied") {
				t.Errorf("a bad blob: generation %d\n%s", e.credGen.Load(), logs.String())
			}
			if strings.Contains(logs.String(), "pw-") {
				t.Fatalf("a password in the log:\n%s", logs.String())
			}
		})
	}
}
