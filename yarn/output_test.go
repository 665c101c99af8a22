package yarn

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/yarn/client"
	"google.golang.org/protobuf/proto"
)

// TestOutputLog: what the driver writes reaches a reader line by line, in
// order and on the right stream, with the result after the last line.
func TestOutputLog(t *testing.T) {
	l := newOutputLog()
	out, errw := l.writer(false), l.writer(true)
	io.WriteString(out, "first line\nsecond ")
	io.WriteString(errw, "an error\n")
	io.WriteString(out, "line\r\n")
	ctx := context.Background()
	got := l.since(ctx, 0, time.Second)
	want := []outputLine{{Text: "first line"}, {Err: true, Text: "an error"}, {Text: "second line"}}
	if fmt.Sprint(got.Lines) != fmt.Sprint(want) || got.Next != 3 || got.Done != nil {
		t.Fatalf("got %+v", got)
	}
	if empty := l.since(ctx, got.Next, 10*time.Millisecond); len(empty.Lines) != 0 || empty.Next != 3 {
		t.Fatalf("nothing new: %+v", empty)
	}
	io.WriteString(out, "unfinished")
	l.finish(JobResult{Code: 1, Message: "job failed"})
	last := l.since(ctx, 3, time.Second)
	if len(last.Lines) != 1 || last.Lines[0].Text != "unfinished" || last.Done == nil || last.Done.Code != 1 {
		t.Fatalf("last: %+v", last)
	}
	if !l.waitDrained(ctx, time.Second) {
		t.Fatal("not drained after the result was read")
	}
}

// TestOutputLogWaits: a reader waiting for lines wakes when one is written.
func TestOutputLogWaits(t *testing.T) {
	l := newOutputLog()
	var wg sync.WaitGroup
	wg.Add(1)
	var got amOutput
	go func() {
		defer wg.Done()
		got = l.since(context.Background(), 0, time.Minute)
	}()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("reader waiting", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.lastRead.IsZero()
	}))
	io.WriteString(l.writer(false), "hello\n")
	wg.Wait()
	if len(got.Lines) != 1 || got.Lines[0].Text != "hello" {
		t.Fatalf("got %+v", got)
	}
}

// TestOutputLogDrops: a reader far behind is told how many lines it
// missed, and long answers come in batches.
func TestOutputLogDrops(t *testing.T) {
	l := newOutputLog()
	w := l.writer(false)
	for i := range outputKeep + 10 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	got := l.since(context.Background(), 0, time.Second)
	if got.Dropped != 10 || len(got.Lines) != outputMaxBatch || got.Lines[0].Text != "line 10" || got.Next != 10+outputMaxBatch {
		t.Fatalf("dropped %d, %d lines from %q, next %d", got.Dropped, len(got.Lines), got.Lines[0].Text, got.Next)
	}
}

// TestWaitDrainedWithoutReader: an AM nobody read from for readerGone
// does not wait.
func TestWaitDrainedWithoutReader(t *testing.T) {
	l := newOutputLog()
	l.lastRead = time.Now().Add(-readerGone - time.Second)
	l.finish(JobResult{})
	if l.waitDrained(context.Background(), time.Minute) {
		t.Fatal("drained without a reader")
	}
}

// TestWaitDrainedForTheFirstReader: a job that ends before the gateway's
// first read waits for it: its output and result reach the gateway.
func TestWaitDrainedForTheFirstReader(t *testing.T) {
	l := newOutputLog()
	fmt.Fprintln(l.writer(false), "final rank=0")
	l.finish(JobResult{Code: 0, Message: "done"})
	got := make(chan amOutput, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the gateway's next poll
		got <- l.since(context.Background(), 0, time.Second)
	}()
	if !l.waitDrained(context.Background(), time.Minute) {
		t.Fatal("the AM did not wait for the gateway's first read")
	}
	if out := <-got; len(out.Lines) != 1 || out.Done == nil {
		t.Fatalf("the gateway read %+v, want the line and the result", out)
	}
}

// TestOutputNeedsSecret: the output API answers only with the AM secret.
func TestOutputNeedsSecret(t *testing.T) {
	l := newOutputLog()
	io.WriteString(l.writer(false), "secret-free line\n")
	l.finish(JobResult{Code: 0, Message: "ok"})
	srv := httptest.NewServer(amHandlers{signer: testSigner(t, "s3cret-of-sixteen"), events: newEventLog(), output: l}.mux())
	defer srv.Close()
	var out amOutput
	bad := &amClient{base: srv.URL, signer: testSigner(t, "wrong-secret-0123"), http: srv.Client()}
	if err := bad.do(context.Background(), http.MethodGet, "/v1/output?after=0", nil, &out); err == nil || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("wrong secret: %v", err)
	}
	good := &amClient{base: srv.URL, signer: testSigner(t, "s3cret-of-sixteen"), http: srv.Client()}
	if err := good.do(context.Background(), http.MethodGet, "/v1/output?after=0", nil, &out); err != nil || len(out.Lines) != 1 || out.Done == nil {
		t.Fatalf("output %+v: %v", out, err)
	}
}

func TestResultOf(t *testing.T) {
	id, _ := client.ParseAppID("application_1_0002")
	for _, tc := range []struct {
		state  hadooppb.YarnApplicationStateProto
		final  hadooppb.FinalApplicationStatusProto
		code   int
		substr string
	}{
		{hadooppb.YarnApplicationStateProto_FINISHED, hadooppb.FinalApplicationStatusProto_APP_SUCCEEDED, 0, "succeeded"},
		{hadooppb.YarnApplicationStateProto_KILLED, hadooppb.FinalApplicationStatusProto_APP_KILLED, ExitKilled, "was killed by a user (yarn application -kill / spindle kill)"},
		{hadooppb.YarnApplicationStateProto_FAILED, hadooppb.FinalApplicationStatusProto_APP_FAILED, 1, "failed (FAILED): diag"},
	} {
		r := &hadooppb.ApplicationReportProto{YarnApplicationState: tc.state.Enum(), FinalApplicationStatus: tc.final.Enum(), Diagnostics: proto.String("diag")}
		got := resultOf(id, r)
		if got.Code != tc.code || !strings.Contains(got.Message, tc.substr) || !strings.Contains(got.Message, "application_1_0002") {
			t.Errorf("%v/%v: %+v", tc.state, tc.final, got)
		}
	}
}
