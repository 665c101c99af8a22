package yarn

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// TestWriteAMLogin: the driver in the ApplicationMaster writes the keytab
// of its credentials to a file only its user reads, and the gateway's
// krb5.conf beside it when the container has no KRB5_CONFIG; without a
// keytab it writes nothing, and a keytab without its principal is refused.
func TestWriteAMLogin(t *testing.T) {
	keytab := []byte("\x05\x02keytab-s3cret")
	krb5 := []byte("[libdefaults]\n default_realm = SPINDLE.TEST\n")
	for _, tc := range []struct {
		name       string
		secrets    map[string][]byte
		krb5Config string // the container's KRB5_CONFIG
		wantOK     bool
		wantErr    string
		wantConf   bool // KRB5_CONFIG points at the written krb5.conf
	}{
		{name: "no keytab", secrets: map[string][]byte{}},
		{name: "keytab", secrets: map[string][]byte{amKeytabAlias: keytab, amPrincipalAlias: []byte("alice@SPINDLE.TEST"), amKrb5ConfAlias: krb5},
			wantOK: true, wantConf: true},
		{name: "node krb5.conf", secrets: map[string][]byte{amKeytabAlias: keytab, amPrincipalAlias: []byte("alice@SPINDLE.TEST"), amKrb5ConfAlias: krb5},
			krb5Config: "/etc/node-krb5.conf", wantOK: true},
		{name: "no principal", secrets: map[string][]byte{amKeytabAlias: keytab}, wantErr: amPrincipalAlias},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KRB5_CONFIG", tc.krb5Config)
			dir := t.TempDir()
			creds := hadooprpc.NewCredentials()
			for k, v := range tc.secrets {
				creds.Secrets[k] = v
			}
			login, ok, err := writeAMLogin(creds, dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.wantOK {
				t.Fatalf("ok %v err %v, want ok %v", ok, err, tc.wantOK)
			}
			loginDir := filepath.Join(dir, amLoginDir)
			if !ok {
				if _, err := os.Stat(loginDir); !os.IsNotExist(err) {
					t.Fatalf("%s written without a keytab: %v", loginDir, err)
				}
				return
			}
			if login.principal != "alice@SPINDLE.TEST" || login.keytab != filepath.Join(loginDir, "driver.keytab") {
				t.Fatalf("login %+v", login)
			}
			b, err := os.ReadFile(login.keytab)
			if err != nil || !bytes.Equal(b, keytab) {
				t.Fatalf("keytab file %q, %v", b, err)
			}
			for path, mode := range map[string]os.FileMode{loginDir: 0o700 | os.ModeDir, login.keytab: 0o600} {
				if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
					t.Errorf("%s: %v %v, want mode %v", path, fi.Mode(), err, mode)
				}
			}
			conf := filepath.Join(loginDir, "krb5.conf")
			if got := os.Getenv("KRB5_CONFIG"); (got == conf) != tc.wantConf {
				t.Errorf("KRB5_CONFIG %q", got)
			}
			if _, err := os.Stat(conf); (err == nil) != tc.wantConf {
				t.Errorf("krb5.conf written: %v, want %v", err == nil, tc.wantConf)
			}
			for _, s := range login.loginSettings() {
				if strings.Contains(s, string(keytab)) {
					t.Errorf("the driver's setting %q holds the keytab", s)
				}
			}
		})
	}
}

// TestAMLoginInCredentials: a keytab for the ApplicationMaster travels in
// its launch credentials, never in its environment or command line.
func TestAMLoginInCredentials(t *testing.T) {
	keytab := []byte("keytab-s3cret")
	plan := Plan{AppID: "application_1_0004", AMSecret: "am", Cluster: &ClusterJob{Command: []string{"train"}},
		Spindle: Resource{Scheme: "hdfs", Host: "nn", Port: 8020, File: "/s/spindle", Size: 10, Timestamp: 5}}
	clc, err := amLaunchContext(plan, "info", nil, map[string][]byte{amKeytabAlias: keytab, amPrincipalAlias: []byte("alice@R")})
	if err != nil {
		t.Fatal(err)
	}
	visible := strings.Join(clc.GetCommand(), " ")
	for _, kv := range clc.GetEnvironment() {
		visible += " " + kv.GetKey() + "=" + kv.GetValue()
	}
	if strings.Contains(visible, string(keytab)) || strings.Contains(visible, "keytab") {
		t.Errorf("the keytab is in the AM's environment or command line: %s", visible)
	}
	creds, err := hadooprpc.ReadCredentials(bytes.NewReader(clc.GetTokens()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(creds.Secrets[amKeytabAlias], keytab) || string(creds.Secrets[amPrincipalAlias]) != "alice@R" {
		t.Fatalf("the AM's credentials hold %v", creds.Secrets)
	}
}
