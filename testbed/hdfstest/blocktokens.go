package hdfstest

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// The access modes of block tokens.
const (
	modeRead  = "READ"
	modeWrite = "WRITE"
)

// blockTokenLifetime is how long a block token is good for (Hadoop's
// dfs.block.access.token.lifetime default: 10 hours).
const blockTokenLifetime = 10 * time.Hour

// blockKeys is the namenode's block-token secret manager. Its key is shared
// with the datanodes, which a real cluster does through heartbeats and
// this one through memory: the namenode signs a token for each block it
// hands out, and datanodes check it at the data-transfer handshake and on
// every operation.
type blockKeys struct {
	key   []byte
	keyID int32
	now   func() time.Time
}

func newBlockKeys() *blockKeys {
	key := make([]byte, 20)
	rand.Read(key)
	return &blockKeys{key: key, keyID: 1, now: time.Now}
}

func (k *blockKeys) password(id []byte) []byte {
	h := hmac.New(sha1.New, k.key)
	h.Write(id)
	return h.Sum(nil)
}

// token signs a token for block id of pool, for user, granting modes.
func (k *blockKeys) token(pool string, id uint64, user string, modes ...string) *hadooppb.TokenProto {
	ident := hadooprpc.BlockTokenIdentifier{
		Expiry: k.now().Add(blockTokenLifetime), KeyID: k.keyID, User: user, BlockPoolID: pool, BlockID: id, Modes: modes,
	}.Marshal()
	return &hadooppb.TokenProto{Identifier: ident, Password: k.password(ident), Kind: proto.String(hadooprpc.KindBlockToken), Service: proto.String("")}
}

// lookup checks a token identifier for the data-transfer handshake: one
// this namenode made, not expired.
func (k *blockKeys) lookup(id []byte) ([]byte, string, error) {
	b, err := hadooprpc.ParseBlockTokenIdentifier(id)
	if err != nil {
		return nil, "", err
	}
	if b.KeyID != k.keyID {
		return nil, "", fmt.Errorf("%s: no block key %d", b, b.KeyID)
	}
	if k.now().After(b.Expiry) {
		return nil, "", fmt.Errorf("%s is expired", b)
	}
	return k.password(id), b.User, nil
}

// check verifies the token an operation carries: signed by this namenode,
// not expired, for this block, granting mode.
func (k *blockKeys) check(tok *hadooppb.TokenProto, pool string, blockID uint64, mode string) error {
	if len(tok.GetIdentifier()) == 0 {
		return fmt.Errorf("no block token for blk_%d", blockID)
	}
	if !hmac.Equal(k.password(tok.GetIdentifier()), tok.GetPassword()) {
		return fmt.Errorf("the block token for blk_%d is not signed by this cluster's block key", blockID)
	}
	b, err := hadooprpc.ParseBlockTokenIdentifier(tok.GetIdentifier())
	if err != nil {
		return err
	}
	switch {
	case k.now().After(b.Expiry):
		return fmt.Errorf("%s is expired", b)
	case b.BlockPoolID != pool || b.BlockID != blockID:
		return fmt.Errorf("%s doesn't belong to block pool %s, block %d", b, pool, blockID)
	case !b.Allows(mode):
		return fmt.Errorf("%s doesn't have %s permission", b, mode)
	}
	return nil
}

// getDataEncryptionKey answers that there is no data encryption key:
// dfs.encrypt.data.transfer is off, and clients use their block tokens in
// the data-transfer handshake.
func (nn *namenode) getDataEncryptionKey(_ context.Context, _ *user, _ *hadooppb.GetDataEncryptionKeyRequestProto) (*hadooppb.GetDataEncryptionKeyResponseProto, error) {
	return &hadooppb.GetDataEncryptionKeyResponseProto{}, nil
}
