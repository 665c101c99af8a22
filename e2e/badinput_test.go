package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestBadInput checks that each kind of bad input ends the submit with a
// non-zero status and one line naming the culprit, before any executor
// runs.
func TestBadInput(t *testing.T) {
	t.Parallel()
	good := generate(t, "parquet", 300, 2)
	goodFile := filepath.Join(good, "part-00000.parquet")
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	raw, err := os.ReadFile(goodFile)
	if err != nil {
		t.Fatal(err)
	}
	truncated := write("truncated.parquet", string(raw[:len(raw)/2]))
	notParquet := write("notes.parquet", "this is not a parquet file\n")
	ragged := write("ragged.csv", "f0,f1,label\n1,2,0\n3,4,1\n5,6\n7,8,0\n")
	text := write("text.csv", "f0,city,label\n1,Oslo,0\n2,Lima,1\n")
	otherSchema := generateWith(t, "parquet", 100, 1, 3) // 3 features, not 4
	badConf := write("bad.conf", "spindle.feed.epochs 2\nspindle.feed.batchRows\n")

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing input", []string{"--input", filepath.Join(dir, "nope.parquet")}, []string{"nope.parquet"}},
		{"glob matching nothing", []string{"--input", filepath.Join(dir, "*.nothing")}, []string{"*.nothing"}},
		{"truncated parquet", []string{"--input", truncated}, []string{"truncated.parquet"}},
		{"not parquet", []string{"--input", notParquet}, []string{"notes.parquet"}},
		{"ragged csv row", []string{"--input", ragged}, []string{"ragged.csv", "line 4"}},
		{"schemas differ", []string{"--input", goodFile, "--input", filepath.Join(otherSchema, "part-00000.parquet")}, []string{"part-00000.parquet", "schema"}},
		{"missing column", []string{"--input", goodFile, "--columns", "f0,f9"}, []string{"f9"}},
		{"missing label", []string{"--input", goodFile, "--label-column", "target"}, []string{"target"}},
		{"non-numeric tensor column", []string{"--input", text, "--feed", "tensor", "--label-column", "label"}, []string{"city"}},
		{"malformed conf line", []string{"--input", goodFile, "--properties-file", badConf}, []string{"bad.conf:2"}},
		{"unknown master", []string{"--input", goodFile, "--master", "mesos://m:5050"}, []string{"unknown master URL", "mesos://m:5050"}},
		{"zero executors", []string{"--input", goodFile, "--num-executors", "0"}, []string{"--num-executors", "spindle.executor.instances"}},
		{"bad conf value", []string{"--input", goodFile, "--conf", "spindle.feed.mode=tensors"}, []string{"--conf", "spindle.feed.mode", "tensors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"submit"}, tc.args...), "--", feedcheckBin)
			r := spindle(t, dir, args...)
			if r.code != 2 {
				t.Fatalf("bad input: exit %d, want 2:\n%s", r.code, r)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if strings.HasPrefix(l, "spindle: ") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 {
				t.Fatalf("want exactly one error line:\n%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(errLines[0], w) {
					t.Errorf("error %q does not mention %q", errLines[0], w)
				}
			}
			if strings.Contains(r.stdout+r.stderr, "feedcheck rank=") {
				t.Errorf("a training process ran despite the bad input:\n%s", r)
			}
		})
	}
}

func TestNoCommand(t *testing.T) {
	t.Parallel()
	r := spindle(t, t.TempDir(), "submit", "--input", "x.parquet")
	if r.code != 2 || !strings.Contains(r.stderr, "no training command") {
		t.Fatalf("want exit 2 and a hint about --:\n%s", r)
	}
}

func TestUnknownConfKeyWarns(t *testing.T) {
	t.Parallel()
	data := generate(t, "parquet", 100, 1)
	r := spindle(t, data, submitArgs("--num-executors", "1", "--input", data, "--conf", "spindle.feed.epoch=2", "--", feedcheckBin)...)
	if r.code != 0 {
		t.Fatalf("an unknown key failed the job:\n%s", r)
	}
	if !strings.Contains(r.stderr, `unknown key "spindle.feed.epoch" (did you mean "spindle.feed.epochs"?)`) {
		t.Errorf("no suggestion for the misspelt key:\n%s", r.stderr)
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	r := spindle(t, t.TempDir(), "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "spindle ") {
		t.Fatalf("version:\n%s", r)
	}
	// The second line says whether the binary can use UCX: with the
	// version of the libucp it loaded, which must be the installed one.
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("version: want 2 lines:\n%s", r)
	}
	if out, err := exec.Command("ucx_info", "-v").Output(); err == nil {
		v := regexp.MustCompile(`# (?:Library )?[Vv]ersion:? (\S+)`).FindSubmatch(out)
		if v == nil {
			t.Fatalf("ucx_info -v says no version:\n%s", out)
		}
		if want := "ucx: available (" + string(v[1]) + ")"; lines[1] != want {
			t.Errorf("version's UCX line %q, want %q (UCX is installed here)", lines[1], want)
		}
	} else if !strings.HasPrefix(lines[1], "ucx: not available: ") {
		t.Errorf("version's UCX line %q: UCX is not installed here, want \"ucx: not available: ...\"", lines[1])
	}
	r = spindle(t, t.TempDir(), "submit", "--help")
	for _, w := range []string{"--num-executors", "--input", "--feed", "--label-column", "-- COMMAND"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("submit --help lacks %q", w)
		}
	}
}
