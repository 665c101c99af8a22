package am

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// asksString renders requests as "name=count/relax" in order.
func asksString(asks []*pb.ResourceRequestProto) string {
	var out []string
	for _, a := range asks {
		relax := "strict"
		if a.GetRelaxLocality() {
			relax = "relax"
		}
		out = append(out, fmt.Sprintf("%s=%d/%s", a.GetResourceName(), a.GetNumContainers(), relax))
	}
	return strings.Join(out, " ")
}

func TestBuildAsks(t *testing.T) {
	racks := map[string]string{"nm1": "/r1", "nm2": "/r1", "nm3": "/r2", "nm4": "/r2"}
	capab := &pb.ResourceProto{Memory: proto.Int64(1152), VirtualCores: proto.Int32(2)}
	for _, tc := range []struct {
		name  string
		hosts [][]string
		level localityLevel
		want  string
	}{
		{"no locality", [][]string{nil, nil}, levelNode, "*=2/relax"},
		{"nodes only at first", [][]string{{"nm1", "nm2"}, {"nm1", "nm3"}, {"nm4"}}, levelNode,
			"nm1=2/relax nm2=1/relax nm3=1/relax nm4=1/relax /r1=2/strict /r2=2/strict *=3/strict"},
		{"then racks", [][]string{{"nm1", "nm2"}, {"nm1", "nm3"}, {"nm4"}}, levelRack,
			"nm1=2/relax nm2=1/relax nm3=1/relax nm4=1/relax /r1=2/relax /r2=2/relax *=3/strict"},
		{"then anywhere", [][]string{{"nm1", "nm2"}, {"nm1", "nm3"}, {"nm4"}}, levelAny,
			"nm1=2/relax nm2=1/relax nm3=1/relax nm4=1/relax /r1=2/relax /r2=2/relax *=3/relax"},
		{"a host without a rack", [][]string{{"nm9"}}, levelNode, "nm9=1/relax *=1/strict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := map[string]bool{}
			got := buildAsks(7, capab, tc.hosts, racks, tc.level, asked)
			if s := asksString(got); s != tc.want {
				t.Fatalf("asks\n got %s\nwant %s", s, tc.want)
			}
			for _, a := range got {
				if a.GetPriority().GetPriority() != 7 || a.GetCapability().GetMemory() != 1152 || a.GetCapability().GetVirtualCores() != 2 {
					t.Fatalf("ask %v lost its priority or capability", a)
				}
				if !asked[a.GetResourceName()] {
					t.Fatalf("%s not recorded as asked", a.GetResourceName())
				}
			}
		})
	}
}

// TestBuildAsksCancels: once an executor has its container, the names
// only it wanted are asked for 0, and a gang given up cancels everything.
func TestBuildAsksCancels(t *testing.T) {
	racks := map[string]string{"nm1": "/r1", "nm3": "/r2"}
	capab := &pb.ResourceProto{Memory: proto.Int64(512), VirtualCores: proto.Int32(1)}
	asked := map[string]bool{}
	buildAsks(1, capab, [][]string{{"nm1"}, {"nm3"}}, racks, levelNode, asked)
	if s := asksString(buildAsks(1, capab, [][]string{{"nm3"}}, racks, levelRack, asked)); s != "nm1=0/relax nm3=1/relax /r1=0/relax /r2=1/relax *=1/strict" {
		t.Fatalf("after one placement: %s", s)
	}
	if s := asksString(buildAsks(1, capab, nil, racks, levelRack, asked)); s != "nm1=0/relax nm3=0/relax /r1=0/relax /r2=0/relax *=0/relax" {
		t.Fatalf("cancelled: %s", s)
	}
}

func TestHostIndexMatch(t *testing.T) {
	addrs := map[string][]string{
		"nm1.example.com": {"10.0.0.1"},
		"nm2.example.com": {"10.0.0.2"},
		"dn-alias":        {"10.0.0.2"},
	}
	lookup := func(_ context.Context, h string) ([]string, error) {
		if a, ok := addrs[h]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	ix := newHostIndex([]string{"nm1.example.com", "nm2.example.com"}, lookup)
	for _, tc := range []struct {
		preferred []string
		want      []string
	}{
		{[]string{"nm1.example.com"}, []string{"nm1.example.com"}},
		{[]string{"NM1.EXAMPLE.COM"}, []string{"nm1.example.com"}},
		{[]string{"nm2"}, []string{"nm2.example.com"}},                         // short name
		{[]string{"10.0.0.1"}, []string{"nm1.example.com"}},                    // a DataNode's address
		{[]string{"dn-alias", "nm2.example.com"}, []string{"nm2.example.com"}}, // same node twice
		{[]string{"elsewhere", "10.9.9.9"}, nil},                               // no NodeManager there
	} {
		if got := ix.match(tc.preferred); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("match(%v) = %v, want %v", tc.preferred, got, tc.want)
		}
	}
}

func TestAttempt(t *testing.T) {
	for id, want := range map[string]int{
		"container_1795664585509_0001_01_000001":     1,
		"container_e17_1795664585509_0001_02_000001": 2,
		"application_1795664585509_0001":             0,
		"":                                           0,
	} {
		if got := Attempt(id); got != want {
			t.Errorf("Attempt(%q) = %d, want %d", id, got, want)
		}
	}
}

