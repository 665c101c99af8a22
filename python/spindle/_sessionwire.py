"""What a spindle.Session and its ranks' zygotes (spindle._zygote) agree on.

Kept apart from spindle._zygote so that importing spindle (which imports
the session) does not import the module ``python -m spindle._zygote`` runs
as ``__main__``: a module imported twice that way is two copies.
"""

import os

from . import _contract

SESSION_DIR = _contract.SESSION_DIR
PRELOAD = _contract.SESSION_PRELOAD
# The line a rank serving over TCP prints (its job's output) for the
# session to learn where it listens.
ADDRESS_MARK = "spindle-session: rank {rank} serves on {addr}"


def socket_path(directory, rank):
    """The Unix socket rank's zygote listens on."""
    return os.path.join(directory, f"rank-{rank}.sock")
