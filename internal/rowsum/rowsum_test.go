package rowsum

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	sum := func(ids ...int) uint64 {
		var h uint64
		for _, id := range ids {
			h += Hash(uint64(id))
		}
		return h
	}
	lineOf := func(rank, gen, epoch int, ids ...int) string {
		return fmt.Sprintf("[rank %d] rowcheck rank=%d generation=%d epoch=%d rows=%d hash=%016x\n", rank, rank, gen, epoch, len(ids), sum(ids...))
	}
	tests := []struct {
		name, out string
		wantErr   string
	}{
		{"each row once", lineOf(0, 1, 0, 0, 2) + lineOf(1, 1, 0, 1, 3), ""},
		{"an earlier generation is ignored", lineOf(0, 0, 0, 0, 1, 2, 3) + lineOf(0, 1, 0, 0, 2) + lineOf(1, 1, 0, 1, 3), ""},
		{"a row twice, one skipped", lineOf(0, 0, 0, 0, 2) + lineOf(1, 0, 0, 1, 1), "epoch 0 took 4 rows"},
		{"a rank missing", lineOf(0, 0, 0, 0, 1, 2, 3), "1 ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check(tt.out, 2, 1, 4)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Check: %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteIDs(t *testing.T) {
	path, err := WriteIDs(t.TempDir(), 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "id,x\n0,0\n1,1\n2,2\n3,0\n"; got != want || filepath.Base(path) != "ids.csv" {
		t.Fatalf("%s holds %q, want ids.csv holding %q", path, got, want)
	}
	if _, err := WriteIDs(filepath.Join(t.TempDir(), "missing"), 1); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}
