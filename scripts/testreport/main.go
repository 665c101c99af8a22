// Command testreport reads `go test -json` on its standard input, prints
// what a plain `go test` would (package results, build errors, and the
// output of failed tests only), and appends one line to a summary file
// saying how many tests of a tier ran, failed and were skipped. It exits
// 1 when a test or package failed.
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
	"strings"
	"time"
)

func main() {
	tier := flag.String("tier", "go", "the tier's name, for the summary line")
	summary := flag.String("summary", "", "append the summary line to this file (and print it)")
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
}

func newReport(out io.Writer) *report {
	return &report{out: out, pending: make(map[testKey][]string)}
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
	return line
}
