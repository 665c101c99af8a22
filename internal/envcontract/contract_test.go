package envcontract

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/config"
)

var update = flag.Bool("update", false, "rewrite python/spindle/_contract.py and the README's table from the contract")

const root = "../.."

var (
	pythonContract = filepath.Join(root, "python", "spindle", "_contract.py")
	readme         = filepath.Join(root, "README.md")
)

// known reports whether name is a variable of the contract or around it.
func known(name string) bool {
	_, ok := Lookup(name)
	return ok || name == JobSecret || name == JobTLS || name == PyArrow || name == Binary || name == RunResults || name == ModelsDir ||
		name == SessionsDir || name == SessionDir || name == SessionPreload || name == SessionJob
}

func TestVarsAreWellFormed(t *testing.T) {
	names, ids := map[string]bool{}, map[string]bool{}
	idRe := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for i, v := range Vars {
		if names[v.Name] || ids[v.ID] {
			t.Errorf("variable %s (id %s) listed twice", v.Name, v.ID)
		}
		names[v.Name], ids[v.ID] = true, true
		if !idRe.MatchString(v.ID) {
			t.Errorf("%s: id %q is not a lower-case identifier", v.Name, v.ID)
		}
		if i == 0 && v.Doc == "" {
			t.Errorf("%s: the first variable needs a doc", v.Name)
		}
	}
	timeout, _ := Lookup(CollectiveTimeout)
	if want := strconv.FormatFloat(DefaultCollectiveTimeout.Seconds(), 'f', -1, 64); timeout.Default != want {
		t.Errorf("%s default %q, want %q (DefaultCollectiveTimeout)", CollectiveTimeout, timeout.Default, want)
	}
}

// TestConfigDefaultIsTheContracts checks that the executor's value of
// SPINDLE_COLLECTIVE_TIMEOUT defaults to what readers assume without it.
func TestConfigDefaultIsTheContracts(t *testing.T) {
	k, ok := config.Lookup(config.KeyCollectiveTimeout)
	if !ok {
		t.Fatalf("no key %s", config.KeyCollectiveTimeout)
	}
	if d, err := time.ParseDuration(k.Default); err != nil || d != DefaultCollectiveTimeout {
		t.Fatalf("%s defaults to %q, want %s as DefaultCollectiveTimeout", k.Name, k.Default, DefaultCollectiveTimeout)
	}
}

// TestPythonConstantsGenerated keeps python/spindle/_contract.py equal to
// what the contract renders.
func TestPythonConstantsGenerated(t *testing.T) {
	want := PythonModule()
	if *update {
		if err := os.WriteFile(pythonContract, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(pythonContract)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./internal/envcontract -update", pythonContract)
	}
}

// TestReadmeTable keeps the README's table of the environment equal to
// what the contract renders.
func TestReadmeTable(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, TableBegin), strings.Index(s, TableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s ... %s section", readme, TableBegin, TableEnd)
	}
	got := s[i+len(TableBegin)+1 : j]
	want := MarkdownTable()
	if got == want {
		return
	}
	if !*update {
		t.Fatalf("the environment table in %s is stale: run go test ./internal/envcontract -update", readme)
	}
	s = s[:i+len(TableBegin)+1] + want + s[j:]
	if err := os.WriteFile(readme, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pyEnvName matches a string literal in Python code that names an
// environment variable of the contract's kind.
var pyEnvName = regexp.MustCompile(`["']((?:SPINDLE|MASTER|TF|CUDA|GLOO|NCCL|HADOOP|PYTHON)_[A-Z_]+|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|PYTHONPATH|PYTHONUNBUFFERED)["']`)

// TestPythonSpellsNoName checks that the Python package takes every name
// from _contract.py instead of spelling it again.
func TestPythonSpellsNoName(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "python", "spindle", "*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Python sources: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "_contract.py" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range pyEnvName.FindAllStringSubmatch(line, -1) {
				if known(m[1]) {
					t.Errorf("%s:%d spells %s: use the _contract constant", f, n+1, m[1])
				} else {
					t.Errorf("%s:%d reads %s, which the environment contract does not define", f, n+1, m[1])
				}
			}
		}
	}
}

// TestGoSpellsNoName checks that the Go code writing and reading the
// environment takes every name from this package.
func TestGoSpellsNoName(t *testing.T) {
	for _, dir := range []string{"executor", "task", "collective"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err == nil && known(s) {
					t.Errorf("%s spells %s: use envcontract's constant", fset.Position(lit.Pos()), s)
				}
				return true
			})
		}
	}
}
