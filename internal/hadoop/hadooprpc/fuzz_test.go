package hadooprpc

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// The fuzz targets of the Hadoop decoders that take bytes from outside:
// a credentials file (the container's, or one a user points at), a
// response packet from a namenode or ResourceManager, and a DIGEST-MD5
// challenge from a server. Whatever the bytes, each returns an error or
// a value, never a panic, and allocates no more than its bounds allow
// (testdata/fuzz/TARGET holds the crashers found).

func fuzzCredentials(tb testing.TB, version byte) []byte {
	c := NewCredentials()
	c.Tokens["ha-hdfs:nn"] = Token{Identifier: []byte("id"), Password: []byte("pw"), Kind: "HDFS_DELEGATION_TOKEN", Service: "nn:8020"}
	c.Secrets["spindle.job.secret"] = []byte("s3cret")
	b, err := c.Marshal(version)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzReadCredentials reads Hadoop token storage of any bytes; what it
// reads it writes back (in the Writable layout, which takes any token)
// and reads again to the same tokens and secrets.
func FuzzReadCredentials(f *testing.F) {
	f.Add(fuzzCredentials(f, CredentialsWritable))
	f.Add(fuzzCredentials(f, CredentialsProtobuf))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadCredentials(bytes.NewReader(b))
		if err != nil {
			return
		}
		out, err := c.Marshal(CredentialsWritable)
		if err != nil {
			t.Fatalf("write back: %v", err)
		}
		again, err := ReadCredentials(bytes.NewReader(out))
		if err != nil || len(again.Tokens) != len(c.Tokens) || len(again.Secrets) != len(c.Secrets) {
			t.Fatalf("read back: %v (%d tokens, %d secrets; want %d, %d)", err, len(again.Tokens), len(again.Secrets), len(c.Tokens), len(c.Secrets))
		}
	})
}

// FuzzResponsePacket decodes a response packet as the client's reader
// does: the length-prefixed packet, its header, then its body.
func FuzzResponsePacket(f *testing.F) {
	ok, err := marshalPacket(&hadooppb.RpcResponseHeaderProto{CallId: proto.Uint32(1), Status: hadooppb.RpcResponseHeaderProto_SUCCESS.Enum()},
		&hadooppb.GetDelegationTokenResponseProto{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ok)
	fatal, err := marshalPacket(&hadooppb.RpcResponseHeaderProto{CallId: proto.Uint32(2), Status: hadooppb.RpcResponseHeaderProto_FATAL.Enum(), ErrorMsg: proto.String("no")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fatal)
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := readPacket(bytes.NewReader(b), 1<<20)
		if err != nil {
			return
		}
		hdr := &hadooppb.RpcResponseHeaderProto{}
		rest, err := unmarshalNext(body, hdr)
		if err != nil {
			return
		}
		_, _ = unmarshalNext(rest, &hadooppb.GetDelegationTokenResponseProto{})
	})
}

// FuzzDigestChallenge answers DIGEST-MD5 challenges of any bytes, as a
// token connection to a namenode or datanode does.
func FuzzDigestChallenge(f *testing.F) {
	f.Add([]byte(`realm="default",nonce="OA6MG9tEQGm2hh",qop="auth,auth-int,auth-conf",cipher="3des,rc4",maxbuf=65536,charset=utf-8,algorithm=md5-sess`))
	f.Add([]byte(`nonce="a\"b",qop=auth`))
	tok := Token{Identifier: []byte("id"), Password: []byte("pw")}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range []string{"authentication", "privacy,integrity"} {
			dc, err := newDigestClient(b, tok, "hdfs/nn", p, "nn:8020", settingRPC)
			if err == nil && len(dc.response) == 0 {
				t.Fatal("no error and no response")
			}
		}
	})
}
