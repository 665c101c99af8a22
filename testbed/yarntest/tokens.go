package yarntest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/client"
)

// Token kinds, as Hadoop names them.
const (
	kindAMRM      = "YARN_AM_RM_TOKEN"
	kindNM        = "NMToken"
	kindContainer = "ContainerToken"
)

// Java exception classes the test YARN raises, as the real one does.
const (
	classYarn                = "org.apache.hadoop.yarn.exceptions.YarnException"
	classAppNotFound         = "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException"
	classAttemptNotFound     = "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException"
	classNotRegistered       = "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException"
	classInvalidAMRequest    = "org.apache.hadoop.yarn.exceptions.InvalidApplicationMasterRequestException"
	classInvalidResource     = "org.apache.hadoop.yarn.exceptions.InvalidResourceRequestException"
	classInvalidToken        = "org.apache.hadoop.security.token.SecretManager$InvalidToken"
	classAccessControl       = hadooprpc.ClassAccessControl
	classContainerNotStarted = "org.apache.hadoop.yarn.exceptions.ContainerNotFoundException"
)

// keyRing is one secret manager's master keys: the current one signs new
// tokens; older ones still verify until they are dropped.
type keyRing struct {
	current int32
	keys    map[int32][]byte
}

func newKeyRing() *keyRing {
	r := &keyRing{keys: map[int32][]byte{}}
	r.roll()
	return r
}

func (r *keyRing) roll() {
	r.current++
	k := make([]byte, 20)
	rand.Read(k)
	r.keys[r.current] = k
}

// dropOld forgets every key but the current one.
func (r *keyRing) dropOld() {
	for id := range r.keys {
		if id != r.current {
			delete(r.keys, id)
		}
	}
}

// password signs a token identifier with key id; false when the key is
// gone.
func (r *keyRing) password(id int32, identifier []byte) ([]byte, bool) {
	k, ok := r.keys[id]
	if !ok {
		return nil, false
	}
	h := hmac.New(sha1.New, k)
	h.Write(identifier)
	return h.Sum(nil), true
}

// sign returns a token of kind for identifier, signed with the current
// key; wrong spoils its password, for tests of refused tokens.
func (r *keyRing) sign(identifier []byte, kind, service string, wrong bool) *pb.TokenProto {
	pw, _ := r.password(r.current, identifier)
	if wrong {
		pw = append([]byte(nil), pw...)
		pw[0] ^= 0xff
	}
	return &pb.TokenProto{Identifier: identifier, Password: pw, Kind: proto.String(kind), Service: proto.String(service)}
}

func nodeString(n *pb.NodeIdProto) string {
	return net.JoinHostPort(n.GetHost(), strconv.Itoa(int(n.GetPort())))
}

func (c *Cluster) amrmToken(a *app, wrong bool) *pb.TokenProto {
	id, _ := proto.Marshal(&pb.AMRMTokenIdentifierProto{AppAttemptId: a.attemptID(), KeyId: proto.Int32(c.amrmKeys.current)})
	return c.amrmKeys.sign(id, kindAMRM, c.schedAddr, wrong)
}

func (c *Cluster) nmToken(a *app, n *nodeManager, wrong bool) *pb.NMTokenProto {
	id, _ := proto.Marshal(&pb.NMTokenIdentifierProto{AppAttemptId: a.attemptID(), NodeId: n.nodeID, AppSubmitter: proto.String(a.user), KeyId: proto.Int32(c.nmKeys.current)})
	return &pb.NMTokenProto{NodeId: n.nodeID, Token: c.nmKeys.sign(id, kindNM, n.addr, wrong)}
}

func (c *Cluster) containerToken(a *app, ct *container) *pb.TokenProto {
	id, _ := proto.Marshal(&pb.ContainerTokenIdentifierProto{
		ContainerId: ct.id, NmHostAddr: proto.String(ct.node.addr), AppSubmitter: proto.String(a.user),
		Resource: ct.resource, ExpiryTimeStamp: proto.Int64(ct.allocated.Add(containerTokenLife).UnixMilli()),
		MasterKeyId: proto.Int32(c.containerKeys.current), Priority: &pb.PriorityProto{Priority: proto.Int32(ct.priority)},
		CreationTime: proto.Int64(ct.allocated.UnixMilli()),
	})
	return c.containerKeys.sign(id, kindContainer, ct.node.addr, false)
}

