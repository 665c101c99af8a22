package hdfstest

import (
	"context"
	"sort"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"google.golang.org/protobuf/proto"
)

// ClientProtocol is the protocol name HDFS clients declare on namenode calls.
const ClientProtocol = "org.apache.hadoop.hdfs.protocol.ClientProtocol"

// endpoint is one namenode RPC address. With several (an HA nameservice)
// exactly one is active; the others answer every call with StandbyException,
// which makes clients fail over, while all share one namespace.
type endpoint struct {
	index  int
	active func(index int) bool
}

// handle registers fn as method name, behind the standby gate of ep.
func handle[Req, Resp proto.Message](svc *hadooprpc.Service, ep endpoint, name string, fn func(ctx context.Context, u *user, req Req) (Resp, error), nn *namenode) {
	hadooprpc.Handle(svc, name, func(ctx context.Context, req Req) (Resp, error) {
		var zero Resp
		if !ep.active(ep.index) {
			return zero, remoteErr(classStandby, "Operation category READ is not supported in state standby")
		}
		c, _ := hadooprpc.CallerFromContext(ctx)
		if nn.stats != nil {
			nn.stats.auth(c.Auth + " " + c.Protection)
		}
		resp, err := fn(ctx, nn.userFor(c.User), req)
		nn.flushDeletes()
		return resp, err
	})
}

// clientProtocol builds the ClientProtocol service of one namenode endpoint.
func (nn *namenode) clientProtocol(ep endpoint) *hadooprpc.Service {
	svc := hadooprpc.NewService(ClientProtocol)
	handle(svc, ep, "getServerDefaults", nn.getServerDefaults, nn)
	handle(svc, ep, "getDataEncryptionKey", nn.getDataEncryptionKey, nn)
	handle(svc, ep, "getFileInfo", nn.getFileInfo, nn)
	handle(svc, ep, "getListing", nn.getListing, nn)
	handle(svc, ep, "getBlockLocations", nn.getBlockLocations, nn)
	handle(svc, ep, "create", nn.create, nn)
	handle(svc, ep, "addBlock", nn.addBlock, nn)
	handle(svc, ep, "abandonBlock", nn.abandonBlock, nn)
	handle(svc, ep, "updateBlockForPipeline", nn.updateBlockForPipeline, nn)
	handle(svc, ep, "complete", nn.complete, nn)
	handle(svc, ep, "renewLease", nn.renewLease, nn)
	handle(svc, ep, "mkdirs", nn.mkdirs, nn)
	handle(svc, ep, "delete", nn.delete, nn)
	handle(svc, ep, "rename", nn.rename, nn)
	handle(svc, ep, "rename2", nn.rename2, nn)
	handle(svc, ep, "setPermission", nn.setPermission, nn)
	handle(svc, ep, "setOwner", nn.setOwner, nn)
	handle(svc, ep, "setTimes", nn.setTimes, nn)
	handle(svc, ep, "getFsStats", nn.getFsStats, nn)
	handle(svc, ep, "getContentSummary", nn.getContentSummary, nn)
	handle(svc, ep, "getDelegationToken", nn.getDelegationToken, nn)
	handle(svc, ep, "renewDelegationToken", nn.renewDelegationToken, nn)
	handle(svc, ep, "cancelDelegationToken", nn.cancelDelegationToken, nn)
	return svc
}

func (nn *namenode) getServerDefaults(_ context.Context, _ *user, _ *hadooppb.GetServerDefaultsRequestProto) (*hadooppb.GetServerDefaultsResponseProto, error) {
	return &hadooppb.GetServerDefaultsResponseProto{ServerDefaults: &hadooppb.FsServerDefaultsProto{
		BlockSize:           proto.Uint64(uint64(nn.cfg.BlockSize)),
		BytesPerChecksum:    proto.Uint32(uint32(nn.cfg.BytesPerChecksum)),
		WritePacketSize:     proto.Uint32(64 << 10),
		Replication:         proto.Uint32(uint32(nn.cfg.Replication)),
		FileBufferSize:      proto.Uint32(4096),
		EncryptDataTransfer: proto.Bool(false),
		TrashInterval:       proto.Uint64(0),
		ChecksumType:        hadooppb.ChecksumTypeProto_CHECKSUM_CRC32C.Enum(),
	}}, nil
}

func (nn *namenode) getFileInfo(_ context.Context, u *user, req *hadooppb.GetFileInfoRequestProto) (*hadooppb.GetFileInfoResponseProto, error) {
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	w, err := nn.resolve(u, req.GetSrc())
	if err != nil {
		if classOf(err) == classParentNotDirectory {
			return &hadooppb.GetFileInfoResponseProto{}, nil
		}
		return nil, err
	}
	resp := &hadooppb.GetFileInfoResponseProto{}
	if t := w.target(); t != nil {
		resp.Fs = nn.fileStatus(t, "")
	}
	return resp, nil
}

