package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// tokenFileName is the credentials file an executor whose manager gave it
// none ($HADOOP_TOKEN_FILE_LOCATION unset) keeps in its work directory.
const tokenFileName = "spindle_tokens"

// applyCredentials puts the delegation tokens of c in the executor's
// Hadoop credentials file ($HADOOP_TOKEN_FILE_LOCATION, which its HDFS
// clients and its training process read), in place of the tokens it held
// for the same services, keeping everything else the file holds (the
// job's secrets). The file is replaced atomically: a reader sees the old
// file or the new one, never a part. New HDFS connections use the new
// tokens; open ones carry on. It returns the services updated, for the
// log (never a password).
func (e *Executor) applyCredentials(c *driverpb.Credentials) ([]string, error) {
	fresh, err := hadooprpc.ReadCredentials(bytes.NewReader(c.GetFile()))
	if err != nil {
		return nil, fmt.Errorf("credentials generation %d from the driver: %w", c.GetGeneration(), err)
	}
	path := os.Getenv(hadooprpc.EnvTokenFile)
	if path == "" {
		dir := ownWorkDir()
		if dir == "" {
			if dir, err = os.Getwd(); err != nil {
				return nil, fmt.Errorf("place a credentials file: %w", err)
			}
		}
		path = filepath.Join(dir, tokenFileName)
		// The executor's HDFS clients and its training process find the
		// file here.
		os.Setenv(hadooprpc.EnvTokenFile, path)
	}
	creds, version := hadooprpc.NewCredentials(), hadooprpc.CredentialsWritable
	if old, err := os.ReadFile(path); err == nil && len(old) > 0 {
		if creds, err = hadooprpc.ReadCredentials(bytes.NewReader(old)); err != nil {
			return nil, fmt.Errorf("credentials file %s: %w", path, err)
		}
		if len(old) > 4 {
			version = old[4]
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read credentials file: %w", err)
	}
	var services []string
	for alias, t := range fresh.Tokens {
		// A token of the same kind for the same service goes.
		for oldAlias, ot := range creds.Tokens {
			if ot.Kind == t.Kind && ot.Service == t.Service {
				delete(creds.Tokens, oldAlias)
			}
		}
		creds.Tokens[alias] = t
		services = append(services, t.Service)
	}
	sort.Strings(services)
	b, err := creds.Marshal(version)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("write credentials file: %w", err)
	}
	e.credGen.Store(c.GetGeneration())
	return services, nil
}

// writeFileAtomic writes b to path through a temporary file in the same
// directory renamed over it.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// takeCredentials applies credentials the driver sent, if any, and logs
// what changed; a failure is logged and retried with the next answer (the
// executor keeps saying it uses the older generation).
func (e *Executor) takeCredentials(c *driverpb.Credentials) {
	if c == nil || c.GetGeneration() <= e.credGen.Load() {
		return
	}
	services, err := e.applyCredentials(c)
	if err != nil {
		e.logger.Warn("fresh hadoop credentials not applied", "generation", c.GetGeneration(), "err", err)
		return
	}
	e.logger.Info("hadoop credentials updated", "generation", c.GetGeneration(), "services", services)
}
