package executor

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

func TestParseStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as /proc shows it.
	line := "4242 (my (odd) trainer) S 1 4240 4240 0 -1 4194304 100 0 0 0 250 50 10 5 20 0 3 0 12345 104857600 2048 18446744073709551615"
	st, ok := parseStat(line)
	if !ok {
		t.Fatal("not parsed")
	}
	if st.pgrp != 4240 || st.utime != 250 || st.stime != 50 || st.cutime != 10 || st.cstime != 5 || st.rssPages != 2048 {
		t.Fatalf("parsed %+v", st)
	}
	if _, ok := parseStat("4242 (short) S 1"); ok {
		t.Fatal("a short line parsed")
	}
}

// TestGroupUsage reads a fake proc tree: only the group's processes count.
func TestGroupUsage(t *testing.T) {
	root := t.TempDir()
	write := func(pid, pgrp, utime, rss string) {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := pid + " (python3) S 1 " + pgrp + " " + pgrp + " 0 -1 0 0 0 0 0 " + utime + " 100 0 0 20 0 1 0 1 1 " + rss + " 0"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100", "100", "200", "10")
	write("101", "100", "300", "20")
	write("200", "200", "9999", "9999")
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := groupUsage(root, 100)
	if err != nil {
		t.Fatal(err)
	}
	// utime 200+300 and stime 100+100 ticks at 100 per second.
	if u.GetCpuSeconds() != 7 || u.GetMemoryBytes() != 30*int64(os.Getpagesize()) {
		t.Fatalf("usage %+v", u)
	}
	if _, err := groupUsage(root, 300); err == nil {
		t.Fatal("an empty group has usage")
	}
}

func TestGroupUsageOfThisProcess(t *testing.T) {
	u, err := groupUsage("/proc", syscall.Getpgrp())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if u.GetMemoryBytes() <= 0 {
		t.Fatalf("usage %+v: want resident memory", u)
	}
}

// runObservations receives reports at sock until cancel; done has Run's
// end.
func runObservations(t *testing.T, sock string) (*observations, context.CancelFunc, <-chan error) {
	t.Helper()
	obs, err := newObservations(sock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- obs.Run(ctx) }()
	return obs, cancel, done
}

// TestReports: datagrams become reports for the next heartbeat; bad ones
// are refused, and a flood keeps the newest.
func TestReports(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "report.sock")
	obs, cancel, done := runObservations(t, sock)

	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, msg := range []string{
		`{"step": 3, "values": {"loss": 0.5, "acc": 0.75}}`,
		`not json`,
		`{"step": 4, "values": {}}`,
		`{"step": 5, "values": {"loss": 0.25}, "time": 1700000000.5}`,
		`{"spans": [{"name": "allreduce", "cat": "collective", "ts": 1700000000000000, "dur": 250}, {"name": "", "ts": 1}]}`,
	} {
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	var hb driverpb.HeartbeatRequest
	var got []*driverpb.Report
	var spans []*driverpb.Span
	testutil.WaitFor(t, 10*time.Second, func() error {
		obs.take(&hb)
		got = append(got, hb.Reports...)
		spans = append(spans, hb.Spans...)
		if len(got) < 2 || len(spans) < 1 {
			return fmt.Errorf("%d reports and %d spans, want 2 and 1", len(got), len(spans))
		}
		return nil
	})
	if len(spans) != 1 || spans[0].GetName() != "allreduce" || spans[0].GetDurationMicros() != 250 {
		t.Fatalf("spans %v: want the one well-formed span", spans)
	}
	if len(got) != 2 || got[0].GetStep() != 3 || got[0].GetValues()["acc"] != 0.75 ||
		got[1].GetStep() != 5 || got[1].GetUnixMillis() != 1700000000500 {
		t.Fatalf("reports %v", got)
	}

	for i := 0; i < maxPendingReports+10; i++ {
		obs.addReport(&driverpb.Report{Step: int64(i), Values: map[string]float64{"x": 1}})
	}
	obs.take(&hb)
	if len(hb.Reports) != maxPendingReports || hb.Reports[len(hb.Reports)-1].GetStep() != maxPendingReports+9 {
		t.Fatalf("a flood kept %d reports, the last at step %d", len(hb.Reports), hb.Reports[len(hb.Reports)-1].GetStep())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLineTee: lines reach the executor's own output and wait for the
// driver, up to a bound past which they are counted.
func TestLineTee(t *testing.T) {
	obs := &observations{logger: slog.New(slog.DiscardHandler)}
	var local bytes.Buffer
	out, errw := lineTee{w: &local, obs: obs}, lineTee{w: &local, obs: obs, stderr: true}
	_, _ = out.Write([]byte("[rank 1] step 1\n"))
	_, _ = errw.Write([]byte("[rank 1] warning\n"))
	var hb driverpb.HeartbeatRequest
	obs.take(&hb)
	if local.String() != "[rank 1] step 1\n[rank 1] warning\n" {
		t.Fatalf("local output %q", local.String())
	}
	if len(hb.Output) != 2 || hb.Output[0].GetText() != "[rank 1] step 1" || hb.Output[0].GetStderr() || !hb.Output[1].GetStderr() {
		t.Fatalf("forwarded %v", hb.Output)
	}
	line := strings.Repeat("x", 1000)
	for i := 0; i < maxPendingOutputLines+5; i++ {
		_, _ = out.Write([]byte(line + "\n"))
	}
	obs.take(&hb)
	if int64(len(hb.Output))+hb.OutputDropped != maxPendingOutputLines+5 || hb.OutputDropped == 0 {
		t.Fatalf("kept %d lines and dropped %d of %d", len(hb.Output), hb.OutputDropped, maxPendingOutputLines+5)
	}
	if len(local.String()) < (maxPendingOutputLines+5)*1000 {
		t.Fatal("lines the driver could not take were not written locally")
	}
}

// TestLastReportsKept: what a process sends just before it ends, still
// queued on the socket when the executor stops reading, is not lost.
func TestLastReportsKept(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "report.sock")
	obs, err := newObservations(sock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := 0; i < 3; i++ {
		if _, err := conn.Write([]byte(fmt.Sprintf(`{"step": %d, "values": {"loss": 1}}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the process has ended before Run reads anything
	if err := obs.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var hb driverpb.HeartbeatRequest
	obs.take(&hb)
	if len(hb.Reports) != 3 {
		t.Fatalf("kept %d of the last 3 reports", len(hb.Reports))
	}
}

// TestModelSavedDatagrams: a published model's datagram is read as one,
// and neither a report nor a malformed model is.
func TestModelSavedDatagrams(t *testing.T) {
	modelSaved := func(b []byte) (*driverpb.ModelSaved, bool) {
		d, err := decodeDatagram(b)
		if err != nil {
			return nil, false
		}
		return d.modelSaved()
	}
	m, ok := modelSaved([]byte(`{"model": {"name": "ctr", "version": 3, "uri": "hdfs://nn/models/ctr/3"}}`))
	if !ok || m.GetName() != "ctr" || m.GetVersion() != 3 || m.GetUri() != "hdfs://nn/models/ctr/3" || m.GetUnixMillis() == 0 {
		t.Fatalf("model datagram read as %v, %v", m, ok)
	}
	for _, msg := range []string{`{"step": 3, "values": {"loss": 0.5}}`, `{"model": {"name": "", "version": 1}}`, `{"model": {"name": "x", "version": 0}}`, `nope`} {
		if _, ok := modelSaved([]byte(msg)); ok {
			t.Errorf("%s read as a saved model", msg)
		}
	}
	obs := &observations{}
	obs.take1([]byte(`{"model": {"name": "ctr", "version": 1, "uri": "/m/ctr/1"}}`))
	var hb driverpb.HeartbeatRequest
	obs.take(&hb)
	if len(hb.Models) != 1 || len(hb.Reports) != 0 {
		t.Fatalf("heartbeat carries models %v and reports %v", hb.Models, hb.Reports)
	}
}