func (nn *namenode) getListing(_ context.Context, u *user, req *hadooppb.GetListingRequestProto) (*hadooppb.GetListingResponseProto, error) {
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	w, err := nn.resolve(u, req.GetSrc())
	if err != nil {
		return nil, err
	}
	t := w.target()
	if t == nil {
		return &hadooppb.GetListingResponseProto{}, nil
	}
	list := &hadooppb.DirectoryListingProto{RemainingEntries: proto.Uint32(0)}
	if !t.isDir {
		list.PartialListing = []*hadooppb.HdfsFileStatusProto{nn.fileStatus(t, "")}
		return &hadooppb.GetListingResponseProto{DirList: list}, nil
	}
	if err := u.check(t, accessRead|accessExecute); err != nil {
		return nil, err
	}
	children := t.sortedChildren()
	after := string(req.GetStartAfter())
	start := sort.Search(len(children), func(i int) bool { return children[i].name > after })
	end := start + nn.cfg.ListingLimit
	if end > len(children) {
		end = len(children)
	}
	for _, c := range children[start:end] {
		list.PartialListing = append(list.PartialListing, nn.fileStatus(c, c.name))
	}
	list.RemainingEntries = proto.Uint32(uint32(len(children) - end))
	return &hadooppb.GetListingResponseProto{DirList: list}, nil
}

func (nn *namenode) getBlockLocations(_ context.Context, u *user, req *hadooppb.GetBlockLocationsRequestProto) (*hadooppb.GetBlockLocationsResponseProto, error) {
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	lbs, err := nn.getBlockLocationsLocked(u, req.GetSrc(), int64(req.GetOffset()), int64(req.GetLength()))
	if err != nil {
		return nil, err
	}
	return &hadooppb.GetBlockLocationsResponseProto{Locations: lbs}, nil
}

func (nn *namenode) create(_ context.Context, u *user, req *hadooppb.CreateRequestProto) (*hadooppb.CreateResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	f, err := nn.createLocked(u, req)
	if err != nil {
		return nil, err
	}
	return &hadooppb.CreateResponseProto{Fs: nn.fileStatus(f, "")}, nil
}

func (nn *namenode) addBlock(_ context.Context, u *user, req *hadooppb.AddBlockRequestProto) (*hadooppb.AddBlockResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	b, off, err := nn.addBlockLocked(u, req)
	if err != nil {
		return nil, err
	}
	return &hadooppb.AddBlockResponseProto{Block: nn.located(b, off, b.targets, false, u.name, modeWrite)}, nil
}

func (nn *namenode) abandonBlock(_ context.Context, u *user, req *hadooppb.AbandonBlockRequestProto) (*hadooppb.AbandonBlockResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if err := nn.abandonBlockLocked(u, req); err != nil {
		return nil, err
	}
	return &hadooppb.AbandonBlockResponseProto{}, nil
}

func (nn *namenode) updateBlockForPipeline(_ context.Context, _ *user, req *hadooppb.UpdateBlockForPipelineRequestProto) (*hadooppb.UpdateBlockForPipelineResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	lb, err := nn.updateBlockForPipelineLocked(req)
	if err != nil {
		return nil, err
	}
	return &hadooppb.UpdateBlockForPipelineResponseProto{Block: lb}, nil
}

func (nn *namenode) complete(_ context.Context, u *user, req *hadooppb.CompleteRequestProto) (*hadooppb.CompleteResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	ok, err := nn.completeLocked(u, req)
	if err != nil {
		return nil, err
	}
	return &hadooppb.CompleteResponseProto{Result: proto.Bool(ok)}, nil
}

func (nn *namenode) renewLease(_ context.Context, _ *user, req *hadooppb.RenewLeaseRequestProto) (*hadooppb.RenewLeaseResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if _, ok := nn.leases[req.GetClientName()]; ok {
		nn.leases[req.GetClientName()] = time.Now()
	}
	return &hadooppb.RenewLeaseResponseProto{}, nil
}

func (nn *namenode) mkdirs(_ context.Context, u *user, req *hadooppb.MkdirsRequestProto) (*hadooppb.MkdirsResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if _, err := nn.mkdirsLocked(u, req.GetSrc(), uint16(req.GetMasked().GetPerm()), req.GetCreateParent()); err != nil {
		return nil, err
	}
	return &hadooppb.MkdirsResponseProto{Result: proto.Bool(true)}, nil
}

