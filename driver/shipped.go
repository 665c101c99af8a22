package driver

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// reservedEnv are the variables of the training-process environment
// contract that Spindle sets on every rank: a --env for one of them would
// be overridden, so it is refused. (SPINDLE_* names that users set, such
// as SPINDLE_PYARROW, are not among them.)
var reservedEnv = []string{
	"SPINDLE_RANK", "SPINDLE_WORLD_SIZE", "SPINDLE_LOCAL_RANK", "SPINDLE_LOCAL_WORLD_SIZE",
	"SPINDLE_ROLE", "SPINDLE_ROLE_RANK", "SPINDLE_ROLE_WORLD_SIZE", "SPINDLE_ROLES",
	"SPINDLE_FEED", "SPINDLE_FEED_MODE", "SPINDLE_LABEL_COLUMN", "SPINDLE_JOB_ID", "SPINDLE_JOB_SECRET", "SPINDLE_JOB_TLS",
	"SPINDLE_CHECKPOINT_DIR", "SPINDLE_PEERS", "SPINDLE_PEERS_FILE", "SPINDLE_PEER_LISTEN_FD", "SPINDLE_PEER_TOKEN",
	"SPINDLE_COLLECTIVE_TIMEOUT", "SPINDLE_HOST", "SPINDLE_FILES_DIR",
	"SPINDLE_GENERATION", "SPINDLE_RESTART_COUNT",
	"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"TF_CONFIG",
}

// checkEnv refuses --env names that the environment contract sets.
func (c *Config) checkEnv() error {
	for k := range c.Env {
		reserved := false
		for _, r := range reservedEnv {
			reserved = reserved || k == r
		}
		if k == "CUDA_VISIBLE_DEVICES" && c.GPUs > 0 {
			return fmt.Errorf("%w: --env %s: with --executor-gpus %d Spindle gives each rank its own devices in CUDA_VISIBLE_DEVICES; drop one or the other",
				ErrConfig, k, c.GPUs)
		}
		if reserved {
			return fmt.Errorf("%w: --env %s: Spindle sets %s for every rank (the environment contract) and would override it; choose another name",
				ErrConfig, k, k)
		}
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("%w: --env %q: not a variable name", ErrConfig, k)
		}
	}
	return nil
}

// SplitArchive splits an --archives entry into its URI and the name it
// is unpacked under: the alias after '#', else the archive's base name.
func SplitArchive(a string) (uri, name string) {
	if i := strings.LastIndexByte(a, '#'); i >= 0 {
		return a[:i], a[i+1:]
	}
	return a, path.Base(filepath.ToSlash(a))
}

// checkShippedNames refuses two shipped files (--files, --py-files,
// --archives aliases) that would land in the working directory under the
// same name, where the second would silently overwrite the first.
func (c *Config) checkShippedNames() error {
	seen := map[string]string{}
	add := func(flag, entry, name string) error {
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return fmt.Errorf("%w: %s %s: %q is not a file name to place it under", ErrConfig, flag, entry, name)
		}
		if prev, ok := seen[name]; ok {
			return fmt.Errorf("%w: %s and %s %s would both be placed as %s in the working directory; rename one (for an archive, name it with #ALIAS)",
				ErrConfig, prev, flag, entry, name)
		}
		seen[name] = flag + " " + entry
		return nil
	}
	for _, f := range c.Files {
		if err := add("--files", f, path.Base(filepath.ToSlash(f))); err != nil {
			return err
		}
	}
	for _, f := range c.PyFiles {
		if err := add("--py-files", f, path.Base(filepath.ToSlash(f))); err != nil {
			return err
		}
	}
	for _, a := range c.Archives {
		uri, name := SplitArchive(a)
		if !isArchive(uri) {
			return fmt.Errorf("%w: --archives %s: not a .zip, .tar, .tar.gz or .tgz archive", ErrConfig, a)
		}
		if err := add("--archives", a, name); err != nil {
			return err
		}
	}
	return nil
}

// isArchive says whether name has an extension the executor unpacks.
func isArchive(name string) bool {
	n := strings.ToLower(name)
	for _, ext := range []string{".zip", ".tar", ".tar.gz", ".tgz"} {
		if strings.HasSuffix(n, ext) {
			return true
		}
	}
	return false
}

