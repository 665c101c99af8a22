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

Under ``spindle.failure.policy restart`` with
``spindle.failure.replaceWorkers``, the membership keeps its size and
names a new process for the lost rank instead: :func:`reform` re-forms the
group of the same size with it, keeping every survivor's rank. The
replacement, started with SPINDLE_REPLACEMENT set, joins that group in
:func:`spindle.torch.init_process_group` and calls :func:`catch_up` before
it trains, which hands it a survivor's state::

    st.init_process_group()
    model, opt, step = Net(), torch.optim.SGD(...), 0
    if spindle.replacement():
        step = st.catch_up(step, model, opt)

Under ``spindle.failure.growInPlace`` the job also takes newcomers while
its ranks train: every rank calls :func:`grow` at the same step
boundaries, which forms the bigger group with them and hands them the
state; a newcomer joins as a replacement does.

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

# Whether this process joined its group as a lost rank's replacement and
# has not caught up yet: catch_up takes no state from it while a survivor
# has some.
_fresh = False


def _joined(store, host, port, rank, world, timeout, rendezvous):
    """Remember the group init_process_group formed, so that reform can replace it."""
    global _world
    m = _env.membership()
    if m is None or not 0 <= rank < len(m.get("peers", [])):
        _world = None  # the executor keeps no membership: nothing to go on with
        return
    _world = _World(store, (host, port), rank, world, m.get("version", 0), m["peers"][rank], timeout, rendezvous)


def join_replacement(rank, world, timeout, rendezvous, **kwargs):
    """Join the survivors' group as the replacement of a lost rank, and report whether this process is one.

    A replacement (SPINDLE_REPLACEMENT above 0) whose membership names it
    at rank meets the survivors, who re-form their group in :func:`reform`,
    at the store of the membership's rank 0 under its version's prefix,
    as they do. Anything else returns False: the gang's first processes
    meet as usual.
    """
    global _world, _fresh
    if _env.replacement() <= 0:
        return False
    m = _env.membership()
    peers, services = (m or {}).get("peers") or [], (m or {}).get("services") or []
    if m is None or m.get("version", 0) <= 0 or len(peers) != world or len(services) != world or not 0 <= rank < world:
        return False  # no membership to meet the survivors by: the job restarted its gang
    _world = _World(None, None, rank, world, 0, peers[rank], timeout, rendezvous)
    _meet(_world, services[0], rank, world, m["version"], **kwargs)
    _fresh = True
    return True


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
    """Re-form the process group without the process this one lost, and return ``(rank, world_size)``.

    Call it when a collective raised error. When error is not a lost peer's
    (:func:`peer_lost`), the job keeps no membership or the group was not
    made by :func:`spindle.torch.init_process_group`, error is raised
    again, unchanged. Otherwise reform waits up to timeout seconds
    (SPINDLE_COLLECTIVE_TIMEOUT by default) for the driver's next
    membership, destroys the old group and joins the new one: with the
    other survivors, renumbered in their old order, when the world shrank;
    with the lost rank's replacement, every rank keeping its number, when
    it was replaced alone. When no newer membership comes in time (the job
    restarts its gang, or does not go on in place), error is raised with a
    note saying so.

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
                     "in place (spindle.failure.shrinkInPlace, spindle.failure.replaceWorkers)")
    peers, version = m.get("peers", []), m.get("version")
    if len(peers) > w.world or (len(peers) == w.world and m.get("left")):
        _fail(error, f"membership version {version} has {len(peers)} ranks where the group had {w.world}: "
                     "a group grows only at a step boundary (spindle.torch.grow)")
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


def _meet(w, service, rank, world, version, **kwargs):
    """Join the group of world ranks that meets at service under version's prefix."""
    host, _, port = service.rpartition(":")
    host = host.strip("[]")
    addr = (host, int(port))
    if addr != w.store_addr:
        # The new rank 0 (a survivor renumbered, or the replacement of a
        # lost rank 0) hosts the store on its own rendezvous port, free
        # since its executor reserved it; the others connect to it.
        w.store = dist.TCPStore(host, int(port), None, rank == 0, w.rendezvous, wait_for_workers=False,
                                multi_tenant=True)
        w.store_addr = addr
    store = dist.PrefixStore(f"spindle_membership_{version}", w.store)
    # The ranks wait for each other (a replacement may still be importing
    # torch) as long as the store's timeout, rendezvous, lets them, as at
    # the start; the group's collectives get timeout.
    dist.init_process_group(backend="gloo", store=store, rank=rank, world_size=world, timeout=w.timeout, **kwargs)
    w.rank, w.world, w.version = rank, world, version


