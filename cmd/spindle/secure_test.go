package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestSubmitKerberosRefusals: spindle submit to a Kerberized YARN
// cluster refuses a wrong login before anything runs, with exit status 2
// and a message naming what is wrong.
func TestSubmitKerberosRefusals(t *testing.T) {
	kdc := krbtest.Start(t)
	kt := kdc.AddPrincipal("alice")
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket"))
	conf := t.TempDir()
	for name, body := range map[string]string{
		"core-site.xml": `<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value></property></configuration>`,
		"yarn-site.xml": `<configuration><property><name>yarn.resourcemanager.address</name><value>` + testaddr.Free(t) + `</value></property>` +
			`<property><name>yarn.resourcemanager.principal</name><value>rm/_HOST@` + krbtest.Realm + `</value></property></configuration>`,
	} {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	for _, tc := range []struct {
		name  string
		flags []string
		says  string
	}{
		{"no ticket and no keytab", nil, "run kinit"},
		{"keytab without principal", []string{"--keytab", kt}, "without its principal (--principal)"},
		{"wrong realm", []string{"--principal", "alice@WRONG.REALM", "--keytab", kt}, "WRONG.REALM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedSubmit(t, tc.flags, tc.says)
		})
	}

	// A krb5.conf whose KDC address answers nothing.
	t.Run("wrong KDC address", func(t *testing.T) {
		dead := testaddr.Free(t)
		b, err := os.ReadFile(kdc.Conf)
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(t.TempDir(), "krb5.conf")
		if err := os.WriteFile(conf, []byte(strings.ReplaceAll(string(b), kdc.Addr, dead)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KRB5_CONFIG", conf)
		refusedSubmit(t, []string{"--principal", "alice", "--keytab", kt}, conf)
	})
	// A KDC whose clock is an hour off the gateway's.
	t.Run("clock skew", func(t *testing.T) {
		if _, err := exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler to shift the KDC's clock")
		}
		skewed := krbtest.StartWith(t, krbtest.Options{ClockOffset: time.Hour})
		t.Setenv("KRB5_CONFIG", skewed.Conf)
		refusedSubmit(t, []string{"--principal", "alice", "--keytab", skewed.AddPrincipal("alice")}, "clock")
	})
}

// refusedSubmit runs spindle submit to the Kerberized YARN with flags and
// wants exit 2 with an error that says says.
func refusedSubmit(t *testing.T, flags []string, says string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	app := newApp()
	app.Writer, app.ErrWriter = io.Discard, io.Discard
	args := append(append([]string{"spindle", "submit", "--master", "yarn"}, flags...), "--", "true")
	err := app.RunContext(ctx, args)
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), says) {
		t.Fatalf("exit %d: %v; want exit %d saying %q", code, err, exitUsage, says)
	}
}