// TestPlaceByLocality: a granted container goes to the waiting executor
// whose input is on its node, else on its rack, else the first waiting;
// a container no executor waits for is released.
func TestPlaceByLocality(t *testing.T) {
	racks := map[string]string{"nm1": "/r1", "nm2": "/r1", "nm3": "/r2"}
	a := &Allocator{cfg: Config{Racks: racks}}
	g := &gang{
		specs:   make([]driver.ExecutorSpec, 4),
		hosts:   [][]string{{"nm3"}, {"nm1"}, nil, {"nm2"}},
		waiting: map[int32]*waitList{},
		held:    map[int]*pb.ContainerProto{},
		heldBy:  map[string]int{},
		ready:   make(chan struct{}),
	}
	for i := range g.specs {
		a.waitLocked(g, 1, i)
	}
	a.gang = g
	grant := func(host string, seq int64) *pb.ContainerProto { return grantOn(host, seq, 1) }
	for _, step := range []struct {
		host string
		want int // spec index that gets it
	}{
		{"nm1", 1}, // node-local
		{"nm1", 3}, // rack-local: nm2 is on /r1
		{"nm9", 0}, // neither: the first waiting
		{"nm3", 2},
	} {
		c := grant(step.host, int64(len(g.held)+1))
		a.place(c)
		if g.held[step.want] != c {
			t.Fatalf("container on %s: held %v, want it for executor %d", step.host, g.held, step.want)
		}
	}
	select {
	case <-g.ready:
	default:
		t.Fatal("gang complete but not ready")
	}
	a.gang = nil
	a.place(grant("nm1", 9))
	if len(a.releases) != 1 || a.releases[0].GetId() != 9 {
		t.Fatalf("surplus container not released: %v", a.releases)
	}
}

// grantOn returns a container numbered seq on host at priority prio, as
// the ResourceManager grants it.
func grantOn(host string, seq int64, prio int32) *pb.ContainerProto {
	return &pb.ContainerProto{
		Id:       &pb.ContainerIdProto{Id: proto.Int64(seq)},
		NodeId:   &pb.NodeIdProto{Host: proto.String(host), Port: proto.Int32(8041)},
		Priority: &pb.PriorityProto{Priority: proto.Int32(prio)},
	}
}

// TestPlaceGangCostsLinearWork places a gang of 4,000 containers, with
// some lost and granted again while it is pending, and counts the waiting
// executors looked at: a few per container, not every one waiting (the
// scan it replaced looked at about n²/2, 8 million here).
func TestPlaceGangCostsLinearWork(t *testing.T) {
	const n, nodes = 4000, 500
	racks := map[string]string{}
	for h := range nodes {
		racks[fmt.Sprintf("nm%d", h)] = fmt.Sprintf("/r%d", h%20)
	}
	a := &Allocator{cfg: Config{Racks: racks}}
	g := &gang{specs: make([]driver.ExecutorSpec, n), hosts: make([][]string, n), waiting: map[int32]*waitList{},
		held: map[int]*pb.ContainerProto{}, heldBy: map[string]int{}, capab: map[int32]*pb.ResourceProto{1: {}},
		asked: map[int32]map[string]bool{1: {}}, ready: make(chan struct{})}
	for i := range n {
		g.hosts[i] = []string{fmt.Sprintf("nm%d", i%nodes), fmt.Sprintf("nm%d", (i*7+3)%nodes)}
		a.waitLocked(g, 1, i)
	}
	a.gang = g
	seq := int64(0)
	grantNext := func(host string) {
		seq++
		a.place(grantOn(host, seq, 1))
	}
	// Half the gang, on nodes its input is on, on nodes no executor asked
	// for and on nodes of no rack.
	for k := range n / 2 {
		switch k % 3 {
		case 0:
			grantNext(fmt.Sprintf("nm%d", k%nodes))
		case 1:
			grantNext(fmt.Sprintf("nm%d", nodes+k%nodes)) // off the racks
		default:
			grantNext(fmt.Sprintf("nm%d", (k*13)%nodes))
		}
	}
	// A tenth of what is held is lost and waits again.
	lost := 0
	for cid := range g.heldBy {
		if lost == n/10 {
			break
		}
		if _, ok := a.completedLocked(&pb.ContainerStatusProto{ContainerId: g.held[g.heldBy[cid]].GetId()}); ok {
			t.Fatal("a container held for a pending gang was reported as an executor's")
		}
		lost++
	}
	for len(g.held) < n {
		grantNext(fmt.Sprintf("nm%d", int(seq)%nodes))
	}
	select {
	case <-g.ready:
	default:
		t.Fatal("gang complete but not ready")
	}
	if len(g.heldBy) != n || g.waiting[1].len() != 0 {
		t.Fatalf("held %d (by id %d), waiting %d; want %d, %d, 0", len(g.held), len(g.heldBy), g.waiting[1].len(), n, n)
	}
	if v := g.waiting[1].visits; v > 8*n {
		t.Fatalf("placing %d containers looked at %d waiting executors, want at most %d", n, v, 8*n)
	}
}
