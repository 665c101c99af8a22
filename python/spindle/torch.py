"""PyTorch helpers: process-group setup from Spindle's environment, a dataset over the feed, checkpoints.

A plain DistributedDataParallel script needs about five changed lines::

    import spindle.torch as st

    st.init_process_group()                 # was: dist.init_process_group("gloo")
    ds = st.FeedDataset()                   # was: a Dataset, a DistributedSampler and a DataLoader
    model = DDP(MyModel(ds.num_features))
    for epoch in itertools.count():         # was: for epoch in range(args.epochs)
        for x, y in ds:                     # one epoch of this rank's batches
            ...
        if ds.end_of_feed:
            break
    if st.is_chief():
        st.save_checkpoint(model.module.state_dict())
    st.finish(exit_status=0)                # was: dist.destroy_process_group()

Under ``spindle.failure.shrinkInPlace`` or ``spindle.failure.replaceWorkers``,
:func:`reform` and :func:`catch_up` keep the processes running when a rank
is lost: the survivors re-form their gloo group, without it or with its
replacement, and go on; under ``spindle.failure.growInPlace``,
:func:`grow` takes newcomers in at a step boundary (see
:mod:`spindle._torch_elastic`).

torch is imported when this module is, never by ``import spindle``.
"""

import datetime
import os
import sys
import tempfile
import threading

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from . import _contract as C
from . import _env
from . import _torch_elastic as _elastic
from . import checkpoint as _checkpoint
from ._errors import EnvError, SpindleError
from ._torch_elastic import catch_up, grow, peer_lost, reform

__all__ = ["FeedDataset", "barrier", "catch_up", "finish", "grow", "init_process_group", "is_chief", "load_checkpoint",
           "peer_lost", "reform", "save_checkpoint"]


def _env_int(name, minimum):
    raw = os.environ.get(name, "")
    if raw.strip() == "":
        raise EnvError(f"{name} is not set: run this script with spindle submit (or set MASTER_ADDR, "
                       "MASTER_PORT, RANK and WORLD_SIZE yourself)")
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise EnvError(f"{name}={raw!r} is below {minimum}")
    return value


# How long ranks wait for each other to start, as Spindle's Go collectives
# do (their connect timeout): a rank importing torch on a busy host may
# start seconds after the others, which a short collective timeout must
# not turn into a failed job.
RENDEZVOUS_TIMEOUT = datetime.timedelta(minutes=2)


def init_process_group(backend="gloo", timeout=None, rendezvous_timeout=None, **kwargs):
    """Join the job's torch.distributed process group.

    Rendezvous uses MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which
    the executor sets. timeout (seconds or a timedelta) bounds every
    collective operation, so a dead or stalled peer turns into an error
    instead of a hang; it defaults to SPINDLE_COLLECTIVE_TIMEOUT (30 seconds
    when unset), not torch's 30 minutes. rendezvous_timeout bounds the wait
    for the other ranks to start (2 minutes, or timeout when longer).
    Further keyword arguments go to ``torch.distributed.init_process_group``.
    Calling it again once the group exists does nothing.

    A lost rank's replacement (SPINDLE_REPLACEMENT, under
    ``spindle.failure.replaceWorkers``) joins the group the survivors
    re-form in :func:`reform` instead, and a newcomer (under
    ``spindle.failure.growInPlace``) the one they form in :func:`grow`;
    either should call :func:`catch_up` before it trains.
    """
    if dist.is_initialized():
        return
    for name in (C.MASTER_ADDR, C.MASTER_PORT):
        if not os.environ.get(name):
            raise EnvError(f"{name} is not set: run this script with spindle submit")
    _env_int(C.MASTER_PORT, 1)
    rank = _env_int(C.TORCH_RANK, 0)
    world = _env_int(C.TORCH_WORLD_SIZE, 1)
    if rank >= world:
        raise EnvError(f"{C.TORCH_RANK}={rank} is not below {C.TORCH_WORLD_SIZE}={world}")
    if timeout is None:
        timeout = _env.collective_timeout()
    timeout = _as_timedelta(timeout)
    rendezvous = _as_timedelta(rendezvous_timeout) if rendezvous_timeout is not None else max(timeout, RENDEZVOUS_TIMEOUT)
    if "init_method" in kwargs or "store" in kwargs:
        dist.init_process_group(backend=backend, rank=rank, world_size=world, timeout=timeout, **kwargs)
        return
    if backend == "gloo" and _elastic.join_replacement(rank, world, timeout, rendezvous, **kwargs):
        return  # a lost rank's replacement, in the survivors' group
    # env:// would bound the ranks' meeting by timeout too; the store made
    # here waits rendezvous for them, then collectives get timeout.
    host, port = os.environ[C.MASTER_ADDR], int(os.environ[C.MASTER_PORT])
    store = dist.TCPStore(host, port, world, rank == 0, rendezvous, multi_tenant=True)
    dist.init_process_group(backend=backend, store=dist.PrefixStore("default_pg", store), rank=rank, world_size=world,
                            timeout=timeout, **kwargs)
    if backend == "gloo":
        _elastic._joined(store, host, port, rank, world, timeout, rendezvous)


def _as_timedelta(value):
    return value if isinstance(value, datetime.timedelta) else datetime.timedelta(seconds=float(value))


