package master

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// TestTokensBoundToTheMaster: masters share the cluster secret, so a call
// signed for another master (captured on its way there, or replayed from
// there) is refused; calls signed for any name this master answers to
// (its address, localhost on its port) are taken.
func TestTokensBoundToTheMaster(t *testing.T) {
	g := startGroup(t, 1, false, nil)
	g.leader()
	addr := g.addrs()[0]
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	call := func(s *auth.Signer) error {
		conn, err := grpc.NewClient(addr, append(s.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
		defer cancel()
		_, err = pb.NewMasterClient(conn).ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		return err
	}
	for _, name := range []string{addr, net.JoinHostPort("localhost", port)} {
		if err := call(signer.For(secure.MasterAudience(name))); err != nil {
			t.Errorf("signed for %s: %v", name, err)
		}
	}
	for name, s := range map[string]*auth.Signer{
		"another master":      signer.For(secure.MasterAudience("10.0.0.9:" + port)),
		"another port here":   signer.For(secure.MasterAudience(net.JoinHostPort("127.0.0.1", "1"))),
		"no audience at all":  signer,
		"a worker's audience": signer.For(secure.WorkerAudience(addr)),
	} {
		if err := call(s); status.Code(err) != codes.Unauthenticated {
			t.Errorf("signed for %s: %v, want Unauthenticated", name, err)
		}
	}
}