// ResolveShipped checks, before anything runs, the local files a job ships
// (--files, --py-files, --archives) and makes their paths absolute against
// dir (the submit's working directory), so that every executor finds them
// wherever it runs. URIs with a scheme other than file:// (hdfs://) are
// left to the executors.
func (c *Config) ResolveShipped(dir string) error {
	resolve := func(flag, p string) (string, error) {
		local, ok := localPath(p)
		if !ok {
			return p, nil
		}
		if !filepath.IsAbs(local) {
			local = filepath.Join(dir, local)
		}
		st, err := os.Stat(local)
		switch {
		case err != nil:
			return "", fmt.Errorf("%w: %s %s: %v", ErrConfig, flag, p, err)
		case !st.Mode().IsRegular():
			return "", fmt.Errorf("%w: %s %s: %s is not a regular file", ErrConfig, flag, p, local)
		}
		return local, nil
	}
	for i, f := range c.Files {
		r, err := resolve("--files", f)
		if err != nil {
			return err
		}
		c.Files[i] = r
	}
	for i, f := range c.PyFiles {
		r, err := resolve("--py-files", f)
		if err != nil {
			return err
		}
		c.PyFiles[i] = r
	}
	for i, a := range c.Archives {
		uri, name := SplitArchive(a)
		r, err := resolve("--archives", uri)
		if err != nil {
			return err
		}
		c.Archives[i] = r + "#" + name
	}
	return nil
}

// localPath returns the local path p names: p itself, or the path of a
// file:// URI; ok is false for other URIs (hdfs://...).
func localPath(p string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		return rest, true
	}
	if i := strings.Index(p, "://"); i > 0 && !strings.ContainsAny(p[:i], "/") {
		return "", false
	}
	return p, true
}

// interpreters are training programs whose first argument is the script
// they run, shipped with the job as spark-submit ships its primary file.
var interpreters = map[string]bool{"python": true, "python3": true, "bash": true, "sh": true, "Rscript": true, "julia": true}

func isInterpreter(prog string) bool {
	base := filepath.Base(prog)
	if interpreters[base] {
		return true
	}
	// python3.11 and the like.
	return strings.HasPrefix(base, "python3.") || strings.HasPrefix(base, "python2.")
}

// ShipCommand applies one path rule to the training command and the
// parameter servers' (--ps-command), in every mode, for paths relative to
// dir (the submit's working directory): a relative program (-- bin/logreg)
// and an interpreter's script (-- python3 train.py) that exist there
// reach the executors. Local executors run in dir, where a command works
// as given, so only a relative program is made absolute; executors
// elsewhere get the files shipped with the job (--files) and the command
// names them in their working directory. It returns a line per file it
// ships, for the user.
func (c *Config) ShipCommand(dir string, local bool) []string {
	var notes []string
	c.shipCommand(c.Command, dir, local, "training", &notes)
	c.shipCommand(c.PS.Command, dir, local, "parameter server", &notes)
	return notes
}

// shipCommand rewrites cmd in place as ShipCommand says; role names whose
// program or script it is in the notes.
func (c *Config) shipCommand(cmd []string, dir string, local bool, role string, notes *[]string) {
	if len(cmd) == 0 {
		return
	}
	existing := func(p string) (string, bool) {
		if filepath.IsAbs(p) || strings.HasPrefix(p, "-") {
			return "", false
		}
		abs := filepath.Join(dir, p)
		st, err := os.Stat(abs)
		return abs, err == nil && st.Mode().IsRegular()
	}
	ship := func(abs, what string) string {
		name := filepath.Base(abs)
		for _, f := range c.Files {
			if lp, ok := localPath(f); ok && (lp == abs || filepath.Join(dir, lp) == abs) {
				return name // shipped already
			}
		}
		c.Files = append(c.Files, abs)
		*notes = append(*notes, fmt.Sprintf("shipping %s (%s) to the executors' working directories", abs, what))
		return name
	}
	prog := cmd[0]
	if strings.Contains(prog, "/") {
		if abs, ok := existing(prog); ok {
			if local {
				cmd[0] = abs
			} else {
				cmd[0] = "./" + ship(abs, "the "+role+" program")
			}
			return
		}
	}
	if !isInterpreter(prog) || local {
		return
	}
	for i := 1; i < len(cmd); i++ {
		arg := cmd[i]
		if strings.HasPrefix(arg, "-") {
			if arg == "-m" || arg == "-c" {
				return // a module or inline code: no script file
			}
			continue
		}
		if abs, ok := existing(arg); ok {
			cmd[i] = ship(abs, "the "+role+" script")
		}
		return
	}
}
