package feed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// listedFile is an input file found while listing the inputs.
type listedFile struct {
	uri  string
	fs   fsys.FS
	name string
	size int64
}

// listInputs expands the inputs into files, in input order, each file
// once. perInput lists the URIs each input matched. Directories and globs
// stand for the data files they hold: names starting with _ or . are
// skipped, and so, when format is empty, are names that tell no format
// (a model.json or README beside the data).
func listInputs(ctx context.Context, res *fsys.Resolver, inputs []string, format Format) ([]listedFile, [][]string, error) {
	isData := func(name string) bool {
		if hidden(path.Base(name)) {
			return false
		}
		_, ok := FormatFromPath(name)
		return ok || format != ""
	}
	var out []listedFile
	seen := map[string]bool{}
	perInput := make([][]string, len(inputs))
	for i, in := range inputs {
		if strings.TrimSpace(in) == "" {
			return nil, nil, fmt.Errorf("%w: input %d is empty", ErrInput, i+1)
		}
		fsy, name, err := res.Resolve(ctx, in)
		if err != nil {
			return nil, nil, planError(ctx, "input "+in, err)
		}
		var files []listedFile
		if strings.ContainsAny(name, `*?[\`) {
			matches, err := fsy.Glob(ctx, name)
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
				if _, ok := FormatFromPath(m); !ok && format == "" {
					continue // not data, beside the data
				}
				files = append(files, listedFile{uri: fsys.JoinURI(in, m), fs: fsy, name: m, size: fi.Size()})
			}
			if len(matches) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: no file matches the pattern", ErrInput, in)
			}
			if len(files) == 0 {
				return nil, nil, fmt.Errorf("%w: input %s: the pattern matches no data files (names ending .parquet, .arrow or .csv; "+
					"names starting with _ or . are skipped)", ErrInput, in)
			}
		} else {
			fi, err := fsy.Stat(ctx, name)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("%w: input %s: no such file or directory", ErrInput, in)
			}
			if err != nil {
				return nil, nil, planError(ctx, "input "+in, err)
			}
			if fi.IsDir() {
				if files, err = listDir(ctx, fsy, in, name, isData); err != nil {
					return nil, nil, err
				}
				if len(files) == 0 {
					return nil, nil, fmt.Errorf("%w: input %s: the directory holds no data files (names ending .parquet, .arrow or .csv; "+
						"names starting with _ or . are skipped)", ErrInput, in)
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

// listDir lists the data files directly inside dir.
func listDir(ctx context.Context, fsy fsys.FS, input, dir string, isData func(string) bool) ([]listedFile, error) {
	entries, err := fsy.ReadDir(ctx, dir)
	if err != nil {
		return nil, planError(ctx, "input "+input+": list "+dir, err)
	}
	var out []listedFile
	for _, e := range entries {
		if e.IsDir() || !isData(e.Name()) {
			continue
		}
		name := path.Join(dir, e.Name())
		out = append(out, listedFile{uri: fsys.JoinURI(input, name), fs: fsy, name: name, size: e.Size()})
	}
	return out, nil
}

// hidden reports whether a file name is one Hadoop tools treat as not
// data (_SUCCESS, _metadata, .part-0.crc).
func hidden(name string) bool { return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") }