def catch_up(step, model=None, optimizer=None):
    """Hand every rank the state of the survivor that trained furthest, and return its step.

    step is how many steps this rank completed. The ranks of a re-formed
    group differ by at most the step that failed: the lowest rank with the
    most steps broadcasts model's parameters and buffers (an
    ``nn.Module``, or a DistributedDataParallel's) and optimizer's state to
    the others. Call it on every rank after :func:`reform`, and on a lost
    rank's replacement after :func:`spindle.torch.init_process_group`,
    before it trains: a replacement's state (its own start, or a checkpoint
    it loaded) is taken only when no survivor has one, so the survivors'
    state wins.
    """
    global _fresh
    world = dist.get_world_size()
    mine = torch.tensor([int(step), 0 if _fresh else 1], dtype=torch.int64)
    gathered = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, mine)
    _fresh = False
    counts = [int(g[0].item()) for g in gathered]
    # The survivors' state wins: among them the lowest rank with the most
    # steps, and among every rank only when none survived.
    order = [(int(g[1].item()), c) for g, c in zip(gathered, counts)]
    src = order.index(max(order))
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


def grow(step, model=None, optimizer=None, timeout=None):
    """Grow the process group with the newcomers the job took in place, at a step boundary; return ``(step, grew)``.

    Under ``spindle.failure.growInPlace`` an elastic job running below its
    size takes newcomers while its ranks train: the driver appends each one's
    rank after theirs and the executors write a bigger membership. Every rank
    calls grow at the same step boundaries (every step, or every few), with
    step the steps it completed. The ranks agree through one small
    all_reduce on the current group whether any of them was handed a bigger
    membership; a rank whose membership file lags waits for it, up to
    timeout seconds (SPINDLE_COLLECTIVE_TIMEOUT by default). When one came,
    every rank destroys the group and forms the bigger one with the
    newcomers, keeping its rank, then :func:`catch_up` hands the newcomers
    (started with SPINDLE_REPLACEMENT set, which join in
    :func:`spindle.torch.init_process_group` and call :func:`catch_up`
    there) the furthest rank's model and optimizer state; grow returns
    that rank's step and True. Otherwise it returns step and False, at the
    cost of that all_reduce.

    A failure of the all_reduce is a failed collective like any other
    (:func:`reform`). Rebuild a DistributedDataParallel module when grow
    returns True: the old one holds the old group.
    """
    w = _world
    if w is None or not dist.is_initialized():
        return step, False  # no membership: the world never grows
    m = _env.membership()
    seen = 0
    if m is not None and len(m.get("peers") or []) > w.world and m.get("version", 0) > w.version:
        seen = int(m["version"])
    agreed = torch.tensor([seen], dtype=torch.int64)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    target = int(agreed.item())
    if target == 0:
        return step, False
    # Another rank's executor heard of the newcomers first: this rank's
    # writes the same membership within a heartbeat.
    wait = _env.collective_timeout() if timeout is None else float(timeout)
    m = _env.wait_membership(target - 1, timeout=wait)
    if m is None:
        raise SpindleError(f"spindle.torch.grow: rank {w.rank} of {w.world}: membership version {target} did not come "
                           f"within {wait:g}s ({C.MEMBERSHIP})")
    peers, services, version = m.get("peers") or [], m.get("services") or [], m.get("version")
    if len(peers) <= w.world or w.rank >= len(peers) or peers[w.rank] != w.me:
        raise SpindleError(f"spindle.torch.grow: membership version {version} does not keep rank {w.rank} ({w.me}) "
                           f"of {w.world} in a bigger world: {peers}")
    if len(services) != len(peers):
        raise SpindleError(f"spindle.torch.grow: {C.MEMBERSHIP} version {version} lists no rendezvous address per rank "
                           "(services): the executor is older than this package")
    _leave(w.timeout)
    _meet(w, services[0], w.rank, len(peers), version)
    return catch_up(step, model, optimizer), True
