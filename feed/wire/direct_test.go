package wire

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/feed"
)

func sampleSpec() DirectSpec {
	return DirectSpec{
		Rank: 1, WorldSize: 2, Epochs: 3, BatchRows: 1024,
		Columns: []string{"f0", "f1"}, LabelColumn: "label", Shuffle: true, Seed: 42,
		EvenBatches: feed.EvenPad, TargetBatches: 37, EpochRowLimit: 37888, ShuffleBufferRows: 65536,
		CSV: &DirectCSV{Delimiter: ",", Header: true},
		Splits: []feed.Split{
			{URI: "file:///data/part-0.parquet", Format: feed.FormatParquet, RowGroups: []int{0, 1}, Rows: 20000},
			{URI: "file:///data/part-1.arrow", Format: feed.FormatArrow, Batches: []int{3, 4}, Rows: 8192},
			{URI: "hdfs://nn:8020/data/x.csv", Format: feed.FormatCSV, Offset: 0, Length: 1 << 20, Rows: 9731, Hosts: []string{"dn1"}},
		},
	}
}

func TestDirectSpecRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "feed.json")
	spec := sampleSpec()
	if err := WriteDirectSpec(path, spec); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDirectSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	spec.Version = DirectVersion
	if !reflect.DeepEqual(got, spec) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, spec)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only the spec (no temporary files)", len(entries))
	}

	// The documented field names, checked on the raw JSON.
	raw, _ := os.ReadFile(path)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "rank", "world_size", "epochs", "batch_rows", "columns", "label_column", "shuffle", "seed",
		"even_batches", "target_batches", "epoch_row_limit", "shuffle_buffer_rows", "csv", "splits"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks the documented key %q: %s", k, raw)
		}
	}
	split0 := m["splits"].([]any)[0].(map[string]any)
	for _, k := range []string{"uri", "format", "row_groups", "rows"} {
		if _, ok := split0[k]; !ok {
			t.Errorf("split JSON lacks the documented key %q", k)
		}
	}
}

// TestDirectSpecDocumentedExample reads the example printed in
// docs/feed-protocol.md, so the doc and the code cannot drift apart.
func TestDirectSpecDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/feed-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/feed-protocol.md has no ```json example")
	}
	path := filepath.Join(t.TempDir(), "feed.json")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDirectSpec(path)
	if err != nil {
		t.Fatalf("documented example: %v", err)
	}
	want := sampleSpec()
	want.Version, want.Rank = 1, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("documented example reads as\n%+v\nwant\n%+v", got, want)
	}
}

func TestDirectSpecErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		path string
		want string
	}{
		{"missing file", filepath.Join(dir, "nope.json"), "nope.json"},
		{"not json", write("bad.json", "{"), "bad.json"},
		{"no version", write("nover.json", `{"rank":0,"world_size":1,"epochs":1,"batch_rows":1}`), "no version"},
		{"newer version", write("v2.json", `{"version":2,"rank":0,"world_size":1,"epochs":1,"batch_rows":1}`), "version 2 is newer"},
		{"rank out of range", write("rank.json", `{"version":1,"rank":2,"world_size":2,"epochs":1,"batch_rows":1}`), "rank 2 is outside 0..1"},
		{"bad format", write("fmt.json", `{"version":1,"rank":0,"world_size":1,"epochs":1,"batch_rows":1,"splits":[{"uri":"file:///a","format":"orc"}]}`), "split 0 (file:///a)"},
		{"csv without layout", write("csv.json", `{"version":1,"rank":0,"world_size":1,"epochs":1,"batch_rows":1,"splits":[{"uri":"file:///a.csv","format":"csv"}]}`), "no csv layout"},
		{"bad even mode", write("even.json", `{"version":1,"rank":0,"world_size":1,"epochs":1,"batch_rows":1,"even_batches":"maybe"}`), "even_batches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadDirectSpec(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReadDirectSpec: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Unknown fields are a newer executor's additions, not errors.
	p := write("extra.json", `{"version":1,"rank":0,"world_size":1,"epochs":1,"batch_rows":1,"future":true}`)
	if _, err := ReadDirectSpec(p); err != nil {
		t.Fatalf("unknown field: %v", err)
	}
	// A bad spec is not written at all.
	bad := sampleSpec()
	bad.Epochs = 0
	out := filepath.Join(dir, "out.json")
	if err := WriteDirectSpec(out, bad); err == nil || !strings.Contains(err.Error(), "epochs 0") {
		t.Fatalf("WriteDirectSpec with 0 epochs: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused spec left a file behind: %v", err)
	}
}

// A pushed feed's split spec may list Arrow Flight endpoints, which a
// direct reader cannot read: WriteSplitsSpec writes them (a flight job's
// executor must not fail on it), WriteDirectSpec refuses them.
func TestWriteSplitsSpecTakesFlights(t *testing.T) {
	spec := DirectSpec{WorldSize: 1, Epochs: 1, BatchRows: 8,
		Splits: []feed.Split{{URI: "grpc://h:1/f#endpoint=0", Format: feed.FormatFlight, Ticket: []byte{0, 1}}}}
	path := filepath.Join(t.TempDir(), "splits.json")
	if err := WriteDirectSpec(path, spec); err == nil {
		t.Fatal("WriteDirectSpec took a flight split that direct readers cannot read")
	}
	if err := WriteSplitsSpec(path, spec); err != nil {
		t.Fatalf("WriteSplitsSpec: %v", err)
	}
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"format": "flight"`) || !strings.Contains(string(js), `"ticket": "AAE="`) {
		t.Errorf("the spec lacks the flight split:\n%s", js)
	}
}
