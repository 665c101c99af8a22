package hadooprpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// KindBlockToken is the kind of the block access tokens a namenode hands
// out with block locations.
const KindBlockToken = "HDFS_BLOCK_TOKEN"

// BlockTokenIdentifier is the identifier of a block access token (Hadoop's
// BlockTokenIdentifier): which block of which pool, for whom, for what
// (READ, WRITE, COPY, REPLACE), until when, under which block key.
type BlockTokenIdentifier struct {
	Expiry      time.Time
	KeyID       int32
	User        string
	BlockPoolID string
	BlockID     uint64
	Modes       []string
}

// Marshal encodes the identifier in Hadoop's legacy Writable layout:
// WritableUtils variable-length numbers, strings behind a 4-byte length,
// modes as Text.
func (b BlockTokenIdentifier) Marshal() []byte {
	out := appendVInt(nil, b.Expiry.UnixMilli())
	out = appendVInt(out, int64(b.KeyID))
	for _, s := range []string{b.User, b.BlockPoolID} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	out = appendVInt(out, int64(b.BlockID))
	out = appendVInt(out, int64(len(b.Modes)))
	for _, m := range b.Modes {
		out = appendBytes(out, []byte(m))
	}
	return out
}

// ParseBlockTokenIdentifier decodes a block token's identifier.
func ParseBlockTokenIdentifier(id []byte) (BlockTokenIdentifier, error) {
	var b BlockTokenIdentifier
	r := bufio.NewReader(bytes.NewReader(id))
	fail := func(what string, err error) (BlockTokenIdentifier, error) {
		return BlockTokenIdentifier{}, fmt.Errorf("%w: block token identifier: %s: %v", ErrCredentials, what, err)
	}
	n, err := readVInt(r)
	if err != nil {
		return fail("expiry date", err)
	}
	b.Expiry = time.UnixMilli(n)
	if n, err = readVInt(r); err != nil {
		return fail("key id", err)
	}
	b.KeyID = int32(n)
	for _, f := range []struct {
		what string
		to   *string
	}{{"user", &b.User}, {"block pool", &b.BlockPoolID}} {
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return fail(f.what, err)
		}
		size := binary.BigEndian.Uint32(l[:])
		if size > 1<<16 {
			return fail(f.what, fmt.Errorf("length %d", size))
		}
		s := make([]byte, size)
		if _, err := io.ReadFull(r, s); err != nil {
			return fail(f.what, err)
		}
		*f.to = string(s)
	}
	if n, err = readVInt(r); err != nil {
		return fail("block id", err)
	}
	b.BlockID = uint64(n)
	if n, err = readVInt(r); err != nil || n < 0 || n > 8 {
		return fail("modes", fmt.Errorf("%d modes, %v", n, err))
	}
	for i := int64(0); i < n; i++ {
		m, err := readText(r)
		if err != nil {
			return fail("modes", err)
		}
		b.Modes = append(b.Modes, m)
	}
	return b, nil
}

// Allows reports whether the token grants mode (READ, WRITE, ...).
func (b BlockTokenIdentifier) Allows(mode string) bool {
	for _, m := range b.Modes {
		if m == mode {
			return true
		}
	}
	return false
}

// String names the token as Hadoop's logs do, without its password.
func (b BlockTokenIdentifier) String() string {
	return fmt.Sprintf("block_token_identifier (expiryDate=%d, keyId=%d, userId=%s, blockPoolId=%s, blockId=%d, access modes=%v)",
		b.Expiry.UnixMilli(), b.KeyID, b.User, b.BlockPoolID, b.BlockID, b.Modes)
}
