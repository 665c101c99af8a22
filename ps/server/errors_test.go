package server

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// TestDomainErrorsHaveKinds: the server's calls fail with plain errors of
// a kind, not gRPC status errors, and errorCodes gives each kind the code
// clients read: a pull from an undeclared table is NotFound, one from a
// worker outside the job InvalidArgument, with the server's message.
func TestDomainErrorsHaveKinds(t *testing.T) {
	ring, err := ps.NewRing(1, []string{"127.0.0.1:1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Index: 0, Ring: ring, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req  *pspb.PullRequest
		kind error
		code codes.Code
	}{
		{&pspb.PullRequest{Table: "emb", RingVersion: 1}, errNotFound, codes.NotFound},
		{&pspb.PullRequest{Table: "emb", RingVersion: 1, Worker: 7}, errBadRequest, codes.InvalidArgument},
	} {
		_, err := s.Pull(context.Background(), tc.req)
		if _, isStatus := status.FromError(err); isStatus || !errors.Is(err, tc.kind) {
			t.Fatalf("pull %v: %v (a status error: %v), want an error of kind %v", tc.req, err, isStatus, tc.kind)
		}
		if st := status.Convert(errorCodes.Map(err)); st.Code() != tc.code || st.Message() != err.Error() {
			t.Fatalf("pull %v: on the wire %v %q, want %v %q", tc.req, st.Code(), st.Message(), tc.code, err.Error())
		}
	}
}
