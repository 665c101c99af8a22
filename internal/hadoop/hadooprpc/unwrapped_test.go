package hadooprpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestUnwrappedCallsAfterPrivacy: on a connection whose SASL negotiated
// privacy, a server takes calls the client sends unwrapped, as Hadoop's
// does (colinmarc/hdfs sends its calls so), and answers them wrapped.
func TestUnwrappedCallsAfterPrivacy(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	serverKT := kdc.AddServiceKeytab("nn/127.0.0.1")
	cl, err := kerberos.Login(kerberos.Options{Principal: "alice", Keytab: kdc.AddPrincipal("alice")})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Destroy()
	addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "nn", ServerID: "127.0.0.1", Protection: ProtectionPrivacy}})

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
	defer cancel()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	if _, err := conn.Write(header{version: Version, auth: AuthSASL}.bytes()); err != nil {
		t.Fatal(err)
	}
	clientID := make([]byte, 16)
	ex := &SASLExchange{conn: conn, max: DefaultMaxPacketSize, clientID: clientID, dialed: addr}
	auth := KerberosAuth{Client: cl, Principal: "nn/_HOST@" + krbtest.Realm, Protection: ProtectionPrivacy}
	if err := auth.Negotiate(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if ex.layer == nil {
		t.Fatal("no security layer negotiated at privacy")
	}
	protected := ex.protect(conn) // for reading the wrapped answer only
	cc := &hadooppb.IpcConnectionContextProto{Protocol: proto.String(testProtocol),
		UserInfo: &hadooppb.UserInformationProto{EffectiveUser: proto.String("alice")}}
	rh := &hadooppb.RequestHeaderProto{MethodName: proto.String("getFileInfo"),
		DeclaringClassProtocolName: proto.String(testProtocol), ClientProtocolVersion: proto.Uint64(1)}
	for _, pkt := range [][]proto.Message{
		{requestHeader(CallIDConnectionContext, clientID), cc},
		{requestHeader(0, clientID), rh, &hadooppb.GetFileInfoRequestProto{Src: proto.String("/unwrapped")}},
	} {
		b, err := marshalPacket(pkt...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil { // not through the layer
			t.Fatal(err)
		}
	}
	body, err := readPacket(protected, DefaultMaxPacketSize)
	if err != nil {
		t.Fatalf("read the answer to an unwrapped call: %v", err)
	}
	var resp hadooppb.RpcResponseHeaderProto
	rest, err := unmarshalNext(body, &resp)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != hadooppb.RpcResponseHeaderProto_SUCCESS {
		t.Fatalf("unwrapped call refused: %s: %s", resp.GetExceptionClassName(), resp.GetErrorMsg())
	}
	var fi hadooppb.GetFileInfoResponseProto
	if _, err := unmarshalNext(rest, &fi); err != nil || string(fi.GetFs().GetPath()) != "/unwrapped" {
		t.Fatalf("answer %v (%v)", &fi, err)
	}
}
