"""Going on in place for PyTorch: re-form the process group without the lost rank.

Under ``spindle.failure.policy elastic`` with
``spindle.failure.shrinkInPlace``, a job without input that loses a worker
goes on with the others' processes: the driver renumbers the survivors
and their executors rewrite SPINDLE_MEMBERSHIP. A gloo collective that
was talking to the lost rank raises a RuntimeError; :func:`reform` turns
that into a smaller process group, and :func:`catch_up` hands every rank
the model of the survivor that got furthest::

    st.init_process_group()
    model, opt, step = Net(), torch.optim.SGD(...), 0
    while step < steps:
        try:
            train_one_step(model, opt)       # all_reduce, or a DDP module's backward
        except RuntimeError as e:
            st.reform(e)                      # raises e again when it lost no peer
            step = st.catch_up(step, model, opt)
            continue
        step += 1

The new group meets at its rank 0's rendezvous port under a prefix that
names the membership's version, so a process of an older world never
joins it.
"""

import gc
import sys
import threading
import traceback

import torch
import torch.distributed as dist

from . import _contract as C
from . import _env
from ._errors import SpindleError

# What gloo's transport says when a peer's process died: its connection
# was closed or reset, or a write to it failed. A collective that timed
# out waiting for a peer counts too: a survivor not connected to the
# lost rank waits on others that are busy failing.
_LOST_PEER_SIGNS = ("connection closed by peer", "connection reset by peer", "broken pipe", "timed out",
                    "connection refused", "socket closed")


class _World:
    """The process group this process is in, and how to meet the next one."""

    def __init__(self, store, store_addr, rank, world, version, me, timeout, rendezvous):
        self.store = store            # the TCPStore the group met at
        self.store_addr = store_addr  # (host, port) of that store
        self.rank, self.world = rank, world
        self.version = version        # the membership version the group was formed from
        self.me = me                  # this process's peer address, as memberships list it
        self.timeout, self.rendezvous = timeout, rendezvous


_world = None


def _joined(store, host, port, rank, world, timeout, rendezvous):
    """Remember the group init_process_group formed, so that reform can replace it."""
    global _world
    m = _env.membership()
    if m is None or not 0 <= rank < len(m.get("peers", [])):
        _world = None  # the executor keeps no membership: nothing to go on with
        return
    _world = _World(store, (host, port), rank, world, m.get("version", 0), m["peers"][rank], timeout, rendezvous)


def peer_lost(error):
    """Report whether error looks like a collective's failure because a peer's process is gone.

    It is a RuntimeError from gloo's transport: a connection closed or reset
    by the peer, a broken pipe, or a timeout waiting for a peer. Whether the
    peer really left the job, only the membership says: :func:`reform` waits
    for it.
    """
    if not isinstance(error, RuntimeError):
        return False
    text = str(error).lower()
    return any(sign in text for sign in _LOST_PEER_SIGNS)


def _fail(error, why):
    """Raise error (the collective's own failure) saying why the group cannot go on, or a SpindleError without one."""
    note = f"spindle.torch.reform: {why}"
    if error is None:
        raise SpindleError(note)
    if hasattr(error, "add_note"):
        error.add_note(note)
    else:  # before Python 3.11, tracebacks show no notes
        error.__notes__ = [*getattr(error, "__notes__", []), note]
        print(note, file=sys.stderr, flush=True)
    raise error


