package rowsum

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Hash is SplitMix64's finaliser, a bijection on uint64.
func Hash(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

var line = regexp.MustCompile(`rowcheck rank=(\d+) generation=(\d+) epoch=(\d+) rows=(\d+) hash=([0-9a-f]+)`)

// Check reads the lines of the last generation in out and returns an
// error naming every epoch of epochs that did not feed each of rows row
// ids exactly once over ranks ranks. checked counts the epochs checked.
func Check(out string, ranks, epochs, rows int) (checked int, err error) {
	var want uint64
	for id := range rows {
		want += Hash(uint64(id))
	}
	type key struct{ rank, epoch int }
	ms := line.FindAllStringSubmatch(out, -1)
	last := -1
	for _, m := range ms {
		gen, _ := strconv.Atoi(m[2])
		last = max(last, gen)
	}
	got := map[key][2]uint64{}
	seen := map[int]bool{}
	for _, m := range ms {
		rank, _ := strconv.Atoi(m[1])
		gen, _ := strconv.Atoi(m[2])
		epoch, _ := strconv.Atoi(m[3])
		n, _ := strconv.ParseUint(m[4], 10, 64)
		h, _ := strconv.ParseUint(m[5], 16, 64)
		if gen != last {
			continue // rolled back with its generation
		}
		seen[rank] = true
		got[key{rank, epoch}] = [2]uint64{n, h}
	}
	if len(seen) != ranks {
		return 0, fmt.Errorf("%d ranks of the last generation reported their rows, want %d", len(seen), ranks)
	}
	var bad []string
	for e := range epochs {
		var n, h uint64
		for r := range ranks {
			n += got[key{r, e}][0]
			h += got[key{r, e}][1]
		}
		checked++
		if n != uint64(rows) || h != want {
			bad = append(bad, fmt.Sprintf("epoch %d took %d rows (checksum %016x; want each of the %d rows once, %016x)", e, n, h, rows, want))
		}
	}
	if len(bad) > 0 {
		return checked, fmt.Errorf("rows lost or fed twice: %s", strings.Join(bad, "; "))
	}
	return checked, nil
}

// WriteIDs writes a CSV input of rows rows whose column id holds the row
// ids 0..rows-1 (the ids Check expects) and column x a small feature, and
// returns its path: ids.csv in dir.
func WriteIDs(dir string, rows int) (string, error) {
	var b strings.Builder
	b.WriteString("id,x\n")
	for id := range rows {
		fmt.Fprintf(&b, "%d,%d\n", id, id%3)
	}
	path := filepath.Join(dir, "ids.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write the row ids: %w", err)
	}
	return path, nil
}
