// Command testreport reads `go test -json` on its standard input, prints
// what a plain `go test` would (package results, build errors, and the
// output of failed tests only), and appends to a summary file one line
// saying how many tests of a tier ran, failed and were skipped, and, for
// each test that failed, its name and what it said. It exits 1 when a
// test or package failed.
//
//	go test -json ./... | go run ./scripts/testreport -tier unit -summary out.txt
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

func main() {
	tier := flag.String("tier", "go", "the tier's name, for the summary line")
	summary := flag.String("summary", "", "append the summary line to this file (and print it)")
	times := flag.String("times", "", "write each top-level test's seconds to this file, slowest first")
	flag.Parse()
	start := time.Now()
	r := newReport(os.Stdout)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: read go test -json: %v\n", err)
		os.Exit(2)
	}
	line := r.summary(*tier, time.Since(start))
	fmt.Println(line)
	if *summary != "" {
		if err := appendLine(*summary, line); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(2)
		}
	}
	if *times != "" {
		if err := os.WriteFile(*times, []byte(r.timesTable()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: write the test times: %v\n", err)
			os.Exit(2)
		}
	}
	if r.failed > 0 || r.pkgFailed > 0 {
		os.Exit(1)
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the summary file: %w", err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
	Elapsed    float64 // seconds, on pass, fail and skip
}

type testKey struct{ pkg, test string }

// report holds the counts so far and the output of tests still running.
type report struct {
	out     io.Writer
	pending map[testKey][]string

	passed, failed, skipped int
	pkgOK, pkgFailed        int
	// skippedTests names the top-level tests that skipped: a skip on a
	// machine that has everything is worth a look, so the summary says which.
	skippedTests []string
	// failures are the failed tests, in the order they ended, with what
	// they printed: the summary repeats it, so the end of a long log
	// (all a CI page may show) says why a tier failed.
	failures []failure
	// elapsed is each top-level test's seconds, by "package.Test".
	elapsed map[string]float64
}

// failure is a failed test and its output.
type failure struct {
	name  string // package base name and test, "executor.TestX/sub"
	lines []string
}

func newReport(out io.Writer) *report {
	return &report{out: out, pending: make(map[testKey][]string), elapsed: make(map[string]float64)}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not JSON (a line go test printed itself): pass it on.
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.take(e)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// take handles one event.
func (r *report) take(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(r.out, e.Output)
		return
	}
	if e.Test == "" {
		r.packageEvent(e)
		return
	}
	k := testKey{e.Package, e.Test}
	if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
		if !strings.Contains(e.Test, "/") {
			r.elapsed[path.Base(e.Package)+"."+e.Test] = e.Elapsed
		}
	}
	switch e.Action {
	case "output":
		r.pending[k] = append(r.pending[k], e.Output)
	case "pass":
		r.passed++
		delete(r.pending, k)
	case "skip":
		r.skipped++
		if !strings.Contains(e.Test, "/") {
			r.skippedTests = append(r.skippedTests, path.Base(e.Package)+"."+e.Test)
		}
		delete(r.pending, k)
	case "fail":
		r.failed++
		r.failures = append(r.failures, failure{path.Base(k.pkg) + "." + k.test, r.pending[k]})
		r.flush(k)
	}
}

// packageEvent prints a package's own lines (ok, FAIL, panics outside
// tests) and, when it failed, the output of its tests that never ended
// (a timeout or a crash).
func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		fmt.Fprint(r.out, e.Output)
	case "pass":
		r.pkgOK++
	case "fail":
		r.pkgFailed++
		for k := range r.pending {
			if k.pkg == e.Package {
				r.failures = append(r.failures, failure{path.Base(k.pkg) + "." + k.test + " (never ended)", r.pending[k]})
				r.flush(k)
			}
		}
	}
}

func (r *report) flush(k testKey) {
	for _, l := range r.pending[k] {
		fmt.Fprint(r.out, l)
	}
	delete(r.pending, k)
}

// summary is the tier's line: tests (subtests included) by outcome.
func (r *report) summary(tier string, took time.Duration) string {
	verdict := "ok"
	if r.failed > 0 || r.pkgFailed > 0 {
		verdict = "FAILED"
	}
	line := fmt.Sprintf("tier %-7s %-6s %5d tests run, %d failed, %d skipped; %d packages ok, %d failed; %s",
		tier, verdict, r.passed+r.failed, r.failed, r.skipped, r.pkgOK, r.pkgFailed, took.Round(time.Second))
	if n := len(r.skippedTests); n > 0 {
		const most = 8
		names := r.skippedTests[:min(n, most)]
		line += "\n             skipped: " + strings.Join(names, ", ")
		if n > most {
			line += fmt.Sprintf(" and %d more", n-most)
		}
	}
	leaves := r.leafFailures()
	for _, f := range leaves[:min(len(leaves), mostFailures)] {
		line += "\n             failed: " + f.name
		for _, l := range f.said() {
			line += "\n               " + l
		}
	}
	if n := len(leaves); n > mostFailures {
		line += fmt.Sprintf("\n             and %d more failed (the tier's output has them)", n-mostFailures)
	}
	return line
}

// leafFailures are the failures but those of a test whose subtest failed
// too: the subtest's output says why, its parent's only that it failed.
func (r *report) leafFailures() []failure {
	var leaves []failure
	for _, f := range r.failures {
		parent := false
		for _, g := range r.failures {
			if strings.HasPrefix(g.name, f.name+"/") {
				parent = true
				break
			}
		}
		if !parent {
			leaves = append(leaves, f)
		}
	}
	return leaves
}

// Most failed tests the summary says why of, and most lines and
// characters a line of a failure's output it repeats.
const (
	mostFailures    = 10
	failureLines    = 12
	failureLineRune = 240
)

// said is what a failed test printed but go test's own lines, at most
// failureLines of it: its first lines (where t.Error's message starts)
// and its last (where a dump of a child's output ends).
func (f failure) said() []string {
	var lines []string
	for _, l := range f.lines {
		l = strings.TrimRight(l, "\n")
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- FAIL") {
			continue
		}
		if r := []rune(l); len(r) > failureLineRune {
			l = string(r[:failureLineRune]) + "…"
		}
		lines = append(lines, l)
	}
	if len(lines) > failureLines {
		head, tail := lines[:failureLines/3], lines[len(lines)-(failureLines-failureLines/3):]
		lines = append(append(append([]string(nil), head...), fmt.Sprintf("… %d lines …", len(lines)-failureLines)), tail...)
	}
	return lines
}

// timesTable is a line per top-level test, "seconds name", slowest first:
// where a tier's time goes (a test that waits holds a package slot).
func (r *report) timesTable() string {
	names := make([]string, 0, len(r.elapsed))
	for n := range r.elapsed {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if r.elapsed[names[i]] != r.elapsed[names[j]] {
			return r.elapsed[names[i]] > r.elapsed[names[j]]
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%8.2f %s\n", r.elapsed[n], n)
	}
	return b.String()
}
