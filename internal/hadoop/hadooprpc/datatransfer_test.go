package hadooprpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// startTransferServer serves the data-transfer handshake at protection
// and answers every operation with its own bytes, until the test ends.
// Each connection's outcome goes to results.
func startTransferServer(t *testing.T, cfg DataTransferConfig, lookup TokenLookup) (addr string, results <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- serveTransfer(c, cfg, lookup)
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), out
}

func serveTransfer(c net.Conn, cfg DataTransferConfig, lookup TokenLookup) error {
	c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	br := bufio.NewReader(c)
	var magic [4]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(magic[:]) != DataTransferMagic {
		return errors.New("no handshake")
	}
	sc, _, err := DataTransferServer{DataTransferConfig: cfg, Lookup: lookup}.Accept(c, br)
	if err != nil {
		return err
	}
	r := bufio.NewReader(sc)
	var hdr [3]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return err
	}
	echo := append(append(hdr[:], binary.AppendUvarint(nil, n)...), msg...)
	_, err = sc.Write(echo)
	return err
}

// readOp is an OpReadBlock with a block token and a client name.
func readOp(t *testing.T, tok Token, client string) []byte {
	t.Helper()
	b, err := proto.Marshal(&hadooppb.OpReadBlockProto{
		Header: &hadooppb.ClientOperationHeaderProto{
			BaseHeader: &hadooppb.BaseHeaderProto{Block: &hadooppb.ExtendedBlockProto{PoolId: proto.String("BP-1"), BlockId: proto.Uint64(7), GenerationStamp: proto.Uint64(1)}, Token: tok.Proto()},
			ClientName: proto.String(client),
		},
		Offset: proto.Uint64(0), Len: proto.Uint64(10),
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{0, 28, opReadBlock}, binary.AppendUvarint(nil, uint64(len(b)))...), b...)
}