def is_chief():
    """Report whether this process is rank 0, the one that writes checkpoints and reports."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    if os.environ.get(C.TORCH_RANK):
        return _env_int(C.TORCH_RANK, 0) == 0
    return _env.rank() == 0


def barrier():
    """Wait until every rank reaches this point (a no-op outside a process group)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def finish(timeout=None, exit_status=None):
    """Leave the process group at the end of training, in bounded time.

    Call it once every rank is done with collectives (after a barrier).
    Now and then torch's teardown of a gloo group never returns once the
    other ranks have left (a known PyTorch problem), and a rank whose work
    is done must not keep the job waiting. The teardown happens in
    ``torch.distributed.destroy_process_group`` or later, when the last
    reference to the group goes away (a DistributedDataParallel module
    holds one), as late as interpreter exit.

    finish runs ``destroy_process_group`` on a helper thread and waits at
    most timeout seconds (SPINDLE_COLLECTIVE_TIMEOUT by default); when it
    does not return in time, finish says so on stderr and ends the process
    with status 0. With exit_status set, finish then ends the process with
    that status at once, stdout and stderr flushed, without the rest of the
    teardown; use that as the script's last line.
    """
    if dist.is_available() and dist.is_initialized():
        if timeout is None:
            timeout = _env.collective_timeout()
        done = threading.Event()

        def destroy():
            dist.destroy_process_group()
            done.set()

        threading.Thread(target=destroy, name="spindle-finish", daemon=True).start()
        if not done.wait(float(timeout)):
            print(f"spindle: torch.distributed.destroy_process_group did not return within {float(timeout):g}s; "
                  "exiting without it", file=sys.stderr, flush=True)
            _exit_now(0)
    if exit_status is not None:
        _exit_now(exit_status)


def _exit_now(status):
    """End the process with status, skipping interpreter teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class FeedDataset(IterableDataset):
    """An IterableDataset over Spindle's feed: each iteration walks one epoch.

    Iterating yields ``(features, labels)`` tensors, one pair per batch the
    executor sends: features is a (rows x features) float32 tensor, labels
    a 1-D tensor (float32 in tensor mode, the label column's type
    otherwise; label_dtype converts it). After the last epoch an iteration
    yields nothing and :attr:`end_of_feed` is True. Use it directly or in a
    ``DataLoader(ds, batch_size=None)`` without worker processes: the
    executor already reads ahead.
    """

    def __init__(self, feed=None, label_column=None, dtype=torch.float32, label_dtype=None):
        """Read feed (default: the process's feed, ``spindle.feed()``)."""
        super().__init__()
        if feed is None:
            from . import feed as default_feed

            feed = default_feed()
        self._feed = feed
        self._label_column = label_column
        self._dtype = dtype
        self._label_dtype = label_dtype
        #: Number of the epoch the last iteration walked; -1 once the feed has none left.
        self.epoch = None

    @property
    def feed(self):
        """Return the underlying :class:`spindle.Feed`."""
        return self._feed

    @property
    def end_of_feed(self):
        """Report whether the last iteration found the feed out of epochs."""
        return self.epoch is not None and self.epoch < 0

    @property
    def feature_columns(self):
        """Return the feature column names (reads the next epoch's header, keeping it)."""
        return self._feed.feature_columns(self._label_column)

    @property
    def num_features(self):
        """Return the number of features in a row."""
        return len(self.feature_columns)

    def __iter__(self):
        info = get_worker_info()
        if info is not None and info.num_workers > 1:
            raise SpindleError("FeedDataset cannot be split across DataLoader workers: each epoch is served "
                               "once; use num_workers=0 (the executor already reads ahead)")
        ep = self._feed.tensors(label_column=self._label_column)
        self.epoch = ep.epoch
        with ep:
            for x, y in ep:
                xt = torch.from_numpy(x)
                if xt.dtype != self._dtype:
                    xt = xt.to(self._dtype)
                yt = None
                if y is not None:
                    yt = torch.from_numpy(np.ascontiguousarray(y))
                    if self._label_dtype is not None:
                        yt = yt.to(self._label_dtype)
                yield xt, yt


def save_checkpoint(obj, name="checkpoint.pt", directory=None):
    """Save obj with torch.save into the checkpoint directory, atomically.

    directory defaults to SPINDLE_CHECKPOINT_DIR: a local path, a file://
    URI, or an hdfs:// URI (written through the executor, see
    :mod:`spindle.checkpoint`). A reader sees the old checkpoint or the new
    one, never a half-written file. Returns where the checkpoint is.
    """
    directory = _checkpoint._directory(directory)
    local = _checkpoint._local(directory)
    if local is not None:
        # Straight into the directory: no second copy of a large model.
        os.makedirs(local, exist_ok=True)
        path = os.path.join(local, name)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=local)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(obj, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _checkpoint._fsync_dir(local)
        return path
    with tempfile.TemporaryDirectory(prefix="spindle-ckpt-") as d:
        tmp = os.path.join(d, name)
        torch.save(obj, tmp)
        return _checkpoint.save_file(tmp, name, directory)


def load_checkpoint(name="checkpoint.pt", directory=None, map_location="cpu"):
    """Load a checkpoint written by :func:`save_checkpoint`, or return None when there is none."""
    directory = _checkpoint._directory(directory)
    local = _checkpoint._local(directory)
    if local is not None:
        path = os.path.join(local, name)
        if not os.path.exists(path):
            return None
        return torch.load(path, map_location=map_location)
    with tempfile.TemporaryDirectory(prefix="spindle-ckpt-") as d:
        tmp = os.path.join(d, name)
        if not _checkpoint.load_file(name, tmp, directory):
            return None
        return torch.load(tmp, map_location=map_location)
