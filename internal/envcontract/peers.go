package envcontract

import (
	"fmt"
	"os"
	"strings"
)

// MaxVarBytes is Linux's MAX_ARG_STRLEN: the longest string, "KEY=value"
// and its terminating zero, that execve takes into a new process's
// environment. The executor hands over a peer list that would not fit in
// a file instead (PeersFile).
const MaxVarBytes = 32 * 4096

// PeersFits reports whether a peer list of n bytes fits in SPINDLE_PEERS.
func PeersFits(n int) bool { return len(Peers)+1+n+1 <= MaxVarBytes }

// LookupPeers returns the comma-separated peer list a training process
// was given, from SPINDLE_PEERS or else from the file SPINDLE_PEERS_FILE
// names, and where it came from, for error messages ("SPINDLE_PEERS" or
// "SPINDLE_PEERS_FILE /path"). It returns "" when neither is set.
func LookupPeers(lookup func(string) (string, bool)) (list, from string, err error) {
	if v, ok := lookup(Peers); ok && strings.TrimSpace(v) != "" {
		return v, Peers, nil
	}
	path, ok := lookup(PeersFile)
	if !ok || strings.TrimSpace(path) == "" {
		return "", Peers, nil
	}
	from = PeersFile + " " + path
	b, err := os.ReadFile(path)
	if err != nil {
		return "", from, fmt.Errorf("read the peer list: %s: %w", PeersFile, err)
	}
	return strings.TrimSpace(string(b)), from, nil
}
