package client

import (
	"fmt"
	"strconv"
	"strings"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"google.golang.org/protobuf/proto"
)

// AppID is a YARN application id: the ResourceManager's start time and a
// sequence number, written application_<clusterTimestamp>_<nnnn>.
type AppID struct {
	ClusterTimestamp int64
	ID               int32
}

// String formats the id as YARN does.
func (a AppID) String() string { return fmt.Sprintf("application_%d_%04d", a.ClusterTimestamp, a.ID) }

// Proto returns the id as ApplicationIdProto.
func (a AppID) Proto() *pb.ApplicationIdProto {
	return &pb.ApplicationIdProto{Id: proto.Int32(a.ID), ClusterTimestamp: proto.Int64(a.ClusterTimestamp)}
}

// AppIDFromProto converts an ApplicationIdProto.
func AppIDFromProto(p *pb.ApplicationIdProto) AppID {
	return AppID{ClusterTimestamp: p.GetClusterTimestamp(), ID: p.GetId()}
}

// ParseAppID parses application_<ts>_<n>.
func ParseAppID(s string) (AppID, error) {
	parts := strings.Split(s, "_")
	if len(parts) != 3 || parts[0] != "application" {
		return AppID{}, fmt.Errorf("%q is not a YARN application id (application_<timestamp>_<number>)", s)
	}
	ts, err1 := strconv.ParseInt(parts[1], 10, 64)
	n, err2 := strconv.ParseInt(parts[2], 10, 32)
	if err1 != nil || err2 != nil {
		return AppID{}, fmt.Errorf("%q is not a YARN application id (application_<timestamp>_<number>)", s)
	}
	return AppID{ClusterTimestamp: ts, ID: int32(n)}, nil
}

// IsAppID reports whether s looks like a YARN application id.
func IsAppID(s string) bool {
	_, err := ParseAppID(s)
	return err == nil
}

// AttemptString formats an application attempt id as YARN does
// (appattempt_<ts>_<nnnn>_<nnnnnn>).
func AttemptString(p *pb.ApplicationAttemptIdProto) string {
	a := AppIDFromProto(p.GetApplicationId())
	return fmt.Sprintf("appattempt_%d_%04d_%06d", a.ClusterTimestamp, a.ID, p.GetAttemptId())
}

// ContainerString formats a container id as YARN does
// (container_<ts>_<nnnn>_<aa>_<nnnnnn>, with the epoch prefix when set).
func ContainerString(p *pb.ContainerIdProto) string {
	att := p.GetAppAttemptId()
	a := AppIDFromProto(att.GetApplicationId())
	id := p.GetId()
	epoch := id >> 40
	seq := id & (1<<40 - 1)
	prefix := "container_"
	if epoch > 0 {
		prefix = fmt.Sprintf("container_e%02d_", epoch)
	}
	return fmt.Sprintf("%s%d_%04d_%02d_%06d", prefix, a.ClusterTimestamp, a.ID, att.GetAttemptId(), seq)
}

// ParseContainerID parses a container id string (as in $CONTAINER_ID).
func ParseContainerID(s string) (*pb.ContainerIdProto, error) {
	bad := fmt.Errorf("%q is not a YARN container id", s)
	rest, ok := strings.CutPrefix(s, "container_")
	if !ok {
		return nil, bad
	}
	parts := strings.Split(rest, "_")
	var epoch int64
	if len(parts) == 5 && strings.HasPrefix(parts[0], "e") {
		e, err := strconv.ParseInt(parts[0][1:], 10, 64)
		if err != nil {
			return nil, bad
		}
		epoch, parts = e, parts[1:]
	}
	if len(parts) != 4 {
		return nil, bad
	}
	var n [4]int64
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, bad
		}
		n[i] = v
	}
	app := AppID{ClusterTimestamp: n[0], ID: int32(n[1])}.Proto()
	return &pb.ContainerIdProto{
		AppId:        app,
		AppAttemptId: &pb.ApplicationAttemptIdProto{ApplicationId: app, AttemptId: proto.Int32(int32(n[2]))},
		Id:           proto.Int64(epoch<<40 | n[3]),
	}, nil
}
