package executor

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// shipped is what --archives, --py-files and spindle.python add to a
// training process once its files are in place.
type shipped struct {
	// command is the training command, its interpreter replaced when
	// spindle.python names one.
	command []string
	// pythonPath are entries to put first on PYTHONPATH (--py-files).
	pythonPath []string
}

// prepareShipped unpacks t's archives (once per host and content, in
// cache) and links them into filesDir under their aliases,
// copies its py-files there, links both into procDir (the process's
// working directory) when that is the executor's own, and works out the
// command and PYTHONPATH entries.
func prepareShipped(ctx context.Context, res *fsys.Resolver, cache *archiveCache, t *Task, filesDir, procDir string) (shipped, error) {
	out := shipped{command: t.Command}
	// --files (already in filesDir) are placed in the working directory
	// too, as spark-submit places them: --files train.py -- python3 train.py.
	var names []string
	for _, f := range t.Files {
		names = append(names, path.Base(filepath.ToSlash(f)))
	}
	for _, a := range t.Archives {
		uri, alias := splitArchive(a)
		dir, _, err := cache.unpack(ctx, res, uri)
		if err != nil {
			return out, fmt.Errorf("unpack --archives %s: %w", a, err)
		}
		if err := os.MkdirAll(filesDir, 0o755); err != nil {
			return out, fmt.Errorf("create files directory: %w", err)
		}
		if err := linkInto(filesDir, dir, alias); err != nil {
			return out, err
		}
		names = append(names, alias)
	}
	if len(t.PyFiles) > 0 {
		if err := localizeFiles(ctx, res, t.PyFiles, filesDir); err != nil {
			return out, fmt.Errorf("--py-files: %w", err)
		}
		dirOnPath := false
		for _, f := range t.PyFiles {
			name := path.Base(filepath.ToSlash(f))
			names = append(names, name)
			if strings.HasSuffix(name, ".py") {
				if !dirOnPath {
					out.pythonPath = append(out.pythonPath, filesDir)
					dirOnPath = true
				}
				continue
			}
			out.pythonPath = append(out.pythonPath, filepath.Join(filesDir, name))
		}
	}
	if procDir != "" {
		for _, name := range names {
			if err := linkInto(procDir, filepath.Join(filesDir, name), name); err != nil {
				return out, err
			}
		}
	}
	if t.Python != "" && len(t.Command) > 0 && isPythonCommand(t.Command[0]) {
		py := t.Python
		// A relative interpreter may live in an archive (env/bin/python).
		if !filepath.IsAbs(py) && strings.Contains(py, "/") {
			if _, err := os.Stat(filepath.Join(filesDir, py)); err == nil {
				py = filepath.Join(filesDir, py)
			}
		}
		out.command = append([]string{py}, t.Command[1:]...)
	}
	return out, nil
}

// splitArchive splits "uri#alias" (the driver always sends the alias).
func splitArchive(a string) (uri, alias string) {
	if i := strings.LastIndexByte(a, '#'); i >= 0 {
		return a[:i], a[i+1:]
	}
	return a, path.Base(filepath.ToSlash(a))
}

// isPythonCommand says whether a training command's first word runs
// Python, so that spindle.python replaces it: python, python3, python3.11.
func isPythonCommand(arg0 string) bool {
	base := filepath.Base(arg0)
	if base == "python" || base == "python3" {
		return true
	}
	rest, ok := strings.CutPrefix(base, "python3.")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// linkInto makes dir/name a symbolic link to target, unless dir/name is
// target already.
func linkInto(dir, target, name string) error {
	link := filepath.Join(dir, name)
	if link == target {
		return nil
	}
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("place %s in the working directory %s: %w", name, dir, err)
	}
	return nil
}

// prependPythonPath puts dirs first on the PYTHONPATH of env.
func prependPythonPath(env []string, dirs []string) []string {
	if len(dirs) == 0 {
		return env
	}
	add := strings.Join(dirs, string(os.PathListSeparator))
	for i, kv := range env {
		if old, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			if old != "" {
				add += string(os.PathListSeparator) + old
			}
			env[i] = "PYTHONPATH=" + add
			return env
		}
	}
	return append(env, "PYTHONPATH="+add)
}
