package executor

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// SPINDLE_PEERS names every rank, so with thousands of ranks and long
// host names it passes Linux's limit for one environment variable (about
// 2,800 ranks of 38-character names) and the training process could not
// be started at all. The executor then writes the list to a file beside
// the task's other files, readable by the job's user only, and names it
// in SPINDLE_PEERS_FILE; the Go and Python readers take either.

// peersFileName is the peer list's file in the task's work directory.
const peersFileName = "peers"

// setPeersEnv puts the peer list in env: in SPINDLE_PEERS when it fits,
// else in a file under filesDir's parent named by SPINDLE_PEERS_FILE.
func setPeersEnv(env map[string]string, peers []string, filesDir string) error {
	list := strings.Join(peers, ",")
	if envcontract.PeersFits(len(list)) {
		env[envcontract.Peers] = list
		delete(env, envcontract.PeersFile)
		return nil
	}
	if filesDir == "" {
		return fmt.Errorf("%s would be %d bytes, over Linux's limit of %d, and there is no work directory to write %s in",
			envcontract.Peers, len(list), envcontract.MaxVarBytes, envcontract.PeersFile)
	}
	path := filepath.Join(filepath.Dir(filesDir), peersFileName)
	if err := writeFileAtomic(path, []byte(list), 0o600); err != nil {
		return fmt.Errorf("write the peer list of %d ranks (%s): %w", len(peers), envcontract.PeersFile, err)
	}
	env[envcontract.PeersFile] = path
	delete(env, envcontract.Peers)
	return nil
}
