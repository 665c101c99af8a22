"""Spindle's Python package, for training processes that ``spindle submit`` starts.

The executor that starts a training process sets its environment (rank,
world size, peers, where the feed is) and feeds it this rank's data, one
epoch per connection. This package reads both::

    import spindle

    print(spindle.rank(), spindle.world_size())
    while True:
        epoch = spindle.tensors()          # the next epoch: (features, labels) batches
        for x, y in epoch:
            ...
        if epoch.end_of_feed:              # the empty epoch after the last one
            break

``batches()`` yields each batch as a dict of numpy columns instead. Each call
of ``batches()`` or ``tensors()`` walks one epoch; a call after the last
epoch yields nothing. numpy is the only requirement; pyarrow is used for
Arrow data when it is installed. ``spindle.torch`` has PyTorch helpers;
``spindle.ps`` is the client of Spindle's parameter server (numpy arrays in
and out, and ``spindle.ps.Embedding`` for PyTorch models).
"""

import os

from . import _contract, model
from ._env import (
    checkpoint_dir,
    checkpoint_keep,
    collective_timeout,
    feed_mode,
    feed_path,
    feed_start,
    files_dir,
    generation,
    in_spindle,
    job_id,
    label_column,
    local_rank,
    local_world_size,
    membership,
    peers,
    rank,
    replacement,
    resume_checkpoint,
    role,
    role_rank,
    role_world_size,
    roles,
    wait_membership,
    world_size,
)
from ._errors import EnvError, FeedError, FeedTruncatedError, SpindleError, UnsupportedTypeError
from ._feed import Epoch, Feed, position, pyarrow_available
from .checkpoint import Checkpointer
from ._report import report, report_world_batches
from ._version import __version__
from ._submit import Job, JobFailed, submit
from ._run import run
from ._session import Session, SessionRun

__all__ = [
    "__version__", "Checkpointer", "Job", "JobFailed", "Session", "SessionRun", "model", "run", "submit", "EnvError", "Epoch", "Feed", "FeedError", "FeedTruncatedError", "SpindleError", "UnsupportedTypeError",
    "batches", "checkpoint_dir", "checkpoint_keep", "collective_timeout", "columns", "epochs", "feed", "feed_mode", "feed_path",
    "feed_start", "files_dir", "generation", "in_spindle", "job_id", "label_column", "last_epoch", "local_rank", "local_world_size",
    "membership", "peers", "position", "pyarrow_available", "rank", "replacement", "report", "report_world_batches", "resume_checkpoint", "role", "role_rank", "role_world_size", "roles", "tensors", "wait_membership", "world_size",
]

_default = None


def feed():
    """Return the process's feed, as described by SPINDLE_FEED and SPINDLE_FEED_MODE.

    The same :class:`Feed` is returned while those variables do not change,
    so epochs are counted across calls.
    """
    global _default
    key = (os.environ.get(_contract.FEED), os.environ.get(_contract.FEED_MODE))
    if _default is None or _default[0] != key:
        _default = (key, Feed())
    return _default[1]


def batches():
    """Return the next epoch as an iterator of dicts mapping column name to a 1-D numpy array."""
    return feed().batches()


def tensors(label_column=None, dtype="float32"):
    """Return the next epoch as an iterator of ``(features, labels)`` numpy arrays.

    features is a float32 matrix (rows x features); labels is 1-D, or None
    when the feed has no label column. label_column picks the label when
    the feed does not say (arrow mode without SPINDLE_LABEL_COLUMN).
    """
    return feed().tensors(label_column=label_column, dtype=dtype)


def epochs(kind="batches", label_column=None):
    """Yield every remaining epoch (an :class:`Epoch` to iterate) until the feed has none left."""
    return feed().epochs(kind=kind, label_column=label_column)


def columns():
    """Return the names of the feed's columns, the label last when there is one."""
    return feed().columns()


def last_epoch():
    """Return the number of the epoch opened last (-1 after the last epoch), or None before any."""
    return feed().last_epoch
