package python

import (
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"io/fs"
	"path"
	"sort"
	"sync"
)

// files holds the Python sources. Only .py files are embedded: neither
// __pycache__ nor editor leftovers reach the binary.
//
//go:embed spindle/*.py
var files embed.FS

// PackageName is the import name of the Python package, and the name of
// its directory inside an unpacked tree.
const PackageName = "spindle"

// FS returns the embedded package: a tree holding PackageName/*.py.
func FS() fs.FS { return files }

// Version returns a short hash of the embedded package's file names and
// contents. It names the unpacked directory, so a binary with different
// Python sources never reuses another binary's tree.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	names, err := fs.Glob(files, path.Join(PackageName, "*.py"))
	if err != nil {
		panic("python: glob the embedded package: " + err.Error()) // the pattern is constant
	}
	sort.Strings(names)
	h := sha256.New()
	var n [8]byte
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			panic("python: read embedded " + name + ": " + err.Error())
		}
		// Length-prefixed, so no two different trees hash the same way.
		binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
		h.Write(n[:])
		h.Write([]byte(name))
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})
