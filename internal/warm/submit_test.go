package warm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPythonArgv(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string // joined; empty: refused
	}{
		{[]string{"python3", "train.py", "--lr", "0.1"}, "train.py --lr 0.1"},
		{[]string{"/usr/bin/python3.11", "-m", "pkg.train"}, "-m pkg.train"},
		{[]string{"python", "-c", "print(1)", "x"}, "-c print(1) x"},
		{[]string{"train.py", "a"}, "train.py a"},
		{[]string{"ls", "-l"}, ""},
		{[]string{"python3"}, ""},
		{[]string{"python3", "-m"}, ""},
		{[]string{"python3", "-u", "train.py"}, ""},
		{nil, ""},
	} {
		got, err := PythonArgv(tc.in)
		if tc.want == "" {
			if !errors.Is(err, ErrBadRun) {
				t.Errorf("%q: got %q, %v; want refused", tc.in, got, err)
			}
			continue
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestLoadNeedsAPrivateRegistry: a session's record holds its token, so
// it is read only from a directory no one else can write or read.
func TestLoadNeedsAPrivateRegistry(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "reg")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := `{"id":"s1","dir":"/tmp/x","token":"t","num_executors":2}`
	if err := os.WriteFile(filepath.Join(dir, "s1.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Load(dir, "s1"); err != nil || r.NumExecutors != 2 || r.Token != "t" {
		t.Fatalf("Load = %+v, %v", r, err)
	}
	for _, id := range []string{"nope", "../s1", ""} {
		if _, err := Load(dir, id); !errors.Is(err, ErrBadRun) {
			t.Errorf("Load(%q) = %v, want ErrBadRun", id, err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, "s1"); !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), "private") {
		t.Errorf("Load from a 0755 registry = %v, want refused", err)
	}
}

// TestNextJobCountsInTheSession: job numbers are the session's, kept in
// its directory, so that two clients (spindle.Session and spindle submit
// --session) take successive turns on the session's feed.
func TestNextJobCountsInTheSession(t *testing.T) {
	dir := t.TempDir()
	for want := 1; want <= 3; want++ {
		if got, err := NextJob(dir); err != nil || got != want {
			t.Fatalf("NextJob = %d, %v; want %d", got, err, want)
		}
	}
	// The Python client counts in the same file.
	if err := os.WriteFile(filepath.Join(dir, jobsFile), []byte("7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := NextJob(dir); err != nil || got != 8 {
		t.Fatalf("NextJob after another client's job 7 = %d, %v; want 8", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, jobsFile), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NextJob(dir); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Fatalf("NextJob over a broken count = %v, want an error saying so", err)
	}
}

// TestSubmitSendsTheScriptToRanksAway: a rank on another host serves over
// TCP and cannot read the script's file, so its text goes in the request;
// an unreadable script is refused before anything ran, naming the file,
// and counts no job.
func TestSubmitSendsTheScriptToRanksAway(t *testing.T) {
	dir := t.TempDir()
	rec := &Record{ID: "s1", Dir: dir, Token: "t", NumExecutors: 2, Addrs: []string{"", "10.0.0.7:4100"}}
	err := Submit(t.Context(), rec, []string{"train.py"}, dir, io.Discard, io.Discard)
	if !errors.Is(err, ErrBadRun) || !strings.Contains(err.Error(), "script "+filepath.Join(dir, "train.py")) {
		t.Fatalf("Submit = %v, want refused naming the script", err)
	}
	if _, err := os.Stat(filepath.Join(dir, jobsFile)); !os.IsNotExist(err) {
		t.Errorf("a refused run counted a job: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print(1)\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	extra, err := awayRequest(rec, []string{"train.py"}, dir)
	if err != nil || string(extra["script"].([]byte)) != "print(1)\n" {
		t.Errorf("awayRequest = %v, %v; want the script's text", extra, err)
	}
	if extra, err := awayRequest(&Record{NumExecutors: 2}, []string{"train.py"}, dir); extra != nil || err != nil {
		t.Errorf("awayRequest with every rank here = %v, %v; want nothing added", extra, err)
	}
}

// TestMasterPortComesFromRankZero: a run's MASTER_PORT is the one rank 0
// answers (free on its host, where PyTorch's store binds it), asked with
// the session's token; a refusal is the run's error, naming the rank.
func TestMasterPortComesFromRankZero(t *testing.T) {
	dir := t.TempDir()
	rec := &Record{ID: "s1", Dir: dir, Token: "tok", NumExecutors: 2}
	lis, err := net.Listen("unix", filepath.Join(dir, "rank-0.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	answers := []string{`{"port": 41234}`, `{"error": "refused: no valid session token"}`, `{"port": 0}`}
	got := make(chan map[string]any, len(answers))
	go func() {
		for _, a := range answers {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			var req map[string]any
			_ = json.NewDecoder(conn).Decode(&req)
			got <- req
			fmt.Fprintln(conn, a)
			conn.Close()
		}
	}()
	if port, err := masterPort(t.Context(), rec); err != nil || port != 41234 {
		t.Fatalf("masterPort = %d, %v; want rank 0's 41234", port, err)
	}
	if req := <-got; req["op"] != "port" || req["token"] != "tok" {
		t.Errorf("request %v, want op port with the session's token", req)
	}
	if _, err := masterPort(t.Context(), rec); err == nil || !strings.Contains(err.Error(), "session s1 rank 0: refused") {
		t.Errorf("masterPort = %v, want rank 0's refusal", err)
	}
	if _, err := masterPort(t.Context(), rec); err == nil || !strings.Contains(err.Error(), "names no port") {
		t.Errorf("masterPort = %v, want an answer without a port refused", err)
	}
}