// amrmLookup checks an AMRMToken for the scheduler's TOKEN
// authentication; the authenticated user is the application attempt.
func (c *Cluster) amrmLookup(identifier []byte) ([]byte, string, error) {
	var id pb.AMRMTokenIdentifierProto
	if err := proto.Unmarshal(identifier, &id); err != nil || id.AppAttemptId == nil {
		return nil, "", fmt.Errorf("an AMRMToken identifier does not parse (%v): is this token for another service?", err)
	}
	attempt := client.AttemptString(id.GetAppAttemptId())
	c.mu.Lock()
	defer c.mu.Unlock()
	pw, ok := c.amrmKeys.password(id.GetKeyId(), identifier)
	if !ok {
		//lint:ignore ST1005 the ResourceManager's own words, which clients match
		return nil, "", fmt.Errorf("Invalid AMRMToken from %s: its master key %d has expired (the ResourceManager rolled its keys)", attempt, id.GetKeyId())
	}
	return pw, attempt, nil
}

// nmLookup checks an NMToken for node n.
func (c *Cluster) nmLookup(n *nodeManager) hadooprpc.TokenLookup {
	return func(identifier []byte) ([]byte, string, error) {
		var id pb.NMTokenIdentifierProto
		if err := proto.Unmarshal(identifier, &id); err != nil || id.AppAttemptId == nil {
			return nil, "", fmt.Errorf("an NMToken identifier does not parse (%v): is this token for another service?", err)
		}
		attempt := client.AttemptString(id.GetAppAttemptId())
		if got := nodeString(id.GetNodeId()); got != n.addr {
			//lint:ignore ST1005 the NodeManager's own words, which clients match
			return nil, "", fmt.Errorf("Given NMToken for application : %s is not valid for current node manager.expected : %s found : %s", attempt, n.addr, got)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		pw, ok := c.nmKeys.password(id.GetKeyId(), identifier)
		if !ok {
			return nil, "", fmt.Errorf("NMToken for %s on %s is from master key %d, which has expired", attempt, n.addr, id.GetKeyId())
		}
		return pw, attempt, nil
	}
}

// checkContainerToken verifies a container token presented to node n by
// attempt, returning its identifier.
func (c *Cluster) checkContainerToken(n *nodeManager, attempt string, tok *pb.TokenProto) (*pb.ContainerTokenIdentifierProto, error) {
	var id pb.ContainerTokenIdentifierProto
	if err := proto.Unmarshal(tok.GetIdentifier(), &id); err != nil || id.ContainerId == nil {
		return nil, hadooprpc.Errorf(classInvalidToken, "the container token does not parse: %v", err)
	}
	cid := client.ContainerString(id.GetContainerId())
	pw, ok := c.containerKeys.password(id.GetMasterKeyId(), tok.GetIdentifier())
	if !ok || !hmac.Equal(pw, tok.GetPassword()) {
		return nil, hadooprpc.Errorf(classInvalidToken, "Invalid container token used for starting container on : %s (container %s): its password does not match", n.addr, cid)
	}
	if got := client.AttemptString(id.GetContainerId().GetAppAttemptId()); got != attempt {
		return nil, hadooprpc.Errorf(classAccessControl, "Unauthorized request to start container.\nNMToken for application attempt : %s was used for starting container with container token issued for application attempt : %s", attempt, got)
	}
	if id.GetNmHostAddr() != n.addr {
		return nil, hadooprpc.Errorf(classAccessControl, "Unauthorized request to start container %s: it was allocated on %s, not on this NodeManager %s", cid, id.GetNmHostAddr(), n.addr)
	}
	if c.now().UnixMilli() > id.GetExpiryTimeStamp() {
		return nil, hadooprpc.Errorf(classInvalidToken, "This token is expired. current time is %d found %d\nNote: System times on machines may be out of sync. Check system time and time zones.", c.now().UnixMilli(), id.GetExpiryTimeStamp())
	}
	return &id, nil
}
