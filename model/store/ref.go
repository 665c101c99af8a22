package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
)

// EnvDir is the variable that gives a training process the job's model
// store (spindle.models.dir), the default store of its references.
const EnvDir = "SPINDLE_MODELS_DIR"

// SplitRef splits a model reference as users type it into the store it
// names and the reference inside that store:
//
//	NAME, NAME/VERSION                    in the default store
//	STORE/NAME, STORE/NAME/VERSION        STORE a path, file:// or hdfs:// URI
//
// A reference of two elements is NAME/VERSION when the second is a
// number and STORE/NAME otherwise. storeDir is "" for the default store.
func SplitRef(ref string) (storeDir, inStore string) {
	trimmed := strings.TrimRight(ref, "/")
	head, tail := "", trimmed
	if i := strings.Index(trimmed, "://"); i >= 0 {
		head, tail = trimmed[:i+3], trimmed[i+3:]
	}
	elems := strings.Split(tail, "/")
	last := elems[len(elems)-1]
	_, numbered := versionNumber(last)
	n := 1 // elements of the in-store reference
	if numbered && len(elems) >= 2 {
		n = 2
	}
	isPath := head != "" || strings.HasPrefix(trimmed, "/") || strings.HasPrefix(trimmed, ".")
	if !isPath && len(elems) <= n {
		return "", trimmed
	}
	if len(elems) <= n {
		return head + strings.Join(elems, "/"), ""
	}
	return head + strings.Join(elems[:len(elems)-n], "/"), strings.Join(elems[len(elems)-n:], "/")
}

// OpenRef opens the store ref names (defaultDir when it names none) and
// returns it with the reference inside it.
func OpenRef(ctx context.Context, r *fsys.Resolver, defaultDir, ref string) (*Store, string, error) {
	dir, inStore := SplitRef(ref)
	if inStore == "" {
		return nil, "", fmt.Errorf("model %q: want [STORE/]NAME[/VERSION]: %w", ref, ErrNoStore)
	}
	if dir == "" {
		dir = defaultDir
	}
	if dir == "" {
		return nil, "", fmt.Errorf("model %q: no model store: set spindle.models.dir or give STORE/NAME: %w", ref, ErrNoStore)
	}
	s, err := OpenURI(ctx, r, dir)
	if err != nil {
		return nil, "", err
	}
	return s, inStore, nil
}