def reform(error=None, timeout=None):
    """Re-form the process group without the rank this process lost, and return ``(rank, world_size)``.

    Call it when a collective raised error. When error is not a lost peer's
    (:func:`peer_lost`), the job keeps no membership or the group was not
    made by :func:`spindle.torch.init_process_group`, error is raised
    again, unchanged. Otherwise reform waits up to timeout seconds
    (SPINDLE_COLLECTIVE_TIMEOUT by default) for the driver's smaller
    membership, destroys the old group and joins the new one with the
    other survivors, renumbered in their old order. When no smaller
    membership comes in time (the job restarts its gang, or does not go on
    in place), error is raised with a note saying so.

    The old group's sockets close only once nothing refers to it: rebuild
    a DistributedDataParallel module after reform (the old one still holds
    the old group), and call :func:`catch_up` next, as the ranks' states
    differ by the step that failed. Frames of error's traceback are
    cleared, so the objects only they held can go.
    """
    if error is not None and not peer_lost(error):
        raise error
    w = _world
    if w is None:
        _fail(error, f"the process group was not formed by spindle.torch.init_process_group under a job that keeps "
                     f"a membership ({C.MEMBERSHIP})")
    wait = _env.collective_timeout() if timeout is None else float(timeout)
    m = _env.wait_membership(w.version, timeout=wait)
    if m is None:
        _fail(error, f"no newer membership than version {w.version} came within {wait:g}s: the job does not go on "
                     "in place (spindle.failure.shrinkInPlace)")
    peers, version = m.get("peers", []), m.get("version")
    if len(peers) >= w.world:
        _fail(error, f"membership version {version} has {len(peers)} ranks, not fewer than {w.world}: "
                     "a lost rank replaced alone cannot rejoin a PyTorch group")
    if w.me not in peers:
        _fail(error, f"membership version {version} goes on without this process ({w.me})")
    services = m.get("services") or []
    if len(services) != len(peers):
        _fail(error, f"{C.MEMBERSHIP} version {version} lists no rendezvous address per rank (services): "
                     "the executor is older than this package")
    if error is not None and error.__traceback__ is not None:
        traceback.clear_frames(error.__traceback__)
    _leave(w.timeout)
    rank, world = peers.index(w.me), len(peers)
    _meet(w, services[0], rank, world, version)
    return rank, world


def _leave(timeout):
    """Destroy the default group, waiting at most timeout for torch's teardown (see finish)."""
    if not dist.is_initialized():
        return
    done = threading.Event()

    def destroy():
        pg = dist.distributed_c10d._get_default_group()
        dist.destroy_process_group()
        if sys.getrefcount(pg) > 2:  # more than pg and getrefcount's argument:
            gc.collect()  # a DistributedDataParallel module in a reference cycle holds the group
        del pg  # the last reference: torch's teardown closes the group's sockets
        done.set()

    threading.Thread(target=destroy, name="spindle-reform", daemon=True).start()
    done.wait(timeout.total_seconds())


def _meet(w, service, rank, world, version):
    """Join the group of world ranks that meets at service under version's prefix."""
    host, _, port = service.rpartition(":")
    host = host.strip("[]")
    addr = (host, int(port))
    if addr != w.store_addr:
        # The new rank 0 hosts the store on its own rendezvous port, free
        # since its executor reserved it; the others connect to it.
        w.store = dist.TCPStore(host, int(port), None, rank == 0, w.rendezvous, wait_for_workers=False,
                                multi_tenant=True)
        w.store_addr = addr
    store = dist.PrefixStore(f"spindle_membership_{version}", w.store)
    dist.init_process_group(backend="gloo", store=store, rank=rank, world_size=world, timeout=w.timeout)
    w.rank, w.world, w.version = rank, world, version


def catch_up(step, model=None, optimizer=None):
    """Hand every rank the state of the survivor that trained furthest, and return its step.

    step is how many steps this rank completed. The ranks of a re-formed
    group differ by at most the step that failed: the lowest rank with the
    most steps broadcasts model's parameters and buffers (an
    ``nn.Module``, or a DistributedDataParallel's) and optimizer's state to
    the others. Call it on every rank after :func:`reform`.
    """
    world = dist.get_world_size()
    mine = torch.tensor([int(step)], dtype=torch.int64)
    steps = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(steps, mine)
    counts = [int(s.item()) for s in steps]
    src = counts.index(max(counts))
    if model is not None:
        with torch.no_grad():
            for t in model.state_dict().values():
                if isinstance(t, torch.Tensor):
                    dist.broadcast(t, src)
    if optimizer is not None:
        box = [optimizer.state_dict() if dist.get_rank() == src else None]
        dist.broadcast_object_list(box, src)
        optimizer.load_state_dict(box[0])
    return counts[src]
