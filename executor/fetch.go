package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// shippedScheme is driver.ShippedScheme: a file fetched from the driver.
const shippedScheme = "spindle-driver:///"

// hadoopConfPrefix is driver's name prefix of its Hadoop configuration
// files among those it serves.
const hadoopConfPrefix = "hadoop-conf--"

// fetchShipped downloads the files the task ships from the submit host
// (spindle-driver:///NAME) into dir, once each, and points the task at
// the copies, so the rest of the executor reads them as local files.
func (e *Executor) fetchShipped(ctx context.Context, t *Task, dir string) error {
	got := map[string]string{}
	fetch := func(uri string) (string, error) {
		name, ok := strings.CutPrefix(uri, shippedScheme)
		if !ok {
			return uri, nil
		}
		if p, ok := got[name]; ok {
			return p, nil
		}
		if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
			return "", fmt.Errorf("shipped file %q: not a file name", name)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("create %s: %w", dir, err)
		}
		p := filepath.Join(dir, name)
		if err := e.fetchFile(ctx, name, p); err != nil {
			return "", fmt.Errorf("fetch %s from the driver: %w", name, err)
		}
		got[name] = p
		return p, nil
	}
	if len(t.HadoopConfFiles) > 0 {
		// The driver's Hadoop client configuration: HDFS as it sees it.
		conf := filepath.Join(filepath.Dir(dir), "hadoop-conf")
		if err := os.MkdirAll(conf, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", conf, err)
		}
		for _, name := range t.HadoopConfFiles {
			if name == "" || strings.ContainsAny(name, `/\`) {
				return fmt.Errorf("hadoop configuration file %q: not a file name", name)
			}
			if err := e.fetchFile(ctx, hadoopConfPrefix+name, filepath.Join(conf, name)); err != nil {
				return fmt.Errorf("fetch the driver's Hadoop configuration %s: %w", name, err)
			}
		}
		t.HadoopConfDir = conf
	}
	var err error
	for i, f := range t.Files {
		if t.Files[i], err = fetch(f); err != nil {
			return err
		}
	}
	for i, f := range t.PyFiles {
		if t.PyFiles[i], err = fetch(f); err != nil {
			return err
		}
	}
	for i, a := range t.Archives {
		uri, alias := splitArchive(a)
		if uri, err = fetch(uri); err != nil {
			return err
		}
		t.Archives[i] = uri + "#" + alias
	}
	return nil
}

// fetchFile streams one shipped file into path, whole or not at all, with
// the mode it has on the submit host.
func (e *Executor) fetchFile(ctx context.Context, name, path string) error {
	stream, err := e.client.FetchFile(ctx, &driverpb.FetchFileRequest{Name: name})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	mode, size, n := os.FileMode(0o644), int64(-1), int64(0)
	first := true
	prog := localizeProgressOf(ctx)
	for {
		c, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tmp.Close()
			return err
		}
		if first {
			mode, size, first = os.FileMode(c.GetMode()).Perm(), c.GetSize(), false
			prog.expect(size)
		}
		w, err := tmp.Write(c.GetData())
		n += int64(w)
		prog.read(w)
		if err != nil {
			tmp.Close()
			return err
		}
	}
	if size >= 0 && n != size {
		tmp.Close()
		return fmt.Errorf("got %d of its %d bytes", n, size)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// maxSocketPath is the longest Unix socket path Linux takes (108 bytes
// with the terminating zero).
const maxSocketPath = 107

// longestSocketName is the longest name of a socket in a task's socket
// directory (the feed's shared-memory side channel).
const longestSocketName = "feed.sock.shm"

// socketPathFits reports whether every socket of a task fits in dir.
func socketPathFits(dir string) bool {
	return len(filepath.Join(dir, longestSocketName)) <= maxSocketPath
}

// ownWorkDir is the .spindle directory under the executor's working
// directory, or "" when it cannot be made (the caller then uses a
// temporary directory).
func ownWorkDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	dir := filepath.Join(wd, ".spindle")
	if os.MkdirAll(dir, 0o700) != nil {
		return ""
	}
	return dir
}

// StopReasonFile is where, in its working directory, whoever started the
// executor says why it stops it before signalling (a standalone worker
// shutting down).
const StopReasonFile = ".spindle-stop-reason"

// stopReason reads StopReasonFile, if there is one.
func stopReason() string {
	b, err := os.ReadFile(StopReasonFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
