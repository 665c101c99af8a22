package fsys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// hdfsMaxIdleDefault is how long a namenode connection may go unused
// before the next call opens a new one: Hadoop's
// ipc.client.connection.maxidletime, whose default this is.
const hdfsMaxIdleDefault = 10 * time.Second

// maxIdleOf reads ipc.client.connection.maxidletime (milliseconds).
func maxIdleOf(conf hadoopconf.HadoopConf) time.Duration {
	if v, err := strconv.Atoi(conf["ipc.client.connection.maxidletime"]); err == nil && v > 0 {
		return time.Duration(v) * time.Millisecond
	}
	return hdfsMaxIdleDefault
}

// tokenFile follows the delegation token of one cluster in a credentials
// file that may be replaced while the process runs (an executor given
// fresh tokens): each new namenode connection authenticates with the
// token the file holds then.
type tokenFile struct {
	path    string
	service string

	mu  sync.Mutex
	fi  os.FileInfo // the file last read
	tok hadooprpc.Token
}

// current returns the cluster's token in the file as it is now, or the
// last one read when the file is gone or no longer holds one.
func (f *tokenFile) current() (hadooprpc.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil || (f.fi != nil && os.SameFile(fi, f.fi) && fi.ModTime().Equal(f.fi.ModTime()) && fi.Size() == f.fi.Size()) {
		return f.tok, nil
	}
	creds, err := hadooprpc.ReadCredentialsFile(f.path)
	if err != nil {
		if f.fi == nil {
			return f.tok, err
		}
		// Keep the last good token; the next connection reads again.
		return f.tok, nil
	}
	f.fi = fi
	for _, t := range creds.Tokens {
		if t.Kind == hadooprpc.KindHDFSDelegationToken && t.Service == f.service {
			f.tok = t
			break
		}
	}
	return f.tok, nil
}

// pooledClient is one colinmarc client (one namenode connection) and the
// files and calls using it.
type pooledClient struct {
	c     *hdfs.Client
	token []byte // identifier of the delegation token it authenticated with

	refs    int
	last    time.Time // when a call or a file last took it
	retired bool      // replaced: closed once refs is 0
}

// acquire returns the client to use for a call or a file, to be given
// back with release. A new client (a new namenode connection) replaces
// the current one when the cluster's delegation token changed, so that
// calls use the fresh token while files open on the old client finish on
// it, or when no call or file took the current one for longer than
// ipc.client.connection.maxidletime, as Hadoop's client closes a
// connection idle that long: the new connection authenticates again, with
// the token the credentials file holds now.
func (h *hdfsFS) acquire(ctx context.Context) (*pooledClient, error) {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("hdfs://%s: %w", h.cluster.authority, os.ErrClosed)
	}
	cur := h.cur
	if cur != nil && h.stale(cur) {
		h.retire(cur)
		cur = nil
	}
	if cur == nil {
		var tok []byte
		if h.cluster.tokens != nil {
			t, err := h.cluster.tokens.current()
			if err != nil {
				return nil, err
			}
			tok = t.Identifier
		}
		c, err := dialClient(ctx, h.cluster)
		if err != nil {
			return nil, err
		}
		cur = &pooledClient{c: c, token: tok}
		h.cur = cur
		h.all[cur] = struct{}{}
	}
	cur.refs++
	cur.last = time.Now()
	return cur, nil
}

// stale says whether cur should give way to a new connection.
func (h *hdfsFS) stale(cur *pooledClient) bool {
	if h.cluster.maxIdle > 0 && time.Since(cur.last) > h.cluster.maxIdle {
		return true
	}
	if h.cluster.tokens == nil {
		return false
	}
	t, err := h.cluster.tokens.current()
	return err == nil && !bytes.Equal(t.Identifier, cur.token)
}

// retire takes c out of use; it closes when its last user gives it back.
// The caller holds clMu.
func (h *hdfsFS) retire(c *pooledClient) {
	c.retired = true
	if h.cur == c {
		h.cur = nil
	}
	if c.refs == 0 {
		c.c.Close()
		delete(h.all, c)
	}
}

// release gives back a client acquire returned.
func (h *hdfsFS) release(c *pooledClient) {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	c.refs--
	if c.retired && c.refs == 0 {
		c.c.Close()
		delete(h.all, c)
	}
}

// closeClients closes every client, in use or not.
func (h *hdfsFS) closeClients() error {
	h.clMu.Lock()
	defer h.clMu.Unlock()
	var first error
	for c := range h.all {
		if err := c.c.Close(); err != nil && first == nil {
			first = err
		}
		delete(h.all, c)
	}
	h.cur = nil
	h.closed = true
	return first
}

// tokenRefused says whether err is a namenode's refusal of a delegation
// token (expired, cancelled, unknown): colinmarc's client keeps only the
// text of the errors its dial hook returns.
func tokenRefused(err error) bool {
	if errors.Is(err, hadooprpc.ErrTokenRejected) {
		return true
	}
	msg := fmt.Sprint(err)
	return strings.Contains(msg, hadooprpc.ErrTokenRejected.Error()) || strings.Contains(msg, "InvalidToken")
}
