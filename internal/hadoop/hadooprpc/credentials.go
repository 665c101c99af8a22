package hadooprpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// EnvTokenFile names the credentials file of a YARN container (set by the
// NodeManager).
const EnvTokenFile = "HADOOP_TOKEN_FILE_LOCATION"

// credentialsMagic opens Hadoop's token storage format.
const credentialsMagic = "HDTS"

// Credentials formats: version 0 is Hadoop's Writable layout, understood by
// every Hadoop 2 and 3 reader; version 1 is protobuf (Hadoop 3 only).
const (
	CredentialsWritable byte = 0
	CredentialsProtobuf byte = 1
)

// ErrCredentials reports a credentials file that does not parse.
var ErrCredentials = errors.New("hadooprpc: bad credentials")

// Credentials are Hadoop's credentials: tokens and secret keys by alias.
// They travel in a container launch context's tokens and in the file
// $HADOOP_TOKEN_FILE_LOCATION inside a container, and never in the
// environment or on a command line.
type Credentials struct {
	Tokens  map[string]Token
	Secrets map[string][]byte
}

// NewCredentials returns empty credentials.
func NewCredentials() *Credentials {
	return &Credentials{Tokens: map[string]Token{}, Secrets: map[string][]byte{}}
}

// TokenOfKind returns the first token (by alias) of kind.
func (c *Credentials) TokenOfKind(kind string) (Token, bool) {
	for _, alias := range sortedKeys(c.Tokens) {
		if t := c.Tokens[alias]; t.Kind == kind {
			return t, true
		}
	}
	return Token{}, false
}

// ReadCredentialsFile reads a credentials file of either version.
func ReadCredentialsFile(path string) (*Credentials, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read credentials: %w", err)
	}
	c, err := ReadCredentials(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	return c, nil
}

// ReadCredentials reads Hadoop's token storage stream, version 0 or 1.
func ReadCredentials(r io.Reader) (*Credentials, error) {
	br := bufio.NewReader(r)
	var head [5]byte
	if _, err := io.ReadFull(br, head[:]); err != nil {
		return nil, fmt.Errorf("%w: short header: %v", ErrCredentials, err)
	}
	if string(head[:4]) != credentialsMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrCredentials, head[:4], credentialsMagic)
	}
	c := NewCredentials()
	switch head[4] {
	case CredentialsWritable:
		if err := c.readWritable(br); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCredentials, err)
		}
	case CredentialsProtobuf:
		n, err := binary.ReadUvarint(br)
		if err != nil || n > 64<<20 {
			return nil, fmt.Errorf("%w: protobuf length: %v", ErrCredentials, err)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, fmt.Errorf("%w: protobuf body: %v", ErrCredentials, err)
		}
		var p hadooppb.CredentialsProto
		if err := proto.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCredentials, err)
		}
		for _, kv := range p.GetTokens() {
			c.Tokens[kv.GetAlias()] = TokenFromProto(kv.GetToken())
		}
		for _, kv := range p.GetSecrets() {
			c.Secrets[kv.GetAlias()] = kv.GetSecret()
		}
	default:
		return nil, fmt.Errorf("%w: unknown version %d", ErrCredentials, head[4])
	}
	return c, nil
}

func (c *Credentials) readWritable(r *bufio.Reader) error {
	n, err := readVInt(r)
	if err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		alias, err := readText(r)
		if err != nil {
			return fmt.Errorf("token %d alias: %w", i, err)
		}
		var t Token
		if t.Identifier, err = readBytes(r); err == nil {
			if t.Password, err = readBytes(r); err == nil {
				if t.Kind, err = readText(r); err == nil {
					t.Service, err = readText(r)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("token %s: %w", alias, err)
		}
		c.Tokens[alias] = t
	}
	if n, err = readVInt(r); err != nil {
		return err
	}
	for i := int64(0); i < n; i++ {
		alias, err := readText(r)
		if err != nil {
			return fmt.Errorf("secret %d alias: %w", i, err)
		}
		if c.Secrets[alias], err = readBytes(r); err != nil {
			return fmt.Errorf("secret %s: %w", alias, err)
		}
	}
	return nil
}

// Marshal encodes c in Hadoop's token storage format of version.
func (c *Credentials) Marshal(version byte) ([]byte, error) {
	buf := []byte(credentialsMagic)
	buf = append(buf, version)
	switch version {
	case CredentialsWritable:
		buf = appendVInt(buf, int64(len(c.Tokens)))
		for _, alias := range sortedKeys(c.Tokens) {
			t := c.Tokens[alias]
			buf = appendBytes(buf, []byte(alias))
			buf = appendBytes(buf, t.Identifier)
			buf = appendBytes(buf, t.Password)
			buf = appendBytes(buf, []byte(t.Kind))
			buf = appendBytes(buf, []byte(t.Service))
		}
		buf = appendVInt(buf, int64(len(c.Secrets)))
		for _, alias := range sortedKeys(c.Secrets) {
			buf = appendBytes(buf, []byte(alias))
			buf = appendBytes(buf, c.Secrets[alias])
		}
	case CredentialsProtobuf:
		var p hadooppb.CredentialsProto
		for _, alias := range sortedKeys(c.Tokens) {
			p.Tokens = append(p.Tokens, &hadooppb.CredentialsKVProto{Alias: proto.String(alias), Token: c.Tokens[alias].Proto()})
		}
		for _, alias := range sortedKeys(c.Secrets) {
			p.Secrets = append(p.Secrets, &hadooppb.CredentialsKVProto{Alias: proto.String(alias), Secret: c.Secrets[alias]})
		}
		body, err := proto.Marshal(&p)
		if err != nil {
			return nil, err
		}
		buf = binary.AppendUvarint(buf, uint64(len(body)))
		buf = append(buf, body...)
	default:
		return nil, fmt.Errorf("hadooprpc: unknown credentials version %d", version)
	}
	return buf, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// appendVInt appends i in Hadoop's WritableUtils variable-length encoding.
func appendVInt(buf []byte, i int64) []byte {
	if i >= -112 && i <= 127 {
		return append(buf, byte(int8(i)))
	}
	l := int64(-112)
	if i < 0 {
		i = ^i
		l = -120
	}
	for tmp := i; tmp != 0; tmp >>= 8 {
		l--
	}
	buf = append(buf, byte(int8(l)))
	n := -(l + 112)
	if l < -120 {
		n = -(l + 120)
	}
	for idx := n; idx != 0; idx-- {
		shift := (idx - 1) * 8
		buf = append(buf, byte(i>>shift))
	}
	return buf
}

// readVInt reads a WritableUtils variable-length integer.
func readVInt(r io.ByteReader) (int64, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	first := int8(b)
	if first >= -112 {
		return int64(first), nil
	}
	n := int(-111 - int(first))
	neg := first < -120
	if neg {
		n = int(-119 - int(first))
	}
	var v int64
	for k := 0; k < n-1; k++ {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		v = v<<8 | int64(c)
	}
	if neg {
		v = ^v
	}
	return v, nil
}

func appendBytes(buf, b []byte) []byte {
	buf = appendVInt(buf, int64(len(b)))
	return append(buf, b...)
}

func readBytes(r *bufio.Reader) ([]byte, error) {
	n, err := readVInt(r)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > 16<<20 {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

func readText(r *bufio.Reader) (string, error) {
	b, err := readBytes(r)
	return string(b), err
}
