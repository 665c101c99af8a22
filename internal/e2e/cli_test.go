package e2e

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// errorLines returns the "spindle: " lines of a command's stderr.
func errorLines(r result) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if strings.HasPrefix(l, "spindle: ") {
			out = append(out, l)
		}
	}
	return out
}

// wantUsageError checks that r exited 2 with one error line holding every
// string of want, and without printing the command's help.
func wantUsageError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", r.code, r)
	}
	lines := errorLines(r)
	if len(lines) != 1 {
		t.Fatalf("want exactly one error line:\n%s", r)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error %q does not mention %q", lines[0], w)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "USAGE:") {
		t.Errorf("the help was printed for a usage error:\n%s", r)
	}
}

// TestUsageErrors: an unknown flag or command is one line and exit 2, with
// a suggestion when the mistake is close to a real name.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"submit", "--bogus", "--", "true"}, []string{"unknown flag --bogus", "spindle submit"}},
		{"misspelt flag", []string{"submit", "--num-executor", "2", "--", "true"}, []string{"--num-executor", `did you mean --num-executors?`}},
		{"flag without value", []string{"submit", "--epochs"}, []string{"-epochs"}},
		{"misspelt command", []string{"submt", "--input", "x"}, []string{`unknown command "submt"`, `did you mean "submit"?`}},
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`}},
		{"help for an unknown command", []string{"help", "stauts"}, []string{"stauts", "status"}},
		{"unknown flag of the app", []string{"--bogus"}, []string{"unknown flag --bogus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantUsageError(t, spindle(t, t.TempDir(), tc.args...), tc.want...)
		})
	}
}

// TestValuesKeepCommas: --env and --conf values are not split at commas.
func TestValuesKeepCommas(t *testing.T) {
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data,
		"--env", "CUDA_VISIBLE_DEVICES=0,1", "--env", "LIST=a,b,c",
		"--conf", "spindle.input.columns=f0,f1",
		"--", "/bin/sh", "-c", `echo "cuda=$CUDA_VISIBLE_DEVICES list=$LIST"`)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if !strings.Contains(r.stdout, "[rank 0] cuda=0,1 list=a,b,c") {
		t.Errorf("--env values lost their commas:\n%s", r)
	}
}

// TestVersionNamesCommit: spindle version says which commit and which Go
// built it, not just "dev".
func TestVersionNamesCommit(t *testing.T) {
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout to compare with: %v", err)
	}
	r := spindle(t, t.TempDir(), "version")
	if r.code != 0 {
		t.Fatalf("version:\n%s", r)
	}
	for _, w := range []string{"commit " + strings.TrimSpace(string(out)), runtime.Version()} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("version %q lacks %q", strings.TrimSpace(r.stdout), w)
		}
	}
}
