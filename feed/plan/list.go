package plan

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed"
)

// listedFile is an input file found while listing the inputs.
type listedFile struct {
	uri  string
	fs   fsys.FS
	name string
	size int64
	// partition holds the values of the requested partition columns, from
	// the key=value directories on the file's path.
	partition map[string]string
}

// listInputs expands the inputs into files, in input order, each file
// once. perInput lists the URIs each input matched. Directories and globs
// stand for the data files they hold: names starting with _ or . are
// skipped, and so, when format is empty, are names that tell no format
// (a model.json or README beside the data).
func listInputs(ctx context.Context, res *fsys.Resolver, inputs []string, format feed.Format) ([]listedFile, [][]string, error) {
	isData := func(name string) bool {
		if hidden(path.Base(name)) {
			return false
		}
		_, ok := feed.FormatFromPath(name)
		return ok || format != ""
	}
	var out []listedFile
	seen := map[string]bool{}
	perInput := make([][]string, len(inputs))
	for i, in := range inputs {
		if strings.TrimSpace(in) == "" {
			return nil, nil, fmt.Errorf("%w: input %d is empty", feed.ErrInput, i+1)
		}
		fsy, name, err := res.Resolve(ctx, in)
		if err != nil {
			return nil, nil, planError(ctx, "input "+in, err)
		}
		var files []listedFile
		if strings.ContainsAny(name, `*?[{\`) {
			matches, err := globBraces(ctx, fsy, name)
			if err != nil {
				return nil, nil, planError(ctx, "input "+in, err)
			}
			last := path.Base(name)
			hiddenOK := strings.HasPrefix(last, ".") || strings.HasPrefix(last, "_")
			for _, m := range matches {
				if hidden(path.Base(m)) && !hiddenOK {
					continue
				}
				fi, err := fsy.Stat(ctx, m)
				if err != nil {
					return nil, nil, planError(ctx, "input "+in, err)
				}
				if fi.IsDir() {
					fs, err := listDir(ctx, fsy, in, m, isData)
					if err != nil {
						return nil, nil, err
					}
					files = append(files, fs...)
					continue
				}
				if _, ok := feed.FormatFromPath(m); !ok && format == "" {
					continue // not data, beside the data
				}
				files = append(files, listedFile{uri: fsys.JoinURI(in, m), fs: fsy, name: m, size: fi.Size()})
			}
			if len(matches) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: no file matches the pattern", feed.ErrInput, in)
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: the pattern matches no data files (names ending .parquet, .arrow or .csv; "+
					"names starting with _ or . are skipped)", feed.ErrInput, in)
			}
		} else {
			fi, err := fsy.Stat(ctx, name)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: input %s: no such file or directory", feed.ErrInput, in)
			}
			if err != nil {
				return nil, nil, planError(ctx, "input "+in, err)
			}
			if fi.IsDir() {
				if files, err = listDir(ctx, fsy, in, name, isData); err != nil {
					return nil, nil, err
				}
				if len(files) == 0 {
					return nil, nil, fmt.Errorf("%w: input %s: the directory holds no data files, searched recursively (names ending .parquet, .arrow, .csv or .tsv, "+
						"compressed CSV too; names starting with _ or . are skipped)", feed.ErrInput, in)
				}
			} else {
				files = []listedFile{{uri: fsys.JoinURI(in, name), fs: fsy, name: name, size: fi.Size()}}
			}
		}
		for _, f := range files {
			perInput[i] = append(perInput[i], f.uri)
			if !seen[f.uri] {
				seen[f.uri] = true
				out = append(out, f)
			}
		}
	}
	return out, perInput, nil
}

// listDir lists the data files inside dir and, recursively, inside its
// subdirectories (Hive-style partitions such as dt=2026-11-01/), skipping
// the directories whose names start with _ or . (_temporary, .staging),
// in name order, files before the subdirectories beside them.
func listDir(ctx context.Context, fsy fsys.FS, input, dir string, isData func(string) bool) ([]listedFile, error) {
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		return nil, planError(ctx, "input "+input+": list "+dir, err)
	}
	var out []listedFile
	var subdirs []string
	for _, e := range entries {
		name := path.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if !hidden(e.Name()) {
				subdirs = append(subdirs, name)
			}
		case isData(e.Name()):
			out = append(out, listedFile{uri: fsys.JoinURI(input, name), fs: fsy, name: name, size: e.Size()})
		}
	}
	for _, sub := range subdirs {
		files, err := listDir(ctx, fsy, input, sub, isData)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

// globBraces returns the names matching pattern, which may hold Hadoop's
// brace alternatives ({a,b}, nested, across path elements) besides
// path.Match meta characters, sorted, each once.
func globBraces(ctx context.Context, fsy fsys.FS, pattern string) ([]string, error) {
	patterns, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range patterns {
		matches, err := fsy.Glob(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// maxBraceExpansions bounds the patterns one input expands to.
const maxBraceExpansions = 4096

// expandBraces expands brace alternatives as Hadoop's GlobExpander does:
// "part-{0,1}.csv" is part-0.csv and part-1.csv, "{a,b{c,d}}" is a, bc and
// bd. A backslash keeps the next character literal.
func expandBraces(p string) ([]string, error) {
	open := -1
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			open = i
		}
		if open >= 0 {
			break
		}
	}
	if open < 0 {
		return []string{p}, nil
	}
	// Find the alternatives of the first brace, at depth one.
	var alts []string
	depth, start, end := 0, open+1, -1
	for i := open; i < len(p) && end < 0; i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				alts = append(alts, p[start:i])
				end = i
			}
		case ',':
			if depth == 1 {
				alts = append(alts, p[start:i])
				start = i + 1
			}
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("pattern %q: unmatched {", p)
	}
	var out []string
	for _, a := range alts {
		more, err := expandBraces(p[:open] + a + p[end+1:])
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
		if len(out) > maxBraceExpansions {
			return nil, fmt.Errorf("pattern %q expands to more than %d patterns", p, maxBraceExpansions)
		}
	}
	return out, nil
}

// hidden reports whether a file name is one Hadoop tools treat as not
// data (_SUCCESS, _metadata, .part-0.crc).
func hidden(name string) bool { return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") }
