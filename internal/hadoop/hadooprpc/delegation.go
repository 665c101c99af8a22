package hadooprpc

import (
	"bufio"
	"bytes"
	"fmt"
	"time"
)

// KindHDFSDelegationToken is the kind of a namenode's delegation tokens.
const KindHDFSDelegationToken = "HDFS_DELEGATION_TOKEN"

// DelegationTokenIdentifier is the identifier of a delegation token
// (Hadoop's AbstractDelegationTokenIdentifier): who owns it, who may renew
// it, and until when it may live.
type DelegationTokenIdentifier struct {
	Owner, Renewer, RealUser string
	IssueDate, MaxDate       time.Time
	SequenceNumber           int32
	MasterKeyID              int32
}

// Marshal encodes the identifier in Hadoop's Writable layout (version 0).
func (d DelegationTokenIdentifier) Marshal() []byte {
	b := []byte{0}
	b = appendBytes(b, []byte(d.Owner))
	b = appendBytes(b, []byte(d.Renewer))
	b = appendBytes(b, []byte(d.RealUser))
	b = appendVInt(b, d.IssueDate.UnixMilli())
	b = appendVInt(b, d.MaxDate.UnixMilli())
	b = appendVInt(b, int64(d.SequenceNumber))
	b = appendVInt(b, int64(d.MasterKeyID))
	return b
}

// ParseDelegationTokenIdentifier decodes a delegation token's identifier.
func ParseDelegationTokenIdentifier(id []byte) (DelegationTokenIdentifier, error) {
	var d DelegationTokenIdentifier
	r := bufio.NewReader(bytes.NewReader(id))
	v, err := r.ReadByte()
	if err != nil || v != 0 {
		return d, fmt.Errorf("%w: delegation token identifier version %d, want 0 (%v)", ErrCredentials, v, err)
	}
	fail := func(what string, err error) (DelegationTokenIdentifier, error) {
		return DelegationTokenIdentifier{}, fmt.Errorf("%w: delegation token identifier: %s: %v", ErrCredentials, what, err)
	}
	if d.Owner, err = readText(r); err != nil {
		return fail("owner", err)
	}
	if d.Renewer, err = readText(r); err != nil {
		return fail("renewer", err)
	}
	if d.RealUser, err = readText(r); err != nil {
		return fail("real user", err)
	}
	var n int64
	if n, err = readVInt(r); err != nil {
		return fail("issue date", err)
	}
	d.IssueDate = time.UnixMilli(n)
	if n, err = readVInt(r); err != nil {
		return fail("max date", err)
	}
	d.MaxDate = time.UnixMilli(n)
	if n, err = readVInt(r); err != nil {
		return fail("sequence number", err)
	}
	d.SequenceNumber = int32(n)
	if n, err = readVInt(r); err != nil {
		return fail("master key id", err)
	}
	d.MasterKeyID = int32(n)
	return d, nil
}

// String names the token as Hadoop's logs do, without its password.
func (d DelegationTokenIdentifier) String() string {
	return fmt.Sprintf("token %d for %s (renewer %s, max date %s)", d.SequenceNumber, d.Owner, d.Renewer, d.MaxDate.UTC().Format(time.RFC3339))
}
