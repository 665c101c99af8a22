package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	t.Cleanup(cancel)
	return ctx
}

func testManifest() Manifest {
	return Manifest{
		JobID:   "job-1",
		Inputs:  []Tensor{{Name: "features", Type: "float", Shape: []int64{-1, 3}}},
		Outputs: []Tensor{{Name: "probability", Type: "double", Shape: []int64{-1, 1}}},
		Feed:    &Feed{Schema: []Column{{Name: "a", Type: "float32"}}, Label: "y"},
		Metrics: map[string]float64{"loss": 0.25},
	}
}

func localStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := filepath.ToSlash(filepath.Join(t.TempDir(), "models"))
	s, err := Open(testCtx(t), fsys.Local(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func TestPublishAndResolve(t *testing.T) {
	ctx := testCtx(t)
	s, dir := localStore(t)
	model := []byte("not really onnx, but bytes")
	for i := 1; i <= 2; i++ {
		v, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, model), BytesSource("weights.bin", []byte{1, 2, 3})}, testManifest())
		if err != nil {
			t.Fatal(err)
		}
		if v.Number != i || v.Manifest.Version != i || v.Dir != fmt.Sprintf("%s/ctr/%d", dir, i) {
			t.Fatalf("publish %d gave %+v", i, v)
		}
	}
	latest, err := s.Resolve(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if latest.Number != 2 || latest.ModelPath != dir+"/ctr/2/model.onnx" {
		t.Fatalf("latest = %+v", latest)
	}
	m := latest.Manifest
	sum := sha256.Sum256(model)
	if m.Name != "ctr" || m.Format != FormatONNX || m.JobID != "job-1" || m.Metrics["loss"] != 0.25 || m.Feed.Label != "y" {
		t.Fatalf("manifest = %+v", m)
	}
	if _, err := time.Parse(time.RFC3339, m.Created); err != nil {
		t.Fatalf("created %q: %v", m.Created, err)
	}
	if len(m.Files) != 2 || m.Files[0] != (File{Path: ModelFile, Size: int64(len(model)), SHA256: hex.EncodeToString(sum[:])}) {
		t.Fatalf("files = %+v", m.Files)
	}
	got, err := os.ReadFile(filepath.FromSlash(latest.ModelPath))
	if err != nil || string(got) != string(model) {
		t.Fatalf("model file = %q, %v", got, err)
	}
	first, err := s.Resolve(ctx, "ctr/1")
	if err != nil || first.Number != 1 {
		t.Fatalf("ctr/1 = %+v, %v", first, err)
	}
	names, err := s.List(ctx)
	if err != nil || strings.Join(names, ",") != "ctr" {
		t.Fatalf("List = %v, %v", names, err)
	}
	vs, err := s.Versions(ctx, "ctr")
	if err != nil || fmt.Sprint(vs) != "[1 2]" {
		t.Fatalf("Versions = %v, %v", vs, err)
	}
}