// TestDataTransferProtection runs the data-transfer handshake of
// dfs.data.transfer.protection between DataTransferDial and
// DataTransferServer at each level: the block token authenticates, the
// operation the client wrote first arrives after it, readable on the wire
// at authentication and integrity and not at privacy; an altered message
// is refused; ends with no common level, and bad tokens, are refused with
// errors that say so.
func TestDataTransferProtection(t *testing.T) {
	blockTok := Token{Identifier: BlockTokenIdentifier{Expiry: time.Now().Add(time.Hour), KeyID: 1, User: "alice", BlockPoolID: "BP-1", BlockID: 7, Modes: []string{"READ"}}.Marshal(), Password: []byte("block-key-hmac"), Kind: KindBlockToken}
	lookup := func(id []byte) ([]byte, string, error) {
		b, err := ParseBlockTokenIdentifier(id)
		if err != nil {
			return nil, "", err
		}
		if !bytes.Equal(id, blockTok.Identifier) {
			return nil, "", fmt.Errorf("%s: unknown", b)
		}
		return blockTok.Password, b.User, nil
	}
	secret := "a-client-name-nobody-may-read"
	aes := CipherSuiteAESCTR
	for _, tc := range []struct {
		server, client DataTransferConfig
		readable       bool
	}{
		{DataTransferConfig{Protection: "authentication"}, DataTransferConfig{Protection: "authentication"}, true},
		{DataTransferConfig{Protection: "integrity"}, DataTransferConfig{Protection: "integrity"}, true},
		{DataTransferConfig{Protection: "privacy"}, DataTransferConfig{Protection: "privacy"}, false},
		{DataTransferConfig{Protection: "integrity,privacy"}, DataTransferConfig{Protection: "privacy,integrity"}, false},
		// AES-CTR after the handshake when both ends name it; the DIGEST-MD5
		// cipher when only one does.
		{DataTransferConfig{Protection: "privacy", CipherSuites: aes}, DataTransferConfig{Protection: "privacy", CipherSuites: aes}, false},
		{DataTransferConfig{Protection: "privacy", CipherSuites: aes}, DataTransferConfig{Protection: "privacy"}, false},
		{DataTransferConfig{Protection: "privacy"}, DataTransferConfig{Protection: "privacy", CipherSuites: aes}, false},
		// AES only at privacy.
		{DataTransferConfig{Protection: "integrity", CipherSuites: aes}, DataTransferConfig{Protection: "integrity", CipherSuites: aes}, true},
	} {
		name := func(c DataTransferConfig) string {
			if c.aes() {
				return c.Protection + "+aes"
			}
			return c.Protection
		}
		t.Run("server "+name(tc.server)+" client "+name(tc.client), func(t *testing.T) {
			addr, results := startTransferServer(t, tc.server, lookup)
			for _, tamper := range []bool{false, true} {
				wire := &packetLog{}
				dial, err := DataTransferDial(wire.dial, tc.client)
				if err != nil {
					t.Fatal(err)
				}
				c, err := dial(context.Background(), "tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
				if tamper {
					wire.tamperAfter("alter", 2) // the magic and first message, the digest response
				}
				op := readOp(t, blockTok, secret)
				if _, err := c.Write(op); err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(io.LimitReader(c, int64(len(op))))
				c.Close()
				serr := <-results
				if tamper {
					if tc.server.Protection == "authentication" || tc.server.aes() && tc.client.aes() && tc.server.Protection == "privacy" {
						continue // nothing to notice an alteration with (AES-CTR has no MAC, as in Hadoop)
					}
					if serr == nil || bytes.Equal(got, op) {
						t.Fatalf("an altered operation was taken: server %v", serr)
					}
					continue
				}
				if err != nil || serr != nil || !bytes.Equal(got, op) {
					t.Fatalf("echo of %d bytes (want %d): client %v, server %v", len(got), len(op), err, serr)
				}
				if got := wire.contains(secret); got != tc.readable {
					t.Fatalf("the operation readable on the wire: %v, want %v", got, tc.readable)
				}
				_, isAES := c.(*transferConn).protected.(*aesConn)
				if want := tc.server.aes() && tc.client.aes() && tc.server.Protection == "privacy"; isAES != want {
					t.Fatalf("AES-CTR after the handshake: %v, want %v", isAES, want)
				}
			}
		})
	}
	for _, tc := range []struct {
		name, server, client string
		tok                  Token
		is                   error
		says                 string
	}{
		{"privacy required", "privacy", "authentication,integrity", blockTok, ErrProtection,
			"requires dfs.data.transfer.protection privacy, and this client is configured for authentication,integrity: set dfs.data.transfer.protection in hdfs-site.xml"},
		{"wrong password", "authentication", "authentication", Token{Identifier: blockTok.Identifier, Password: []byte("guess")}, ErrDataTransferRefused, "does not match"},
		{"unknown token", "authentication", "authentication", Token{Identifier: BlockTokenIdentifier{BlockID: 9}.Marshal(), Password: []byte("x")}, ErrDataTransferRefused, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, results := startTransferServer(t, DataTransferConfig{Protection: tc.server}, lookup)
			dial, err := DataTransferDial(nil, DataTransferConfig{Protection: tc.client})
			if err != nil {
				t.Fatal(err)
			}
			c, err := dial(context.Background(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			_, err = c.Write(readOp(t, tc.tok, "x"))
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want %v saying %q", err, tc.is, tc.says)
			}
			c.Close()
			<-results
		})
	}
	if _, err := DataTransferDial(nil, DataTransferConfig{Protection: "secret"}); err == nil || !strings.Contains(err.Error(), "dfs.data.transfer.protection") {
		t.Fatalf("a bad setting: %v", err)
	}
}

// TestBlockTokenIdentifier round-trips a block token identifier and checks
// its layout against Hadoop's: variable-length expiry and key id, strings
// behind a 4-byte length, modes as Text.
func TestBlockTokenIdentifier(t *testing.T) {
	b := BlockTokenIdentifier{Expiry: time.UnixMilli(1_700_000_000_000), KeyID: 3, User: "alice", BlockPoolID: "BP-1", BlockID: 1 << 30, Modes: []string{"READ", "WRITE"}}
	raw := b.Marshal()
	want := append(appendVInt(appendVInt(nil, 1_700_000_000_000), 3), 0, 0, 0, 5)
	want = append(want, "alice\x00\x00\x00\x04BP-1"...)
	want = append(appendVInt(want, 1<<30), 2, 4)
	want = append(append(want, "READ\x05"...), "WRITE"...)
	if !bytes.Equal(raw, want) {
		t.Fatalf("layout %x, want %x", raw, want)
	}
	got, err := ParseBlockTokenIdentifier(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != b.String() || !got.Allows("WRITE") || got.Allows("COPY") {
		t.Fatalf("read back %v", got)
	}
	if _, err := ParseBlockTokenIdentifier(raw[:7]); err == nil {
		t.Fatal("a truncated identifier parsed")
	}
}