func (nn *namenode) delete(_ context.Context, u *user, req *hadooppb.DeleteRequestProto) (*hadooppb.DeleteResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	ok, err := nn.deleteLocked(u, req.GetSrc(), req.GetRecursive())
	if err != nil {
		return nil, err
	}
	return &hadooppb.DeleteResponseProto{Result: proto.Bool(ok)}, nil
}

func (nn *namenode) rename(_ context.Context, u *user, req *hadooppb.RenameRequestProto) (*hadooppb.RenameResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	ok, err := nn.renameLocked(u, req.GetSrc(), req.GetDst())
	if err != nil {
		return nil, err
	}
	return &hadooppb.RenameResponseProto{Result: proto.Bool(ok)}, nil
}

func (nn *namenode) rename2(_ context.Context, u *user, req *hadooppb.Rename2RequestProto) (*hadooppb.Rename2ResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if err := nn.rename2Locked(u, req.GetSrc(), req.GetDst(), req.GetOverwriteDest()); err != nil {
		return nil, err
	}
	return &hadooppb.Rename2ResponseProto{}, nil
}

func (nn *namenode) setPermission(_ context.Context, u *user, req *hadooppb.SetPermissionRequestProto) (*hadooppb.SetPermissionResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if err := nn.setPermissionLocked(u, req.GetSrc(), uint16(req.GetPermission().GetPerm())); err != nil {
		return nil, err
	}
	return &hadooppb.SetPermissionResponseProto{}, nil
}

func (nn *namenode) setOwner(_ context.Context, u *user, req *hadooppb.SetOwnerRequestProto) (*hadooppb.SetOwnerResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if err := nn.setOwnerLocked(u, req.GetSrc(), req.GetUsername(), req.GetGroupname()); err != nil {
		return nil, err
	}
	return &hadooppb.SetOwnerResponseProto{}, nil
}

func (nn *namenode) setTimes(_ context.Context, u *user, req *hadooppb.SetTimesRequestProto) (*hadooppb.SetTimesResponseProto, error) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if err := nn.setTimesLocked(u, req.GetSrc(), int64(req.GetMtime()), int64(req.GetAtime())); err != nil {
		return nil, err
	}
	return &hadooppb.SetTimesResponseProto{}, nil
}

func (nn *namenode) getFsStats(_ context.Context, _ *user, _ *hadooppb.GetFsStatusRequestProto) (*hadooppb.GetFsStatsResponseProto, error) {
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	var used, under, corrupt, missing uint64
	for _, b := range nn.blocks {
		good := 0
		for dn, r := range b.replicas {
			used += uint64(r.numBytes)
			if r.corrupt {
				corrupt++
			} else if nn.datanodes[dn] != nil && nn.datanodes[dn].alive {
				good++
			}
		}
		if good == 0 && !b.file.underConstruction() {
			missing++
		} else if good < b.file.replication {
			under++
		}
	}
	capacity := uint64(len(nn.datanodes)) << 40
	return &hadooppb.GetFsStatsResponseProto{
		Capacity: proto.Uint64(capacity), Used: proto.Uint64(used), Remaining: proto.Uint64(capacity - used),
		UnderReplicated: proto.Uint64(under), CorruptBlocks: proto.Uint64(corrupt), MissingBlocks: proto.Uint64(missing),
	}, nil
}

func (nn *namenode) getContentSummary(_ context.Context, u *user, req *hadooppb.GetContentSummaryRequestProto) (*hadooppb.GetContentSummaryResponseProto, error) {
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	w, err := nn.resolve(u, req.GetPath())
	if err != nil {
		return nil, err
	}
	t := w.target()
	if t == nil {
		return nil, errNotFound(req.GetPath())
	}
	var length, files, dirs, space uint64
	var walk func(n *inode) error
	walk = func(n *inode) error {
		if !n.isDir {
			files++
			length += uint64(n.length())
			space += uint64(n.length()) * uint64(n.replication)
			return nil
		}
		dirs++
		if err := u.check(n, accessRead|accessExecute); err != nil {
			return err
		}
		for _, c := range n.children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(t); err != nil {
		return nil, err
	}
	const noQuota = ^uint64(0) // -1 on the wire
	return &hadooppb.GetContentSummaryResponseProto{Summary: &hadooppb.ContentSummaryProto{
		Length: proto.Uint64(length), FileCount: proto.Uint64(files), DirectoryCount: proto.Uint64(dirs),
		Quota: proto.Uint64(noQuota), SpaceConsumed: proto.Uint64(space), SpaceQuota: proto.Uint64(noQuota),
	}}, nil
}
