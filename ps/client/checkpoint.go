package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// A checkpoint of the tables lives in base/clock-N/: one file per server
// and a manifest (ManifestName), written last, which makes it complete: a
// checkpoint without its manifest (a job killed while writing it) is never
// restored.
const ManifestName = "MANIFEST.json"

// Manifest describes a complete checkpoint of the tables.
type Manifest struct {
	Clock   int64    `json:"clock"`
	Servers int      `json:"servers"`
	Files   []string `json:"files"`
	Keys    uint64   `json:"keys"`
	Bytes   uint64   `json:"bytes"`
}

// ClockAndCheckpoint ends this worker's step, as Clock does, and
// checkpoints every table at this clock under base (a path or hdfs://
// URI): in base/clock-N, once every worker has finished step N and
// before any worker's pull for the next step is answered. Under BSP the
// checkpoint holds every update of steps up to N and none after; under
// SSP or ASP, workers ahead of the others may have added some of theirs.
// One worker (worker 0, say) calls it, at the steps it chooses; the others
// call Clock. It returns the checkpoint's directory once it is complete.
func (c *Client) ClockAndCheckpoint(ctx context.Context, base string, res *fsys.Resolver) (string, error) {
	next := c.clock.Load() + 1
	dir := strings.TrimRight(base, "/") + "/clock-" + strconv.FormatInt(next, 10)
	err := c.each(ctx, "advance the clock", func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		_, err := s.Clock(ctx, &pspb.ClockRequest{Worker: int32(c.cfg.Worker), Clock: next, CheckpointDir: dir})
		return err
	})
	if err != nil {
		return "", err
	}
	c.clock.Store(next)
	m := Manifest{Clock: next, Servers: c.Servers(), Files: make([]string, c.Servers())}
	err = c.each(ctx, "checkpoint at clock "+strconv.FormatInt(next, 10), func(ctx context.Context, i int, s pspb.ParameterServerClient) error {
		resp, err := s.Checkpoint(ctx, &pspb.CheckpointRequest{Clock: next})
		if err != nil {
			return err
		}
		m.Files[i] = resp.File
		return nil
	})
	if err != nil {
		return "", err
	}
	stats, err := c.Stats(ctx)
	if err == nil {
		for _, s := range stats {
			for _, t := range s.Tables {
				m.Keys += t.Keys
				m.Bytes += t.Bytes
			}
		}
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := writeAtomic(ctx, res, dir+"/"+ManifestName, b); err != nil {
		return "", fmt.Errorf("checkpoint at clock %d: %w", next, err)
	}
	c.log.Info("tables checkpointed", "dir", dir, "clock", next, "keys", m.Keys)
	return dir, nil
}

func writeAtomic(ctx context.Context, res *fsys.Resolver, uri string, b []byte) error {
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		return err
	}
	out, err := fsys.CreatePrivate(ctx, fs, name)
	if err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	defer out.Abort()
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	if err := out.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	return nil
}

// LatestCheckpoint returns the complete checkpoint with the highest clock
// under base and its manifest; ok is false when there is none.
func LatestCheckpoint(ctx context.Context, base string, res *fsys.Resolver) (dir string, m Manifest, ok bool, err error) {
	fsy, name, err := res.Resolve(ctx, base)
	if err != nil {
		return "", m, false, err
	}
	entries, err := fsy.ReadDir(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", m, false, nil
	}
	if err != nil {
		return "", m, false, fmt.Errorf("list checkpoints in %s: %w", base, err)
	}
	best := int64(-1)
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "clock-"), 10, 64)
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "clock-") || err != nil || n <= best {
			continue
		}
		d := strings.TrimRight(base, "/") + "/" + e.Name()
		mm, err := readManifest(ctx, fsy, path.Join(name, e.Name()), d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // incomplete: no manifest
		}
		if err != nil {
			return "", m, false, err
		}
		best, m, dir = n, mm, d
	}
	return dir, m, best >= 0, nil
}

// ReadManifest reads the manifest of the checkpoint in dir; the error is
// fs.ErrNotExist when there is none (dir is not a complete checkpoint).
func ReadManifest(ctx context.Context, res *fsys.Resolver, dir string) (Manifest, error) {
	fsy, name, err := res.Resolve(ctx, dir)
	if err != nil {
		return Manifest{}, err
	}
	return readManifest(ctx, fsy, name, dir)
}

func readManifest(ctx context.Context, fsy fsys.FS, name, dir string) (Manifest, error) {
	var m Manifest
	f, err := fsy.Open(ctx, path.Join(name, ManifestName))
	if err != nil {
		return m, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil || json.Unmarshal(b, &m) != nil || m.Servers <= 0 {
		return m, fmt.Errorf("checkpoint %s: unreadable manifest %s", dir, ManifestName)
	}
	return m, nil
}

// Restore loads the latest complete checkpoint under base into the
// servers (once, whichever worker asks first: every worker of a restarted
// job calls it before training) and sets this worker's clock to the
// checkpoint's. ok is false, and nothing changes, when base holds none.
func (c *Client) Restore(ctx context.Context, base string, res *fsys.Resolver) (clock int64, ok bool, err error) {
	dir, m, ok, err := LatestCheckpoint(ctx, base, res)
	if err != nil || !ok {
		return 0, false, err
	}
	if m.Servers != c.Servers() {
		return 0, false, fmt.Errorf("checkpoint %s was taken with %d parameter servers; this job has %d (--num-ps)", dir, m.Servers, c.Servers())
	}
	err = c.each(ctx, "restore "+dir, func(ctx context.Context, _ int, s pspb.ParameterServerClient) error {
		resp, err := s.Restore(ctx, &pspb.RestoreRequest{Dir: dir}, grpcWaitForReady)
		if err == nil && resp.Clock != m.Clock {
			err = fmt.Errorf("restored clock %d, the manifest says %d", resp.Clock, m.Clock)
		}
		return err
	})
	if err != nil {
		return 0, false, err
	}
	c.clock.Store(m.Clock)
	c.log.Info("tables restored", "dir", dir, "clock", m.Clock, "keys", m.Keys)
	return m.Clock, true, nil
}
