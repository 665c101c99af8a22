package parquet

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// TestReadValidity reads definition levels by hand-made runs, and
// refuses cut ones.
func TestReadValidity(t *testing.T) {
	bits := func(bm []byte, n int) string {
		if bm == nil {
			return "all"
		}
		s := make([]byte, n)
		for i := range s {
			s[i] = '0'
			if bitutil.BitIsSet(bm, i) {
				s[i] = '1'
			}
		}
		return string(s)
	}
	tests := []struct {
		name string
		defs []byte
		n    int
		want string
	}{
		{"one run present", []byte{10 << 1, 1}, 10, "all"},
		{"one longer run present", []byte{20 << 1, 1}, 10, "all"},
		{"one run absent", []byte{4 << 1, 0}, 4, "0000"},
		{"run then bit-packed", []byte{3 << 1, 0, 1<<1 | 1, 0b10110101}, 11, "00010101101"},
		{"bit-packed past the end", []byte{1<<1 | 1, 0b11111011}, 5, "11011"},
		{"two runs", []byte{2 << 1, 1, 3 << 1, 0}, 5, "11000"},
	}
	for _, tt := range tests {
		got, err := readValidity(tt.defs, tt.n)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if s := bits(got, tt.n); s != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, s, tt.want)
		}
	}
	for _, bad := range []struct {
		name string
		defs []byte
		n    int
	}{
		{"nothing", nil, 5},
		{"a run without its value", []byte{3 << 1}, 3},
		{"bit-packed bytes missing", []byte{2<<1 | 1, 0xff}, 16},
		{"runs shorter than the page", []byte{2 << 1, 1}, 5},
	} {
		if _, err := readValidity(bad.defs, bad.n); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}