func TestResolveErrorsNameWhatIsMissing(t *testing.T) {
	ctx := testCtx(t)
	s, dir := localStore(t)
	if _, err := s.List(ctx); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("List of a missing store: %v", err)
	}
	if _, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, []byte("x"))}, testManifest()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  string
		want []string
		is   error
	}{
		{"nope", []string{dir, "model nope"}, ErrNoModel},
		{"nope/2", []string{dir, "model nope"}, ErrNoModel},
		{"ctr/7", []string{dir, "model ctr version 7"}, ErrNoVersion},
		{"ctr/07", []string{"version \"07\""}, nil},
		{"ctr/x", []string{"version \"x\""}, nil},
		{"../etc", []string{"model name \"..\""}, nil},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := s.Resolve(ctx, tc.ref)
			if err == nil {
				t.Fatal("resolved")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
		})
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	ctx := testCtx(t)
	s, _ := localStore(t)
	m := testManifest()
	noInputs := testManifest()
	noInputs.Inputs = nil
	for _, tc := range []struct {
		name string
		srcs []Source
		m    Manifest
		want string
	}{
		{"bad/name", []Source{BytesSource(ModelFile, nil)}, m, "model name"},
		{"ok", []Source{BytesSource("other.bin", nil)}, m, "no model.onnx"},
		{"ok", []Source{BytesSource(ModelFile, nil), BytesSource("../x", nil)}, m, `file "../x"`},
		{"ok", []Source{BytesSource(ModelFile, nil), BytesSource(ManifestFile, nil)}, m, `file "manifest.json"`},
		{"ok", []Source{BytesSource(ModelFile, nil)}, noInputs, "no inputs"},
	} {
		if _, err := s.Publish(ctx, tc.name, tc.srcs, tc.m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("publish %s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// failingReader gives some bytes and then fails, as a source whose disk
// dies mid-copy.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk on fire")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func TestAFailedPublishLeavesNoVersion(t *testing.T) {
	ctx := testCtx(t)
	s, dir := localStore(t)
	broken := Source{Path: "weights.bin", Open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(&failingReader{n: 1 << 20}), nil
	}}
	_, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, []byte("m")), broken}, testManifest())
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "weights.bin") {
		t.Fatalf("publish = %v", err)
	}
	vs, err := s.Versions(ctx, "ctr")
	if err != nil || len(vs) != 0 {
		t.Fatalf("Versions after a failed publish = %v, %v", vs, err)
	}
	entries, _ := os.ReadDir(filepath.Join(filepath.FromSlash(dir), "ctr"))
	if len(entries) != 0 {
		t.Fatalf("the failed publish left %v", entries)
	}
	// A publisher that crashed mid-way (its hidden directory stays, with a
	// manifest even) is invisible, and the next publish is version 1.
	crashed := filepath.Join(filepath.FromSlash(dir), "ctr", ".publish-deadbeef")
	if err := os.MkdirAll(crashed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(crashed, ManifestFile), []byte(`{"format":"onnx"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, "ctr"); !errors.Is(err, ErrNoVersion) {
		t.Fatalf("resolve with only a crashed publish: %v", err)
	}
	v, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, []byte("m"))}, testManifest())
	if err != nil || v.Number != 1 {
		t.Fatalf("publish after a crash = %+v, %v", v, err)
	}
}

func TestConcurrentPublishersGetDistinctVersions(t *testing.T) {
	ctx := testCtx(t)
	s, _ := localStore(t)
	const n = 6
	var wg sync.WaitGroup
	got := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := testManifest()
			m.JobID = fmt.Sprint("job-", i)
			v, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, []byte(m.JobID))}, m)
			if err == nil {
				got[i] = v.Number
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publisher %d: %v", i, err)
		}
		if seen[got[i]] {
			t.Fatalf("version %d published twice: %v", got[i], got)
		}
		seen[got[i]] = true
	}
	// Every version holds the model its manifest says.
	for v := 1; v <= n; v++ {
		ver, err := s.Resolve(ctx, fmt.Sprintf("ctr/%d", v))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.FromSlash(ver.ModelPath))
		if string(b) != ver.Manifest.JobID || ver.Manifest.Version != v {
			t.Fatalf("version %d holds %q with manifest %+v", v, b, ver.Manifest)
		}
	}
}

func TestStoreOnHDFS(t *testing.T) {
	ctx := testCtx(t)
	c := hdfstest.NewTestCluster(t, hdfstest.Config{})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, User: c.Superuser()})
	t.Cleanup(func() { r.Close() })
	uri := c.URI() + "/models"
	s, err := OpenURI(ctx, r, uri)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if _, err := s.Publish(ctx, "ctr", []Source{BytesSource(ModelFile, []byte("m"))}, testManifest()); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.Resolve(ctx, "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if v.Number != 2 || v.URI != uri+"/ctr/2" {
		t.Fatalf("resolved %+v", v)
	}
}
