"""spindle.ps.Embedding: a PyTorch embedding layer whose table lives on the parameter servers.

Kept apart from spindle.ps so that ``import spindle.ps`` never imports
torch; ``spindle.ps.Embedding`` loads this module on first use.
"""

import numpy as np
import torch

from .ps import _as_keys

__all__ = ["Embedding"]


class _Rows(torch.autograd.Function):
    """Pulls the rows of keys; its backward pushes their gradients.

    anchor is an empty tensor that requires grad, so that autograd records
    the call (and runs the backward) although the rows come from outside
    the graph; it gets no gradient.
    """

    @staticmethod
    def forward(ctx, anchor, client, table, keys):
        ctx.client, ctx.table, ctx.keys = client, table, keys
        return torch.from_numpy(client.pull(table, keys))

    @staticmethod
    def backward(ctx, grad):
        g = grad.detach().to(device="cpu", dtype=torch.float32).contiguous().numpy()
        ctx.client.push(ctx.table, ctx.keys, g)
        return None, None, None, None


class Embedding(torch.nn.Module):
    """An embedding layer over a parameter-server table.

    forward(ids) takes integer ids of any shape and returns float32 rows of
    shape ids.shape + (dim,): it pulls each distinct id once, and the
    backward pass pushes each distinct id's gradient once (the sum over its
    occurrences), for the servers to apply with the table's optimizer.
    Nothing of the table is a parameter of the module: torch's optimizer
    never sees it, and ``client.clock()`` after ``optimizer.step()`` ends
    the step.

    The table is declared with dim and spec (see
    :meth:`spindle.ps.Client.declare`), unless spec is empty and the
    client declared it already.
    """

    def __init__(self, client, table, dim, **spec):
        super().__init__()
        declared = client.dim(table)
        if declared is not None and declared != dim:
            raise ValueError(f"table {table} is declared with dim {declared}, not {dim}")
        if declared is None or spec:
            # Declaring alike again is fine; another spec is refused by the servers.
            client.declare(table, dim, **spec)
        self.client, self.table, self.dim = client, table, dim
        self._anchor = torch.empty(0, requires_grad=True)

    def forward(self, ids):
        if torch.is_tensor(ids):
            if ids.is_floating_point() or ids.is_complex():
                raise TypeError(f"table {self.table}: ids of dtype {ids.dtype}: want integers")
            device, flat = ids.device, ids.detach().cpu().numpy()
        else:
            device, flat = None, np.asarray(ids)
        shape = flat.shape
        uniq, inverse = np.unique(flat.reshape(-1), return_inverse=True)
        keys = _as_keys(uniq, self.table)
        rows = _Rows.apply(self._anchor, self.client, self.table, keys)
        out = rows[torch.from_numpy(inverse.reshape(-1).astype(np.int64))].reshape(*shape, self.dim)
        return out if device is None or device.type == "cpu" else out.to(device)

    def extra_repr(self):
        return f"table={self.table!r}, dim={self.dim}"
