package server

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// TestTableOnHugePages checks that a table larger than a few huge pages
// lies on transparent huge pages where the kernel gives them to memory
// that asks: its rows' slabs and its index, in a process whose heap has
// none otherwise (the kernel's setting "madvise").
func TestTableOnHugePages(t *testing.T) {
	if !hugePagesAdvisable() {
		t.Skip("the kernel gives no transparent huge pages on request")
	}
	tb := newTable(&pspb.TableSpec{Name: "emb", Dim: 64, Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad}, Initializer: &pspb.Initializer{}})
	keys := make([]uint64, 1<<15)
	for i := range keys {
		keys[i] = uint64(i)
	}
	if err := tb.ensure(keys, &budget{}); err != nil {
		t.Fatal(err)
	}
	s := &tb.shards[0]
	if got := hugeBytesAt(t, uintptr(unsafe.Pointer(&s.data[0]))); got == 0 {
		t.Errorf("shard 0's rows (%d KiB) lie on no huge page", cap(s.data)*4>>10)
	}
}

// hugeBytesAt returns the AnonHugePages of the mapping that holds addr,
// from /proc/self/smaps.
func hugeBytesAt(t *testing.T, addr uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("smaps: no mapping holds %#x", addr)
	return 0
}

func TestTHPAdvisable(t *testing.T) {
	for setting, want := range map[string]bool{
		"always [madvise] never\n": true,
		"[always] madvise never\n": true,
		"always madvise [never]\n": false,
		"[always] never\n":         true,
		"":                         false,
	} {
		if got := thpAdvisable(setting); got != want {
			t.Errorf("thpAdvisable(%q) = %v, want %v", setting, got, want)
		}
	}
}

// TestTableSameRowsOnHugePages checks that a table's rows are bit for bit
// the same whether its slabs are advised onto huge pages (and collapsed
// there as they grow) or left as the heap gives them.
func TestTableSameRowsOnHugePages(t *testing.T) {
	run := func(advisable bool) []float32 {
		old := hugePagesAdvisable
		hugePagesAdvisable = func() bool { return advisable }
		defer func() { hugePagesAdvisable = old }()
		tb := newTable(&pspb.TableSpec{Name: "emb", Dim: 64, Optimizer: &pspb.Optimizer{Kind: ps.AdaGrad, LearningRate: 0.1}, Initializer: &pspb.Initializer{Kind: ps.Uniform, Scale: 0.1, Seed: 7}})
		var bud budget
		keys := make([]uint64, 1<<14)
		grads := make([]float32, len(keys)*64)
		for i := range grads {
			grads[i] = float32(i%97) / 97
		}
		// Rows created over several pushes: the slabs grow (and are
		// advised again) between them.
		for round := range 4 {
			for i := range keys {
				keys[i] = uint64(round*len(keys)/2 + i*3)
			}
			if err := tb.push(keys, grads, &bud); err != nil {
				t.Fatal(err)
			}
		}
		out := make([]float32, len(keys)*64)
		if err := tb.pull(keys, out, &bud); err != nil {
			t.Fatal(err)
		}
		return out
	}
	on, off := run(true), run(false)
	for i := range on {
		if math.Float32bits(on[i]) != math.Float32bits(off[i]) {
			t.Fatalf("value %d: %v on huge pages, %v without", i, on[i], off[i])
		}
	}
}
