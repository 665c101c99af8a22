package task

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/task/resume"
	"github.com/spindle-ml/spindle/timeline"
)

// Checkpoint errors.
var (
	// ErrNoCheckpoint is returned (together with fs.ErrNotExist) when a
	// checkpoint, or any checkpoint, is absent.
	ErrNoCheckpoint = errors.New("task: no checkpoint")
	// ErrNoCheckpointDir is returned by the Env methods when the job was
	// submitted without --checkpoint-dir.
	ErrNoCheckpointDir = errors.New("task: the job has no checkpoint directory (submit with --checkpoint-dir)")
)

// checkpointBuffer is the write and read buffer of a checkpoint stream.
const checkpointBuffer = 1 << 20

// SaveCheckpoint writes checkpoint name into dir (a local path, or a
// file:// or hdfs:// URI; it is created if missing). write streams the
// checkpoint's bytes. The checkpoint goes to a temporary file that replaces
// dir/name only once write returned nil and every byte is stored, so a
// failed, cancelled or crashed save never leaves a checkpoint that looks
// complete, and the previous one under the same name stays until then.
func SaveCheckpoint(ctx context.Context, dir, name string, write func(io.Writer) error) (err error) {
	if err := checkName(name); err != nil {
		return err
	}
	defer timeline.Start(timeline.CatCheckpoint, "save "+name)()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, dir)
	if err != nil {
		return fmt.Errorf("save checkpoint %s in %s: %w", name, dir, err)
	}
	if err := fsys.MkdirPrivate(ctx, fsy, d); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	af, err := fsys.CreatePrivate(ctx, fsy, path.Join(d, name))
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	committed := false
	defer func() {
		if !committed {
			af.Abort() // also when write panics
		}
	}()
	bw := bufio.NewWriterSize(af, checkpointBuffer)
	if err := write(bw); err != nil {
		return fmt.Errorf("save checkpoint %s in %s: %w", name, dir, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save checkpoint %s in %s: %w", name, dir, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("save checkpoint %s in %s: %w", name, dir, err)
	}
	committed = true
	if err := af.Commit(); err != nil {
		return fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	return nil
}

// LoadCheckpoint opens checkpoint name in dir and passes its bytes to
// read. A missing checkpoint is an error satisfying both
// errors.Is(err, ErrNoCheckpoint) and errors.Is(err, fs.ErrNotExist).
func LoadCheckpoint(ctx context.Context, dir, name string, read func(io.Reader) error) error {
	if err := checkName(name); err != nil {
		return err
	}
	defer timeline.Start(timeline.CatCheckpoint, "load "+name)()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, dir)
	if err != nil {
		return fmt.Errorf("load checkpoint %s from %s: %w", name, dir, err)
	}
	f, err := fsy.Open(ctx, path.Join(d, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("load checkpoint %s: %w: %w", name, ErrNoCheckpoint, err)
		}
		return fmt.Errorf("load checkpoint %s: %w", name, err)
	}
	defer f.Close()
	if err := read(bufio.NewReaderSize(f, checkpointBuffer)); err != nil {
		return fmt.Errorf("load checkpoint %s from %s: %w", name, dir, err)
	}
	return nil
}

// LatestCheckpoint returns the name of the newest checkpoint in dir whose
// name starts with prefix, ordering names with their numbers compared as
// numbers ("step-10" after "step-9"). Temporary files of saves in progress
// are never returned. With none it returns an error satisfying
// errors.Is(err, ErrNoCheckpoint).
func LatestCheckpoint(ctx context.Context, dir, prefix string) (string, error) {
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fsy, d, err := res.Resolve(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("find the latest checkpoint in %s: %w", dir, err)
	}
	infos, err := fsy.ReadDir(ctx, d)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%w in %s: %w", ErrNoCheckpoint, dir, err)
		}
		return "", fmt.Errorf("find the latest checkpoint: %w", err)
	}
	var names []string
	for _, fi := range infos {
		n := fi.Name()
		if !fi.IsDir() && strings.HasPrefix(n, prefix) && !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%w named %s* in %s: %w", ErrNoCheckpoint, prefix, dir, fs.ErrNotExist)
	}
	sort.Slice(names, func(i, j int) bool { return resume.NaturalLess(names[i], names[j]) })
	return names[len(names)-1], nil
}

// SaveCheckpoint saves checkpoint name in the job's checkpoint directory;
// see the function SaveCheckpoint.
func (e Env) SaveCheckpoint(ctx context.Context, name string, write func(io.Writer) error) error {
	if e.CheckpointDir == "" {
		return ErrNoCheckpointDir
	}
	return SaveCheckpoint(ctx, e.CheckpointDir, name, write)
}

// LoadCheckpoint loads checkpoint name from the job's checkpoint
// directory; see the function LoadCheckpoint.
func (e Env) LoadCheckpoint(ctx context.Context, name string, read func(io.Reader) error) error {
	if e.CheckpointDir == "" {
		return ErrNoCheckpointDir
	}
	return LoadCheckpoint(ctx, e.CheckpointDir, name, read)
}

// LatestCheckpoint returns the newest checkpoint named prefix* in the
// job's checkpoint directory; see the function LatestCheckpoint.
func (e Env) LatestCheckpoint(ctx context.Context, prefix string) (string, error) {
	if e.CheckpointDir == "" {
		return "", ErrNoCheckpointDir
	}
	return LatestCheckpoint(ctx, e.CheckpointDir, prefix)
}

// checkName accepts a plain file name that is not hidden: names starting
// with "." are where saves in progress live.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("task: checkpoint name %q: want a file name without '/' that does not start with '.'", name)
	}
	return nil
}
