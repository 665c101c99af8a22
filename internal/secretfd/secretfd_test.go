package secretfd

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// TestHandOver: secrets handed through a pipe are read once, and the
// variable naming the pipe is gone after.
func TestHandOver(t *testing.T) {
	want := map[string]string{envcontract.JobSecret: "s3cret", envcontract.JobTLS: "bundle"}
	entry, err := Inheritable(want)
	if err != nil {
		t.Fatal(err)
	}
	k, v, _ := strings.Cut(entry, "=")
	t.Setenv(k, v)
	got, err := Take()
	if err != nil || len(got) != 2 || got[envcontract.JobSecret] != "s3cret" || got[envcontract.JobTLS] != "bundle" {
		t.Fatalf("Take = %v, %v", got, err)
	}
	if _, ok := os.LookupEnv(Env); ok {
		t.Fatalf("$%s is still set", Env)
	}
	if again, err := Take(); again != nil || err != nil {
		t.Fatalf("a second Take = %v, %v; want nothing", again, err)
	}
}

// TestAttachKeepsSecretsOutOfTheEnvironment: a child started with Attach
// reads the secrets from its pipe, and its environment holds only the
// descriptor's number; Split keeps plain variables apart.
func TestAttachKeepsSecretsOutOfTheEnvironment(t *testing.T) {
	secrets, plain := Split(map[string]string{envcontract.JobSecret: "s3cret", "RANK_HINT": "1"})
	if len(secrets) != 1 || plain["RANK_HINT"] != "1" {
		t.Fatalf("Split = %v, %v", secrets, plain)
	}
	cmd := exec.Command("/bin/sh", "-c", `cat <&$`+Env+`; echo; tr '\0' '\n' </proc/self/environ | grep -c s3cret || true`)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	release, err := Attach(cmd, secrets)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.Output()
	release()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"s3cret"`) || lines[1] != "0" {
		t.Fatalf("child printed %q; want the secrets from the pipe and none in its environment", out)
	}
}
