package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestReportShowsFailuresOnly: a passing test's output is dropped, a
// failing one's printed, package lines passed on, and every test and
// subtest counted.
func TestReportShowsFailuresOnly(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: replica 2 behind\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB"}`,
		`{"Action":"skip","Package":"p","Test":"TestC/sub"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Test":"TestD","Output":"panic: boom\n"}`,
		`{"Action":"fail","Package":"q"}`,
		`{"ImportPath":"r","Action":"build-output","Output":"r/x.go:1: syntax error\n"}`,
		`not json`,
	}, "\n")
	var out strings.Builder
	r := newReport(&out)
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"replica 2 behind", "FAIL\tp", "panic: boom", "syntax error", "not json"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN   TestA") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	line := r.summary("unit", 0)
	if want := "2 tests run, 1 failed, 1 skipped; 0 packages ok, 2 failed"; !strings.Contains(line, want) || !strings.Contains(line, "FAILED") {
		t.Errorf("summary %q, want it to say %q", line, want)
	}
}

// TestSummaryNamesSkippedTests: the summary names each top-level test that
// skipped, by package, and counts the rest past the first few.
func TestSummaryNamesSkippedTests(t *testing.T) {
	var in []string
	for _, name := range []string{"TestHW", "TestHW/sub", "T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"} {
		in = append(in, `{"Action":"skip","Package":"example.com/m/rdma","Test":"`+name+`"}`)
	}
	r := newReport(&strings.Builder{})
	if err := r.read(strings.NewReader(strings.Join(in, "\n"))); err != nil {
		t.Fatal(err)
	}
	line := r.summary("unit", 0)
	for _, want := range []string{"10 skipped", "skipped: rdma.TestHW, rdma.T1,", "and 1 more"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "TestHW/sub") {
		t.Errorf("summary %q names a subtest", line)
	}
}

// TestSummarySaysWhyTestsFailed: the summary names each failed test
// whose subtests passed, with what it said (go test's own lines left out,
// a long dump cut in the middle), and a test a crash left unfinished.
func TestSummarySaysWhyTestsFailed(t *testing.T) {
	in := []string{
		`{"Action":"output","Package":"m/executor","Test":"TestGPU","Output":"=== RUN   TestGPU\n"}`,
		`{"Action":"output","Package":"m/executor","Test":"TestGPU","Output":"    gpu_test.go:131: nvidia-smi asked \"\"\n"}`,
		`{"Action":"output","Package":"m/executor","Test":"TestGPU","Output":"--- FAIL: TestGPU (0.08s)\n"}`,
		`{"Action":"fail","Package":"m/executor","Test":"TestGPU"}`,
		`{"Action":"output","Package":"m/e2e","Test":"TestSpark/yarn","Output":"    spark_test.go:9: the driver program: exit status 1\n"}`,
	}
	for i := range 30 {
		in = append(in, fmt.Sprintf(`{"Action":"output","Package":"m/e2e","Test":"TestSpark/yarn","Output":"driver line %d\n"}`, i))
	}
	in = append(in,
		`{"Action":"fail","Package":"m/e2e","Test":"TestSpark/yarn"}`,
		`{"Action":"fail","Package":"m/e2e","Test":"TestSpark"}`,
		`{"Action":"output","Package":"m/ps","Test":"TestHang","Output":"panic: test timed out after 10m0s\n"}`,
		`{"Action":"fail","Package":"m/ps"}`,
	)
	r := newReport(&strings.Builder{})
	if err := r.read(strings.NewReader(strings.Join(in, "\n"))); err != nil {
		t.Fatal(err)
	}
	line := r.summary("unit", 0)
	for _, want := range []string{
		"failed: executor.TestGPU\n", `gpu_test.go:131: nvidia-smi asked ""`,
		"failed: e2e.TestSpark/yarn\n", "the driver program: exit status 1", "driver line 2\n", "… 19 lines …", "driver line 29",
		"failed: ps.TestHang (never ended)", "test timed out",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("summary lacks %q:\n%s", want, line)
		}
	}
	for _, unwanted := range []string{"failed: e2e.TestSpark\n", "=== RUN", "--- FAIL", "driver line 3\n", "driver line 17\n"} {
		if strings.Contains(line, unwanted) {
			t.Errorf("summary has %q:\n%s", unwanted, line)
		}
	}
}

// TestTimesTable: each top-level test's seconds, slowest first, its
// subtests not listed apart.
func TestTimesTable(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"pass","Package":"m/feed","Test":"TestFast","Elapsed":0.2}`,
		`{"Action":"pass","Package":"m/e2e","Test":"TestSlow/sub","Elapsed":30}`,
		`{"Action":"fail","Package":"m/e2e","Test":"TestSlow","Elapsed":31.5}`,
		`{"Action":"skip","Package":"m/rdma","Test":"TestHW","Elapsed":0}`,
	}, "\n")
	r := newReport(&strings.Builder{})
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	want := "   31.50 e2e.TestSlow\n    0.20 feed.TestFast\n    0.00 rdma.TestHW\n"
	if got := r.timesTable(); got != want {
		t.Errorf("times:\n%s\nwant:\n%s", got, want)
	}
}

// TestSummaryCapsFailures: past the first few failed tests the summary
// only counts the rest.
func TestSummaryCapsFailures(t *testing.T) {
	var in []string
	for i := range mostFailures + 3 {
		in = append(in, fmt.Sprintf(`{"Action":"fail","Package":"m/p","Test":"Test%02d"}`, i))
	}
	r := newReport(&strings.Builder{})
	if err := r.read(strings.NewReader(strings.Join(in, "\n"))); err != nil {
		t.Fatal(err)
	}
	line := r.summary("unit", 0)
	if n := strings.Count(line, "failed: p.Test"); n != mostFailures || !strings.Contains(line, "and 3 more failed") {
		t.Errorf("%d failures named, want %d and 3 more counted:\n%s", n, mostFailures, line)
	}
}
